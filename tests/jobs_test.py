"""Tests for experiments.runner.jobs: runs spread over processes."""

import dataclasses
import json
import os
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from experiments.runner import config as config_lib
from experiments.runner import jobs
from experiments.runner import registry
from experiments.infra import test_hooks
from tests import support

_TINY = support.TINY_STACKOVERFLOW
_MAIN_JOB = ('dp_rec', 'dp_rec_no_noise', 'ddgauss16', 'ddgauss16_no_noise',
             'dp_fedavg', 'dp_fedavg_no_noise', 'fedavg')


class SplitRunsTest(parameterized.TestCase):

  @parameterized.parameters(1, 2, 3, 7)
  def test_every_run_once_in_order_and_balanced(self, num_jobs):
    runs = [(name, seed) for name in _MAIN_JOB for seed in (0, 1, 2)]
    shares = jobs.split_runs(runs, num_jobs)
    self.assertLen(shares, num_jobs)
    self.assertCountEqual([r for share in shares for r in share], runs)
    for share in shares:
      self.assertEqual(share, sorted(share, key=runs.index))
    loads = [sum(registry.get(name).relative_cost for name, _ in share)
             for share in shares]
    # Longest processing time first: no list exceeds another by more than
    # one run's cost.
    largest = max(registry.get(name).relative_cost for name in _MAIN_JOB)
    self.assertLessEqual(max(loads) - min(loads), largest)

  def test_more_jobs_than_runs(self):
    shares = jobs.split_runs([('fedavg', 0), ('dp_rec', 0)], 5)
    self.assertEqual(shares, [[('dp_rec', 0)], [('fedavg', 0)]])

  @parameterized.parameters(0, -1, 1.5, True, '2')
  def test_bad_jobs(self, value):
    with self.assertRaisesRegex(ValueError, 'jobs must be a positive int'):
      jobs.split_runs([('fedavg', 0)], value)


class ConfigTest(parameterized.TestCase):

  def test_bad_jobs(self):
    with self.assertRaisesRegex(ValueError, 'jobs'):
      config_lib.RunConfig(task='digits', aggregators=('fedavg',), jobs=0)
    with self.assertRaisesRegex(ValueError, 'jobs=2 with workers=1'):
      config_lib.RunConfig(task='digits', aggregators=('fedavg',), jobs=2,
                           workers=1)

  @parameterized.parameters([()], [(('dp_rec', 0),)])
  def test_job_runs_outside_the_aggregators(self, job_runs):
    with self.assertRaisesRegex(ValueError, 'job_runs must be a non-empty'):
      config_lib.RunConfig(task='digits', aggregators=('fedavg',),
                           num_seeds=2, job_runs=job_runs)

  def test_per_seed_copies_of_a_job_config(self):
    # The training loop copies the config once per seed it trains; a job
    # may train any of the seeds (here the first and the third).
    config = config_lib.RunConfig(
        task='digits', aggregators=('fedavg', 'dp_fedavg'), num_seeds=3,
        job_runs=(('fedavg', 0), ('dp_fedavg', 2)))
    for seed in (0, 2):
      copy = dataclasses.replace(config, seed=seed)
      self.assertEqual(copy.job_runs, config.job_runs)

  def test_json_round_trip(self):
    config = config_lib.RunConfig(
        task='stackoverflow_lr', aggregators=('fedavg', 'dp_rec'), seed=4,
        num_seeds=2, grouping=1000, population=500, embedded_config=_TINY,
        job_runs=(('dp_rec', 5), ('fedavg', 4)))
    data = jobs.to_json(config)
    self.assertEqual(json.loads(json.dumps(data)), data)
    self.assertEqual(jobs.from_json(data), config)


class RunTest(tf.test.TestCase):
  """Two processes against one, at a tiny size."""

  def test_a_failed_job_the_rerun_and_one_process_agree(self):
    data_dir = self.create_tempdir().full_path
    output_dir = self.create_tempdir().full_path
    # Three runs, two jobs: dp_fedavg alone (it costs the most), and fedavg
    # with the control.
    base = dict(task='stackoverflow_lr',
                aggregators=('dp_fedavg', 'fedavg', 'dp_fedavg_no_noise'),
                data_dir=data_dir, rounds=2, clients_per_round=4, seed=5,
                target_epsilon=8.0, eval_every=2, progress=False,
                embedded_config=_TINY)
    config = config_lib.RunConfig(output_dir=output_dir, jobs=2, **base)
    lines = []
    # The dp_fedavg job dies after saving its round 1; the other finishes.
    with mock.patch.dict(os.environ,
                         {test_hooks.KILL_ENV: 'dp_fedavg:1:saved'}):
      with self.assertRaisesRegex(
          jobs.JobError, r'^job 0 exited with code -9: see .*job0\.log '
          r'\(rerun the command'):
        jobs.run(config, print_fn=lines.append)
    task_dir = os.path.join(output_dir, 'stackoverflow_lr')
    self.assertFalse(os.path.exists(os.path.join(task_dir, 'summary.json')))
    self.assertIn('[stackoverflow_lr] job 0: dp_fedavg seed 5 (log '
                  f'{task_dir}/jobs/job0.log).', lines)
    self.assertTrue(any(line.startswith('[job 1] [stackoverflow_lr/fedavg] '
                                        'seed 5: final') for line in lines))
    finished = {name: os.path.getmtime(
        os.path.join(task_dir, name, 'seed5', 'record.json'))
                for name in ('fedavg', 'dp_fedavg_no_noise')}
    # The rerun trains only dp_fedavg, from its saved round, here.
    lines.clear()
    records = jobs.run(config, print_fn=lines.append)
    self.assertEqual([(r['aggregator'], r['seed'], r['rounds'])
                      for r in records],
                     [('dp_fedavg', 5, 2), ('fedavg', 5, 2),
                      ('dp_fedavg_no_noise', 5, 2)])
    self.assertTrue(any('[stackoverflow_lr/dp_fedavg] resuming after round 1'
                        in line for line in lines), lines)
    self.assertFalse(any('fedavg] parameters' in line and 'dp_fedavg]' not in
                         line for line in lines), lines)
    for name, mtime in finished.items():
      self.assertEqual(os.path.getmtime(
          os.path.join(task_dir, name, 'seed5', 'record.json')), mtime)
    with open(os.path.join(task_dir, 'summary.json')) as f:
      self.assertLen(json.load(f), 3)
    for name in ('table.md', 'curves.csv', 'metric_vs_round.png'):
      self.assertTrue(os.path.exists(os.path.join(task_dir, name)), name)
    self._check_side_by_side_agrees(base, task_dir)

  def _check_side_by_side_agrees(self, base, task_dir):
    """Two configurations side by side (`run_side_by_side`: one process
    each) train what the jobs trained, bit for bit (both deterministic):
    FedAvg alone in its process equals FedAvg in a job with the control."""
    names = ('fedavg', 'dp_fedavg_no_noise')
    dirs = [self.create_tempdir().full_path for _ in names]
    lines = []
    records = jobs.run_side_by_side(
        [config_lib.RunConfig(**dict(base, aggregators=(name,)),
                              output_dir=folder)
         for name, folder in zip(names, dirs)], print_fn=lines.append)
    self.assertEqual([(r['aggregator'], r['seed']) for r in records],
                     [(name, 5) for name in names])
    for j, (name, folder) in enumerate(zip(names, dirs)):
      got = os.path.join(folder, 'stackoverflow_lr')
      # One process each, numbered across the configurations.
      self.assertTrue(os.path.exists(os.path.join(got, 'jobs',
                                                  f'job{j}.log')))
      self.assertTrue(any(l.startswith(f'[job {j}] [stackoverflow_lr/'
                                       f'{name}] seed 5: final')
                          for l in lines), lines)
      self.assertTrue(os.path.exists(os.path.join(got, 'summary.json')))
      self._assert_same_state(task_dir, got, name)

  def _assert_same_state(self, task_dir, other_dir, name):
    states = [os.path.join(folder, name, 'seed5', 'checkpoints', 'round_2',
                           'state.npz') for folder in (task_dir, other_dir)]
    with np.load(states[0]) as a, np.load(states[1]) as b:
      leaves = [key for key in a.files if key.startswith('leaves/')]
      self.assertNotEmpty(leaves)
      self.assertEqual(leaves, [k for k in b.files if k.startswith('leaves/')])
      for key in leaves:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


if __name__ == '__main__':
  tf.test.main()
