"""A started run continues at its own parameters (`run_params`)."""

import glob
import json
import math
import os
import shutil
import signal

import tensorflow as tf

from experiments.runner import calibration_cache
from experiments.runner import ledger
from experiments.runner import run_params
from experiments.infra import test_hooks
from tests import support

_C = 0.5496089266880293


def _ulps_down(value, n):
  for _ in range(n):
    value = math.nextafter(value, 0.0)
  return value


def _config(c=_C, rounds=5):
  return dict(task='digits', aggregator='dp_rec', rounds=rounds,
              params=dict(clip_ratio=c, l2_clip=c * 0.0025, bits=4,
                          grouping='tensor'))


class ParamsToPinTest(tf.test.TestCase):

  def _started_run(self, config):
    run_dir = self.create_tempdir().full_path
    run_params.write(run_dir, config)
    with open(os.path.join(run_dir, ledger.LEDGER_FILE), 'w') as f:
      f.write('{}')
    return run_dir

  def test_last_bits_pin_the_runs_own_params(self):
    run_dir = self._started_run(_config())
    pins = run_params.params_to_pin(run_dir, _config(_ulps_down(_C, 3)))
    self.assertEqual(pins['clip_ratio'], _C)
    self.assertEqual(pins['l2_clip'], _C * 0.0025)

  def test_nothing_to_pin(self):
    run_dir = self._started_run(_config())
    self.assertIsNone(run_params.params_to_pin(run_dir, _config()))
    # Another field differs: left to the ledger's refusal.
    self.assertIsNone(run_params.params_to_pin(
        run_dir, _config(_ulps_down(_C, 3), rounds=6)))
    # No stored configuration (a run from before it was kept), or none
    # started.
    self.assertIsNone(run_params.params_to_pin(
        self.create_tempdir().full_path, _config(_ulps_down(_C, 3))))
    fresh = self.create_tempdir().full_path
    run_params.write(fresh, _config())
    self.assertIsNone(run_params.params_to_pin(fresh,
                                               _config(_ulps_down(_C, 3))))

  def test_larger_differences_name_both_values(self):
    run_dir = self._started_run(_config())
    other = _C * (1 - 1e-4)
    with self.assertRaises(run_params.CalibrationDriftError) as raised:
      run_params.params_to_pin(run_dir, _config(other))
    message = str(raised.exception)
    self.assertIn(f'clip_ratio={_C!r}', message)
    self.assertIn(f'clip_ratio={other!r}', message)
    self.assertNotIn('\n', message)

  def test_record_never_overwrites_a_started_foreign_run(self):
    run_dir = self._started_run(_config())
    run_params.record(run_dir, _config(rounds=9))
    self.assertEqual(run_params.stored(run_dir), _config())
    run_params.record(run_dir, _config(rounds=9), restart=True)
    self.assertEqual(run_params.stored(run_dir)['rounds'], 9)


class PinnedCalibrationTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    os.environ[calibration_cache.ENV] = 'off'
    self.addCleanup(os.environ.pop, calibration_cache.ENV)

  def _calibrate(self, epsilon_fn=lambda c: c):
    return calibration_cache.calibrate('test', lambda target_epsilon: 1.0,
                                       epsilon_fn, 2.0)

  def test_pins_within_the_last_bits_and_the_target(self):
    close = _ulps_down(1.0, 5)
    with calibration_cache.pinned([close, 7.0]):
      self.assertEqual(self._calibrate(), close)
    release = 1.0 - 2e-6  # Another release of the accountant's search.
    with calibration_cache.pinned([release]):
      self.assertEqual(self._calibrate(), release)
    self.assertEqual(self._calibrate(), 1.0)

  def test_refuses_far_pins_and_pins_over_the_target(self):
    with calibration_cache.pinned([1.0 + 1e-4]):
      self.assertEqual(self._calibrate(), 1.0)
    close = math.nextafter(1.0, 2.0)
    with calibration_cache.pinned([close]):
      # This machine's accountant puts the pin over the target: not used.
      self.assertEqual(self._calibrate(lambda c: 2.0 + (c > 1.0)), 1.0)

  def test_a_pin_meets_the_target_with_the_margin_or_is_refused(self):
    # The target is 2.0; the pin's epsilon is set by the pin alone (the
    # calibration's own value, 1.0, is never checked).
    margin = calibration_cache.PIN_EPSILON_MARGIN
    self.assertEqual(margin, 1e-6)
    pin = _ulps_down(1.0, 5)
    at_margin = 2.0 * (1 - margin)
    for epsilon, used in (
        (2.0, False),  # On the target: refused (it was used before).
        (2.0 * (1 - 2e-8), False),  # Within FFT round-off: refused.
        (math.nextafter(at_margin, 3.0), False),  # Just inside the margin.
        (at_margin, True),  # On the margin: used.
        (2.0 * (1 - 1e-5), True)):  # A lattice answer's margin: used.
      with calibration_cache.pinned([pin]):
        got = self._calibrate(lambda c, e=epsilon: e if c == pin else 1.0)
      self.assertEqual(got, pin if used else 1.0, epsilon)


class ResumeAcrossMachinesTest(tf.test.TestCase):
  """A DP-REC run killed after round 3, resumed where its calibration
  differs in the last bits (its cached value moved down a few ulp, as
  another machine's FFTs give), and where it differs by more."""

  def _killed_run(self):
    root = self.create_tempdir().full_path
    cache = os.path.join(root, 'cache')
    args = ['--task=digits', '--aggregators=dp_rec', '--rounds=5',
            '--clients_per_round=4', '--target_epsilon=8', '--eval_every=10',
            f'--output_dir={os.path.join(root, "out")}',
            f'--data_dir={os.path.join(root, "data")}']
    env = {calibration_cache.ENV: cache}
    killed = support.run_cli(
        args, dict(env, **{test_hooks.KILL_ENV: 'dp_rec:3:saved'}))
    self.assertEqual(killed.returncode, -signal.SIGKILL, killed.stderr[-3000:])
    run_dir = os.path.join(root, 'out', 'digits', 'dp_rec', 'seed0')
    return args, env, cache, run_dir

  def _move_cache(self, cache, move):
    paths = glob.glob(os.path.join(cache, '*.json'))
    self.assertNotEmpty(paths)
    for path in paths:
      with open(path) as f:
        stored = json.load(f)
      if not isinstance(stored.get('value'), float):
        continue  # Not a calibration (a remembered search, say).
      stored['value'] = move(stored['value'])
      with open(path, 'w') as f:
        json.dump(stored, f)

  def test_last_bits_continue_and_more_is_refused(self):
    args, env, cache, run_dir = self._killed_run()
    started = run_params.stored(run_dir)['params']
    with open(os.path.join(run_dir, ledger.LEDGER_FILE)) as f:
      fingerprint = json.load(f)['fingerprint']
    far_dir = self.create_tempdir().full_path
    shutil.copytree(os.path.dirname(os.path.dirname(os.path.dirname(
        run_dir))), os.path.join(far_dir, 'out'))
    shutil.copytree(cache, os.path.join(far_dir, 'cache'))
    self._move_cache(cache, lambda v: _ulps_down(v, 3))
    # The other machine's processes: this one, on the files they read.
    resumed = support.run_in_process(args, env)
    output = resumed.stdout + resumed.stderr
    self.assertEqual(resumed.returncode, 0, output[-3000:])
    self.assertIn('continues at the parameters it started with', output)
    self.assertIn('resuming after round 3', output)
    with open(os.path.join(run_dir, 'record.json')) as f:
      record = json.load(f)['record']
    self.assertEqual(record['params']['clip_ratio'], started['clip_ratio'])
    self.assertEqual(record['params']['l2_clip'], started['l2_clip'])
    self.assertEqual(record['rounds'], 5)
    self.assertEqual(record['lost_rounds'], 0)
    with open(os.path.join(run_dir, ledger.LEDGER_FILE)) as f:
      entry = json.load(f)
    self.assertEqual(entry['fingerprint'], fingerprint)  # The same ledger.
    self.assertEqual(entry['started'], 5)
    self.assertLessEqual(record['epsilon'], 8.0)
    # By more than CALIBRATION_RTOL: one line naming both values, exit 2.
    self._move_cache(os.path.join(far_dir, 'cache'),
                     lambda v: v * (1 - 1e-4))
    far_args = [a.replace(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(run_dir)))), far_dir) for a in args]
    refused = support.run_in_process(
        far_args, {calibration_cache.ENV: os.path.join(far_dir, 'cache')})
    self.assertEqual(refused.returncode, 2, refused.stderr[-3000:])
    error = [l for l in refused.stderr.splitlines() if l.startswith('error')]
    self.assertLen(error, 1)
    self.assertIn(f"clip_ratio={started['clip_ratio']!r}", error[0])
    self.assertIn('this machine calibrates clip_ratio=', error[0])


if __name__ == '__main__':
  tf.test.main()
