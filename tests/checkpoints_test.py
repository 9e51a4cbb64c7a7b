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
  """A finished run's record is reused across calibrations of the same
  target only."""

  _C = 0.5496089266880293  # DP-REC's calibrated c of the Fashion-MNIST rows.

  def _config(self, **params):
    return dict(task='fashion_mnist', rounds=300, seed=0,
                params=dict(dict(clip_ratio=self._C, bits=4), **params))

  def _read(self, written, reading):
    directory = self.create_tempdir().full_path
    printed = []
    checkpoints.RunCheckpointer(directory, written, print_fn=printed.append
                                ).write_record(
                                    {'params': written['params']}, [])
    record = checkpoints.RunCheckpointer(
        directory, reading, print_fn=printed.append).read_record()
    return record, printed

  def test_last_bits_of_a_calibration_reuse_the_record(self):
    # One ulp apart: the value this machine's FFTs calibrate and another's.
    other = float(np.nextafter(self._C, 0.0))
    record, printed = self._read(self._config(),
                                 self._config(clip_ratio=other))
    self.assertEqual(record['record']['params']['clip_ratio'], self._C)
    self.assertLen(printed, 1)
    self.assertIn('to a relative 1e-05', printed[0])
    self.assertIn(repr(other), printed[0])

  def test_another_accountant_release_reuses_the_record(self):
    # 1.5e-6 apart, relative: the accountant's search changed (issue 56).
    other = self._C * (1 - 1.5e-6)
    record, printed = self._read(self._config(),
                                 self._config(clip_ratio=other))
    self.assertEqual(record['record']['params']['clip_ratio'], self._C)
    self.assertLen(printed, 1)

  @parameterized.named_parameters(
      ('param_off_by_1e-4', dict(params=dict(clip_ratio=_C * (1 + 1e-4),
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
    record, printed = self._read(self._config(),
                                 dict(self._config(), **change))
    self.assertIsNone(record)
    self.assertEmpty(printed)

  def test_identical_config_reuses_silently(self):
    record, printed = self._read(self._config(), self._config())
    self.assertEqual(record['record']['params'], self._config()['params'])
    self.assertEmpty(printed)


if __name__ == '__main__':
  tf.test.main()
