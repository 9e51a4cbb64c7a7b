"""Tests of experiments.runner.checkpoints: the exact encoding, and a
finished run's record reused across calibrations of the same target
only (`calibration_cache.CALIBRATION_RTOL`)."""

import json

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from experiments.runner import checkpoints


class CheckpointEncodingTest(tf.test.TestCase):

  def test_exact_round_trip(self):
    value = dict(
        rng=np.random.default_rng(5).bit_generator.state,
        arrays=[np.float32([1.5, np.nan, -0.0]), np.int64([[2**62, -3]])],
        keys={3: 'int key', 'c1': [1, 2.5, None]})
    decoded = checkpoints.decode(json.loads(json.dumps(
        checkpoints.encode(value))))
    self.assertEqual(decoded['rng'], value['rng'])
    self.assertEqual(decoded['keys'], value['keys'])
    for a, b in zip(decoded['arrays'], value['arrays']):
      self.assertEqual(a.dtype, b.dtype)
      self.assertEqual(a.tobytes(), b.tobytes())
    rng = np.random.default_rng()
    rng.bit_generator.state = decoded['rng']
    self.assertEqual(rng.integers(10**9),
                     np.random.default_rng(5).integers(10**9))


class RecordReuseTest(parameterized.TestCase):
  """A finished run's record is read as it is only under its own
  configuration, and named for a recalibration only when its params differ
  in their calibration alone."""

  _C = 0.5496089266880293  # DP-REC's calibrated c of the Fashion-MNIST rows.

  def _config(self, **params):
    return dict(task='fashion_mnist', rounds=300, seed=0,
                params=dict(dict(clip_ratio=self._C, bits=4), **params))

  def _read(self, written, reading):
    """(read_record, recalibration_params) of a record of `written` read
    under `reading`."""
    directory = self.create_tempdir().full_path
    checkpoints.RunCheckpointer(directory, written).write_record(
        {'params': written['params']}, [])
    reader = checkpoints.RunCheckpointer(directory, reading)
    return reader.read_record(), reader.recalibration_params()

  @parameterized.named_parameters(
      # One ulp apart: the value this machine's FFTs calibrate and another's.
      ('last_bits', float(np.nextafter(_C, 0.0))),
      # 1.5e-6 and 9e-6 apart: the accountant's search changed (issue 56).
      ('another_accountant_release', _C * (1 - 1.5e-6)),
      ('within_the_tolerance', _C * (1 + 9e-6)),
  )
  def test_a_recalibration_names_the_records_own_params(self, other):
    # Never reused as it is: the caller pins these params, which this
    # accountant checks against the target, and reads it again.
    record, stored = self._read(self._config(),
                                self._config(clip_ratio=other))
    self.assertIsNone(record)
    self.assertEqual(stored, self._config()['params'])

  def test_the_accountings_earlier_name_is_the_same_run(self):
    # Records written when the default accounting was 'pld' hold it in
    # their params; the runner fingerprints today's 'min_pld_rdp' under
    # that name, so the record is read as it is.
    earlier = self._config(accounting='pld')
    today = self._config(accounting='min_pld_rdp')
    self.assertEqual(checkpoints.fingerprint_params(today['params']),
                     earlier['params'])
    record, _ = self._read(
        earlier, dict(today, params=checkpoints.fingerprint_params(
            today['params'])))
    self.assertEqual(record['record'], {'params': earlier['params']})
    # Another accounting is another run.
    record, stored = self._read(earlier, self._config(accounting='rdp'))
    self.assertIsNone(record)
    self.assertIsNone(stored)
    # A recalibration of a record with the earlier name is found too.
    record, stored = self._read(
        earlier, self._config(accounting='pld',
                              clip_ratio=self._C * (1 - 1.5e-6)))
    self.assertIsNone(record)
    self.assertEqual(stored, earlier['params'])

  @parameterized.named_parameters(
      ('param_off_by_2e-5', dict(params=dict(clip_ratio=_C * (1 + 2e-5),
                                             bits=4))),
      ('other_bits', dict(params=dict(clip_ratio=_C, bits=5))),
      ('bits_as_float', dict(params=dict(clip_ratio=_C, bits=4.0))),
      ('extra_param', dict(params=dict(clip_ratio=_C, bits=4, l2_clip=0.1))),
      ('other_rounds', dict(rounds=301)),
      ('other_rounds_and_last_bits',
       dict(rounds=301, params=dict(clip_ratio=float(np.nextafter(_C, 1.0)),
                                    bits=4))),
  )
  def test_any_other_difference_retrains(self, change):
    record, stored = self._read(self._config(),
                                dict(self._config(), **change))
    self.assertIsNone(record)
    self.assertIsNone(stored)

  def test_identical_config_reuses_the_record(self):
    record, stored = self._read(self._config(), self._config())
    self.assertEqual(record['record']['params'], self._config()['params'])
    self.assertIsNone(stored)


if __name__ == '__main__':
  tf.test.main()
