"""Quiet by default (`experiments.infra.quiet`): no native logging lines."""

import os
import subprocess
import sys
from unittest import mock

import tensorflow as tf

from experiments.infra import quiet
from tests import support

_REPO = support.REPO


def _main_job_one_round(root, *extra):
  """`experiments.run` for one round, with the user's environment free of
  the levels `quiet` sets (this test process has them)."""
  env = {k: v for k, v in os.environ.items() if k not in quiet.SETTINGS}
  return subprocess.run(
      [sys.executable, '-m', 'experiments.run', '--task=digits',
       '--aggregators=fedavg', '--rounds=1', '--clients_per_round=4',
       '--num_seeds=1', '--noprogress',
       f'--data_dir={os.path.join(root, "data")}',
       f'--output_dir={os.path.join(root, "out")}',
       *extra], cwd=_REPO, capture_output=True, text=True, timeout=600,
      env=env)


def _native(result):
  return [l for l in (result.stdout + result.stderr).splitlines()
          if quiet.NATIVE_LOG_LINE.match(l)]


class SetupTest(tf.test.TestCase):

  def test_sets_the_levels_the_user_has_not(self):
    with mock.patch.dict(os.environ, {'TF_CPP_MIN_LOG_LEVEL': '0'}):
      os.environ.pop('GRPC_VERBOSITY', None)
      changed = quiet.setup(['prog'])
      self.assertEqual(changed, {'GRPC_VERBOSITY': 'NONE'})
      self.assertEqual(os.environ['TF_CPP_MIN_LOG_LEVEL'], '0')

  def test_verbose_sets_nothing(self):
    with mock.patch.dict(os.environ, {}, clear=True):
      for flag in ('--verbose', '--verbose=true'):
        self.assertEqual(quiet.setup(['prog', '--task=x', flag]), {})
      self.assertNotIn('TF_CPP_MIN_LOG_LEVEL', os.environ)
      self.assertEqual(quiet.setup(['prog', '--noverbose']),
                       quiet.SETTINGS)


class MainJobTest(tf.test.TestCase):

  def test_one_round_prints_no_native_line_and_verbose_brings_them(self):
    root = self.create_tempdir().full_path
    result = _main_job_one_round(root)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertEmpty(_native(result))
    # Nor a report of TFF's objects at exit (worker_reaper).
    self.assertNotIn('Exception ignored', result.stderr)
    self.assertIn('[digits/fedavg] seed 0: final accuracy=', result.stdout)
    # The same folder: the run is reused, not trained again. TensorFlow's
    # import alone logs natively when nothing quiets it.
    verbose = _main_job_one_round(root, '--verbose')
    self.assertEqual(verbose.returncode, 0, verbose.stderr[-3000:])
    self.assertIn('already finished', verbose.stdout)
    self.assertNotEmpty(_native(verbose))  # The check can see them.


if __name__ == '__main__':
  tf.test.main()
