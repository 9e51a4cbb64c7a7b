"""Tests of experiments.run's command line: bad flags and errors once the
run starts are refused in one line."""

import os
import re
import subprocess
import sys
from unittest import mock

from absl import flags as absl_flags
from absl.testing import absltest
from absl.testing import parameterized

from experiments import run as run_lib
from experiments.runner import config as config_lib
from tests import support


class CliTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ('unknown_task', ['--task=cifar'], 'unknown'),
      ('bits_zero', ['--bits=0'], 'bits'),
      ('bits_too_large', ['--bits=40'], 'bits must be in [1, 24]'),
      ('epsilon_zero', ['--target_epsilon=0'], 'target_epsilon'),
      ('unknown_aggregator', ['--aggregators=dp_rec,magic'], 'magic'),
      ('bad_grouping', ['--grouping=layers'], 'grouping'),
      ('bad_downlink', ['--downlink=broadcast'], 'downlink'),
      ('negative_workers', ['--workers=-1'], 'workers'),
      ('ddgauss_on_workers', ['--workers=2'], 'DDGauss'),
      ('negative_verify', ['--verify_replay_clients=-1'],
       'verify_replay_clients'),
      ('duplicate_aggregators', ['--aggregators=dp_rec,fedavg,dp_rec'],
       'more than once'),
      ('unknown_flag', ['--epsilon=1'], 'epsilon'),
      ('noise_multiplier_out_of_range',
       ['--aggregators=dp_fedavg', '--noise_multiplier=1e6'],
       'noise_multiplier must be in'),
      ('bad_population', ['--population=1'],
       "--population must be 'stored' or an int >= 2, found '1'"),
  )
  def test_bad_flags_are_refused_before_anything_runs(self, flags, message):
    # What `experiments.run` checks before it builds anything: absl's
    # parser, then the flags' text, then `RunConfig`'s checks. Each of the
    # three ways out is run as a command in test_bad_flags_exit_in_one_line.
    define_flags = run_lib._define_flags  # pylint: disable=protected-access
    with support.command_flags(define_flags), \
        self.assertRaisesRegex((absl_flags.Error, TypeError, ValueError),
                               re.escape(message)):
      absl_flags.FLAGS(['experiments.run', '--noprogress'] + flags)
      run_lib.validate_flags()
      run_lib.config_from_flags()

  @parameterized.named_parameters(
      # One command per way out: absl's parser, RunConfig's checks, and an
      # error raised once the run starts (the data).
      ('unknown_flag', ['--epsilon=1'], 'epsilon'),
      # Refused before any data is generated (it was a traceback, exit 1).
      ('bits_too_large', ['--bits=40'], 'bits must be in [1, 24]'),
      ('missing_real_data', ['--task=mnist', '--data_dir=/nonexistent'],
       'mnist.npz'),
  )
  def test_bad_flags_exit_in_one_line(self, flags, message):
    # Issue 14: one line on stderr, exit code 2, no traceback, no help dump.
    data_dir = self.create_tempdir().full_path
    result = subprocess.run(
        [sys.executable, '-m', 'experiments.run', '--noprogress',
         f'--data_dir={data_dir}'] + flags,
        cwd=support.REPO, capture_output=True, text=True, timeout=300)
    self._assert_one_line(result, message)

  @parameterized.named_parameters(
      # Refused before anything trains (fedavg is listed first).
      ('noise_multiplier_over_budget',
       ['--task=digits', '--aggregators=fedavg,dp_fedavg', '--rounds=2',
        '--noise_multiplier=0.01'], 'above target_epsilon=1.0'),
      ('output_is_a_file', ['--task=digits', '--output_dir=/etc/hostname'],
       'cannot be used'),
      ('output_unwritable', ['--task=digits', '--output_dir=/proc/out'],
       'cannot be used'),
  )
  def test_errors_once_the_run_starts_are_one_line(self, flags, message):
    # The budget and the output folder, raised in `execute` as the data's
    # error is: the command's own path, in this process (its exit is
    # test_bad_flags_exit_in_one_line's).
    data_dir = self.create_tempdir().full_path
    result = support.run_in_process([f'--data_dir={data_dir}'] + flags)
    self._assert_one_line(result, message)

  def _assert_one_line(self, result, message):
    self.assertEqual(result.returncode, 2, result.stderr[-2000:])
    self.assertIn(message, result.stderr)
    self.assertNotIn('Traceback', result.stderr)
    errors = [l for l in result.stderr.splitlines() if l.startswith('error')]
    self.assertLen(errors, 1)

  def test_epsilon_sweep_refuses_a_grid_that_varies_the_target(self):
    result = subprocess.run(
        [sys.executable, '-m', 'experiments.epsilon_sweep',
         '--grids=dp_rec: target_epsilon=64', '--population=5000'],
        cwd=support.REPO, capture_output=True, text=True, timeout=300)
    self.assertEqual(result.returncode, 2, result.stderr[-2000:])
    self.assertIn("error: --grids: dp_rec: 'target_epsilon' cannot vary",
                  result.stderr)
    self.assertNotIn('Traceback', result.stderr)


class JobsDefaultTest(parameterized.TestCase):
  """--jobs: one process per core by default, at most one per run."""

  @parameterized.named_parameters(
      # The main job: 8 aggregators x 3 seeds = 24 runs.
      ('one_core', 1, [], 1),
      ('two_cores', 2, [], 2),
      ('more_cores_than_runs', 64, [], 24),
      ('one_run', 2, ['--aggregators=fedavg', '--num_seeds=1'], 1),
      ('three_runs', 8, ['--aggregators=fedavg', '--num_seeds=3'], 3),
      ('one_process_asked', 2, ['--jobs=1'], 1),
      ('more_asked', 2, ['--jobs=3'], 3),
      ('workers', 2, ['--aggregators=fedavg', '--workers=2'], 1),
  )
  def test_jobs(self, cores, flags, expected):
    define_flags = run_lib._define_flags  # pylint: disable=protected-access
    with support.command_flags(define_flags), mock.patch.object(
        config_lib, 'available_cores', return_value=cores):
      absl_flags.FLAGS(['experiments.run', '--noprogress'] + flags)
      self.assertEqual(run_lib.config_from_flags().jobs, expected)

  def test_a_refused_count_is_refused_by_run_config(self):
    define_flags = run_lib._define_flags  # pylint: disable=protected-access
    with support.command_flags(define_flags), \
        self.assertRaisesRegex(ValueError, 'num_seeds'):
      absl_flags.FLAGS(['experiments.run', '--num_seeds=0'])
      run_lib.config_from_flags()

  def test_available_cores_are_this_process_s(self):
    with mock.patch.object(os, 'sched_getaffinity', return_value={0, 3, 5}):
      self.assertEqual(config_lib.available_cores(), 3)
    self.assertEqual(config_lib.default_jobs(5, workers=0),
                     min(5, config_lib.available_cores()))
    self.assertEqual(config_lib.default_jobs(5, workers=2), 1)


if __name__ == '__main__':
  absltest.main()
