"""Tests for experiments.runner.jobs: runs spread over processes."""

import contextlib
import dataclasses
import io
import json
import os
import sys
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from experiments.runner import config as config_lib
from experiments.runner import job_schedule
from experiments.runner import jobs
from experiments.runner import registry
from experiments.infra import test_hooks
from tests import support

_TINY = support.TINY_STACKOVERFLOW
_MAIN_JOB = ('dp_rec', 'dp_rec_no_noise', 'ddgauss16', 'ddgauss16_no_noise',
             'dp_fedavg', 'dp_fedavg_no_noise', 'fedavg')


class SplitRunsTest(parameterized.TestCase):

  @parameterized.parameters(1, 2, 3, 7)
  def test_every_run_once_grouped_and_balanced(self, num_jobs):
    runs = [(name, seed) for name in _MAIN_JOB for seed in (0, 1, 2)]
    shares = jobs.split_runs(runs, num_jobs)
    self.assertLen(shares, num_jobs)
    self.assertCountEqual([r for share in shares for r in share], runs)
    costs = {name: registry.get(name).relative_cost for name in _MAIN_JOB}
    for share in shares:
      names = list(dict.fromkeys(name for name, _ in share))
      # Aggregators costliest first, each with its seeds together, in order.
      self.assertEqual(names, sorted(names, key=lambda n: -costs[n]))
      for name in names:
        seeds = [s for n, s in share if n == name]
        self.assertEqual(seeds, sorted(seeds))
        self.assertEqual(share[share.index((name, seeds[0])):][:len(seeds)],
                         [(name, s) for s in seeds])
    loads = [sum(costs[name] for name, _ in share) for share in shares]
    # The contiguous split with the least largest load: no share exceeds
    # the mean by more than one run's cost.
    self.assertLessEqual(max(loads),
                         sum(loads) / num_jobs + max(costs.values()))

  def test_the_main_job_in_two(self):
    # Grouped by sampling: DP-REC with its control (with replacement) in
    # one job, the fixed-size and Poisson samplers' runs in the other but
    # for one DDGauss seed; each share ends with its cheapest runs.
    runs = [(name, seed) for name in _MAIN_JOB + ('dp_fedavg_rdp',)
            for seed in (0, 1, 2)]
    first, second = jobs.split_runs(runs, 2)
    self.assertEqual(first, [('dp_rec', 0), ('dp_rec', 1), ('dp_rec', 2),
                             ('ddgauss16', 0), ('dp_rec_no_noise', 0),
                             ('dp_rec_no_noise', 1), ('dp_rec_no_noise', 2)])
    self.assertEqual(second[:2], [('ddgauss16', 1), ('ddgauss16', 2)])
    self.assertEqual(second[-3:], [('dp_fedavg_no_noise', s) for s in range(3)])

  def test_more_jobs_than_runs(self):
    shares = jobs.split_runs([('fedavg', 0), ('dp_rec', 0)], 5)
    self.assertEqual(shares, [[('fedavg', 0)], [('dp_rec', 0)]])
    self.assertEqual(jobs.split_runs([], 2), [])

  @parameterized.parameters(0, -1, 1.5, True, '2')
  def test_bad_jobs(self, value):
    with self.assertRaisesRegex(ValueError, 'jobs must be a positive int'):
      jobs.split_runs([('fedavg', 0)], value)


class ScheduleTest(absltest.TestCase):

  def _claims(self):
    claims = job_schedule.Claims(os.path.join(self.create_tempdir().full_path,
                                          'claims'))
    claims.reset()
    return claims

  def test_own_share_then_the_others_from_their_ends(self):
    claims = self._claims()
    shares = [[('dp_rec', 0)],
              [('fedavg', 0), ('fedavg', 1), ('dp_fedavg', 0)]]
    said = []
    second = job_schedule.schedule(shares, 1, claims)
    self.assertEqual(next(second), ('fedavg', 0))
    # Job 0 trains its run, then takes over the other share's last.
    self.assertEqual(
        list(job_schedule.schedule(shares, 0, claims, said.append)),
        [('dp_rec', 0), ('dp_fedavg', 0), ('fedavg', 1)])
    self.assertEqual(said, ['job 0 takes over dp_fedavg seed 0 from job 1.',
                            'job 0 takes over fedavg seed 1 from job 1.'])
    self.assertEqual(list(second), [])  # All taken.

  def test_every_run_once_whatever_the_interleaving(self):
    runs = [(name, seed) for name in _MAIN_JOB for seed in (0, 1, 2)]
    shares = jobs.split_runs(runs, 3)
    claims = self._claims()
    schedules = [job_schedule.schedule(shares, j, claims) for j in range(3)]
    rng = np.random.default_rng(0)
    trained, live = [], list(range(3))
    while live:
      j = live[rng.integers(len(live))]
      run = next(schedules[j], None)
      if run is None:
        live.remove(j)
      else:
        trained.append(run)
    self.assertCountEqual(trained, runs)

  def test_claims_are_exclusive_and_reset(self):
    claims = self._claims()
    self.assertTrue(claims.take(('fedavg', -1)))
    self.assertFalse(claims.take(('fedavg', -1)))
    self.assertTrue(claims.taken(('fedavg', -1)))
    claims.reset()
    self.assertFalse(claims.taken(('fedavg', -1)))


class OutputTest(absltest.TestCase):
  """What the parent prints of its children's logs."""

  def test_whole_lines_with_the_job_prefix_native_chatter_left_out(self):
    log = os.path.join(self.create_tempdir().full_path, 'job3.log')
    with open(log, 'w') as f:
      f.write('--- header\n')
      offset = f.tell()
      f.write('[so/fedavg] round 10/50 loss=0.1\n'
              '2026-11-27 16:23:42.237442: E tensorflow/core/x.cc:1] noise\n'
              'I0000 00:00:1 grpc chatter\n'
              'F0000 00:00:1 fatal: why the job died\n'
              '[so/fedavg] seed 0: fin')
    printed = []
    print_new_lines = jobs._print_new_lines  # pylint: disable=protected-access
    offset = print_new_lines(log, offset, '[job 3] ', printed.append,
                             final=False)
    # The partial last line waits for its end.
    self.assertEqual(printed, ['[job 3] [so/fedavg] round 10/50 loss=0.1',
                               '[job 3] F0000 00:00:1 fatal: why the job died'])
    with open(log, 'a') as f:
      f.write('al\n')
    printed.clear()
    print_new_lines(log, offset, '[job 3] ', printed.append, final=True)
    self.assertEqual(printed, ['[job 3] [so/fedavg] seed 0: final'])

  def test_lines_the_parent_said_are_not_repeated(self):
    log = os.path.join(self.create_tempdir().full_path, 'job0.log')
    with open(log, 'w') as f:
      f.write('[so] data: embedded.\n[so/dp_rec] parameters: c\n')
    printed = []
    print_new_lines = jobs._print_new_lines  # pylint: disable=protected-access
    print_new_lines(log, 0, '[job 0] ', printed.append, final=True,
                    said=frozenset(['[so] data: embedded.']))
    self.assertEqual(printed, ['[job 0] [so/dp_rec] parameters: c'])

  def test_a_share_in_one_line(self):
    names = jobs._names  # pylint: disable=protected-access
    self.assertEqual(names([('dp_rec', 0), ('dp_rec', 1), ('fedavg', 2)]),
                     'dp_rec seeds 0, 1, fedavg seed 2')


class ChildCommandTest(absltest.TestCase):
  """The child's command line: absl's flags, no positional arguments."""

  def test_unexpected_arguments_are_refused_in_one_line(self):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), \
        self.assertRaises(SystemExit) as exit_:
      support.run_main(jobs, ['job0.json'])
    self.assertEqual(exit_.exception.code, 2)
    self.assertEqual(err.getvalue(),
                     "error: Unexpected arguments: ['job0.json']\n")

  def test_no_job_on_stdin_ends_at_once(self):
    # The parent closes the stdin of a child it needs no job from.
    with mock.patch.object(sys, 'stdin', io.StringIO('')), \
        mock.patch.object(jobs, 'train_job') as train_job:
      support.run_main(jobs, [])
    train_job.assert_not_called()

  def test_a_job_file_by_flag(self):
    path = os.path.join(self.create_tempdir().full_path, 'job0.json')
    with open(path, 'w') as f:
      json.dump({'log': 'unused'}, f)
    with mock.patch.object(sys, 'stdin', io.StringIO('')), \
        mock.patch.object(jobs, 'train_job') as train_job:
      support.run_main(jobs, [f'--job_file={path}'])
    self.assertEqual(train_job.call_args.args[0], {'log': 'unused'})


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
                target_epsilon=8.0, eval_every=2, progress=True,
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
    # Progress as plain lines, each with its job's prefix.
    self.assertTrue(any(line.startswith('[job 1] [stackoverflow_lr/fedavg] '
                                        'round 2/2 ') for line in lines),
                    lines)
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
    phase_lines = [l for l in lines if l.startswith(
        'Time by phase in the 2 jobs (s, summed over them): ')]
    self.assertLen(phase_lines, 1)
    self.assertIn('process.next ', phase_lines[0])

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
