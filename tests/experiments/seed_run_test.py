"""Tests of experiments.runner.seed_run's resume: runs of `experiments.run`
killed at any phase of a round resume to the results of an uninterrupted
run, and never under-count the privacy spent; and a run stops before a
round that would exceed its target epsilon."""

import csv
import json
import math
import os
import shutil
import signal
import tempfile
import types
from unittest import mock

import numpy as np
import tensorflow as tf

from experiments.infra import compile_cache
from experiments.infra import test_hooks
from experiments.runner import execution
from experiments.runner import planning
from experiments.runner import seed_run
from tests import support
from tff_dprec import accounting


class ResumeTest(tf.test.TestCase):
  """SIGKILL at any phase of a round, resume: same results as no crash."""

  # A DP-REC run killed after round 3 trained, before it saved (made once
  # per test process, `_killed_after_round_3_trained`).
  _killed_dir = None

  @classmethod
  def tearDownClass(cls):
    if cls._killed_dir is not None:
      shutil.rmtree(cls._killed_dir, ignore_errors=True)
      cls._killed_dir = None
    super().tearDownClass()

  def _killed_after_round_3_trained(self):
    """(args, output_dir) of a fresh copy of the killed run's folder."""
    def args_for(output_dir, data_dir):
      return ['--task=digits', '--aggregators=dp_rec', '--rounds=5',
              '--clients_per_round=4', '--target_epsilon=8',
              '--eval_every=10', f'--output_dir={output_dir}',
              f'--data_dir={data_dir}']
    cls = type(self)
    if cls._killed_dir is None:
      made = tempfile.mkdtemp()
      killed = support.run_cli(
          args_for(os.path.join(made, 'out'), os.path.join(made, 'data')),
          {test_hooks.KILL_ENV: 'dp_rec:3:trained'})
      self.assertEqual(killed.returncode, -signal.SIGKILL,
                       killed.stderr[-3000:])
      self.assertNotIn('The planner', killed.stdout)  # --noplan.
      cls._killed_dir = made
    output_dir = os.path.join(self.create_tempdir().full_path, 'out')
    shutil.copytree(os.path.join(cls._killed_dir, 'out'), output_dir)
    return (args_for(output_dir, os.path.join(cls._killed_dir, 'data')),
            output_dir)

  def _args(self, output_dir, data_dir, aggregators='dp_rec'):
    return ['--task=digits', f'--aggregators={aggregators}', '--rounds=5',
            '--clients_per_round=4', '--target_epsilon=8', '--eval_every=2',
            '--insecure_test_seed=11', f'--output_dir={output_dir}',
            f'--data_dir={data_dir}']

  def test_killed_runs_resume_to_the_same_result(self):
    data_dir = self.create_tempdir().full_path
    reference_dir = self.create_tempdir().full_path
    # The reference compiles with TFF's compiler alone; the resumed run
    # below takes computations from the compile cache. It also starts a
    # fresh context (and worker) after rounds 2 and 4, as a run does every
    # execution.CONTEXT_ROUNDS rounds (none after the last), and the
    # processes below none: DP-REC in insecure test mode is deterministic,
    # so the equal results below show that neither a renewal nor a resume
    # changes what is computed.
    with mock.patch.object(execution, 'CONTEXT_ROUNDS', 2), \
        mock.patch.object(execution, 'set_context',
                          wraps=execution.set_context) as set_context:
      result = support.run_in_process(self._args(reference_dir, data_dir),
                                      {compile_cache.ENV: 'off'})
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertEqual(set_context.call_count, 3)  # To build, after 2 and 4.
    reference = _summary(reference_dir)
    self.assertTrue(reference['dp_rec']['insecure_test_mode'])
    self.assertEqual(reference['dp_rec']['replay_mismatches'], 0)
    # One run killed three times, each resume killed at a later point, so
    # that every resumed process saves rounds the final result is built on;
    # the kills cover the three phases (a round started, trained but not
    # saved, saved). After the kill that follows round 4's save, that
    # checkpoint is corrupted: the next process reports it, skips it and
    # resumes after round 3. (In insecure test mode the round trained and
    # lost is rerun; its privacy cost is test_a_run_killed_after_round_3_
    # trained's.) A finished aggregator's record reused while another
    # resumes is jobs_test's RunTest.
    output_dir = self.create_tempdir().full_path
    kills = ('dp_rec:2:started', 'dp_rec:4:saved', 'dp_rec:5:trained')
    for k, kill_at in enumerate(kills):
      killed = support.run_cli(self._args(output_dir, data_dir),
                               {test_hooks.KILL_ENV: kill_at})
      self.assertEqual(killed.returncode, -signal.SIGKILL,
                       f'{kill_at}: {killed.stderr[-3000:]}')
      log = killed.stdout + killed.stderr
      if k:
        self.assertIn('resuming after round', log)
      if k == 2:
        self.assertIn('corrupt or partial', log)
        self.assertIn('resuming after round 3', log)
      if kill_at == 'dp_rec:4:saved':
        _corrupt(os.path.join(output_dir, 'digits', 'dp_rec', 'seed0',
                              'checkpoints', 'round_4'))
    # A process of its own: the compile cache's hits need computations
    # named as a fresh process names them.
    resumed = support.run_cli(self._args(output_dir, data_dir))
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertIn('resuming after round', resumed.stdout + resumed.stderr)
    # Computations the earlier processes compiled come from the compile
    # cache, with (below) the same results.
    self.assertRegex(resumed.stdout, r'Compiled computations: [1-9]\d* from '
                     r'the cache')
    got = _summary(output_dir)
    for key in support.COMPARED_RECORD_KEYS:
      self.assertEqual(got['dp_rec'][key], reference['dp_rec'][key], key)
    with open(os.path.join(output_dir, 'digits', 'dp_rec', 'seed0',
                           'metrics.csv')) as f:
      rounds = [int(r['round']) for r in csv.DictReader(f)]
    self.assertEqual(rounds, [1, 2, 3, 4, 5])

  def test_a_run_killed_after_round_3_trained(self):
    # One test of subtests on copies of one killed run: pytest-xdist's
    # worksteal may split a class between its workers, and each would make
    # the killed run again.
    for check in (self._check_lost_round_counts_as_spent_privacy,
                  self._check_ledger_missing_or_behind_is_refused):
      with self.subTest(check.__name__[len('_check_'):]):
        check()

  def _check_lost_round_counts_as_spent_privacy(self):
    args, output_dir = self._killed_after_round_3_trained()
    # The planner runs by default, before training; one that cannot plan
    # says why in one line and the run goes on. (Its lines when it can:
    # planning_test.)
    with mock.patch.object(planning, 'plan_for_run',
                           side_effect=ValueError('out of reach (test)')):
      resumed = support.run_in_process(args, plan=True)
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    log = resumed.stdout + resumed.stderr
    self.assertIn('count as spent privacy', log)
    self.assertLess(log.index('[digits] The planner could not plan this '
                              'setting: out of reach (test)'),
                    log.index('[digits/dp_rec] parameters:'))
    record = _summary(output_dir)['dp_rec']
    self.assertEqual(record['lost_rounds'], 1)
    # Calibrated for 5 rounds, so the lost round leaves room for 4 only.
    self.assertEqual(record['rounds'], 4)
    c = record['params']['clip_ratio']
    spent = accounting.dp_rec_epsilon(
        clip_ratio=c, rounds=5, bits=record['params']['bits'],
        num_groups=record['params']['num_groups'],
        population=record['population'], clients_per_round=4,
        delta=record['delta'])
    self.assertAlmostEqual(record['epsilon'], spent, places=9)

  def _check_ledger_missing_or_behind_is_refused(self):
    # Issue 14's under-counts: a run killed after round 3 trained leaves a
    # checkpoint of round 2 and a ledger that says 3 rounds started.
    args, output_dir = self._killed_after_round_3_trained()
    ledger_path = os.path.join(output_dir, 'digits', 'dp_rec', 'seed0',
                               'privacy_ledger.json')
    with open(ledger_path) as f:
      original = json.load(f)
    self.assertEqual(original['started'], 3)
    cases = [
        (None, 'privacy_ledger.json is missing'),
        (json.dumps({**original, 'started': 1}), 'fewer than the 2'),
        # Malformed contents: ledger_test's PrivacyLedgerTest, without a run
        # each.
    ]
    for content, message in cases:
      if content is None:
        os.remove(ledger_path)
      else:
        mode = 'wb' if isinstance(content, bytes) else 'w'
        with open(ledger_path, mode) as f:
          f.write(content)
      refused = support.run_in_process(args)
      self.assertEqual(refused.returncode, 2, refused.stdout[-2000:])
      self.assertIn(message, refused.stderr)
      self.assertNotIn('Traceback', refused.stderr)
    # Nothing was reset: the last content is still there.
    with open(ledger_path) as f:
      self.assertEqual(f.read(), cases[-1][0])

  def test_random_kills_never_undercount_privacy(self):
    # Kill the run at random moments (round and phase drawn from a seeded
    # RNG), resume each time, and check against the ground truth of every
    # round that started (a trace written before the round runs): the run's
    # epsilon always covers all of them, and so do its totals.
    data_dir = self.create_tempdir().full_path
    output_dir = self.create_tempdir().full_path
    trace = os.path.join(self.create_tempdir().full_path, 'starts')
    rounds = 7
    args = ['--task=digits', '--aggregators=dp_rec', f'--rounds={rounds}',
            '--clients_per_round=4', '--target_epsilon=20',
            '--eval_every=100', f'--output_dir={output_dir}',
            f'--data_dir={data_dir}']
    rng = np.random.default_rng(7)
    env = {test_hooks.TRACE_ENV: trace}
    for _ in range(3):
      started = _count_lines(trace)
      kill_round = int(rng.integers(1, rounds + 1))
      phase = str(rng.choice(['started', 'trained', 'saved']))
      result = support.run_cli(args, {**env, test_hooks.KILL_ENV:
                                      f'dp_rec:{kill_round}:{phase}'})
      self.assertIn(result.returncode, (0, -signal.SIGKILL),
                    result.stderr[-2000:])
      if result.returncode == 0:
        break
      ledger_path = os.path.join(output_dir, 'digits', 'dp_rec', 'seed0',
                                 'privacy_ledger.json')
      with open(ledger_path) as f:
        entry = json.load(f)
      self.assertGreaterEqual(entry['started'] + entry['lost'],
                              _count_lines(trace))
      self.assertGreater(_count_lines(trace), started)
    final = support.run_in_process(args, env)
    self.assertEqual(final.returncode, 0, final.stderr[-2000:])
    record = _summary(output_dir)['dp_rec']
    spent = _count_lines(trace)
    self.assertEqual(record['rounds'] + record['lost_rounds'], spent)
    expected = accounting.dp_rec_epsilon(
        clip_ratio=record['params']['clip_ratio'], rounds=spent,
        bits=record['params']['bits'],
        num_groups=record['params']['num_groups'],
        population=record['population'], clients_per_round=4,
        delta=record['delta'])
    self.assertAlmostEqual(record['epsilon'], expected, places=9)
    # Every started round's upload counts, lost or not.
    self.assertEqual(record['upload_bits_total'],
                     spent * 4 * record['upload_bits_per_client_round'])

  def test_other_configuration_is_refused(self):
    data_dir = self.create_tempdir().full_path
    output_dir = self.create_tempdir().full_path
    args = ['--task=digits', '--aggregators=fedavg', '--rounds=3',
            '--clients_per_round=4', f'--output_dir={output_dir}',
            f'--data_dir={data_dir}']
    killed = support.run_cli(args, {test_hooks.KILL_ENV: 'fedavg:2:saved'})
    self.assertEqual(killed.returncode, -signal.SIGKILL)
    # The refusals and the fresh run need no process of their own.
    other = support.run_in_process(args[:2] + ['--rounds=4'] + args[3:])
    self.assertEqual(other.returncode, 2)
    self.assertIn('another configuration', other.stderr)
    # The foreign checkpoints are set aside and named, not left blocking.
    checkpoint_dir = os.path.join(output_dir, 'digits', 'fedavg', 'seed0',
                                  'checkpoints')
    aside = [n for n in os.listdir(checkpoint_dir) if '.foreign' in n]
    self.assertNotEmpty(aside)
    self.assertIn(aside[0], other.stderr)
    # Its ledger is foreign too: refused, never reset.
    again = support.run_in_process(args[:2] + ['--rounds=4'] + args[3:])
    self.assertEqual(again.returncode, 2)
    self.assertIn('--noresume', again.stderr)
    fresh = support.run_in_process(args[:2] + ['--rounds=4', '--noresume'] +
                                   args[3:])
    self.assertEqual(fresh.returncode, 0, fresh.stderr[-3000:])
    self.assertEqual(_summary(output_dir)['fedavg']['rounds'], 4)


def _count_lines(path):
  """The lines of `path` (the trace of started rounds); 0 if it is absent."""
  if not os.path.exists(path):
    return 0
  with open(path) as f:
    return sum(1 for _ in f)


def _summary(output_dir, task='digits'):
  """{aggregator: record} of the task's summary.json under `output_dir`."""
  with open(os.path.join(output_dir, task, 'summary.json')) as f:
    return {r['aggregator']: r for r in json.load(f)}


def _corrupt(checkpoint):
  """Flips bytes in the middle of every data file of a checkpoint."""
  data_files = [os.path.join(root, f) for root, _, files in os.walk(checkpoint)
                for f in files]
  assert data_files, checkpoint
  for path in data_files:
    with open(path, 'r+b') as f:
      size = os.path.getsize(path)
      f.seek(size // 2)
      chunk = f.read(16)
      f.seek(size // 2)
      f.write(bytes(b ^ 0xFF for b in chunk))


class BudgetTest(tf.test.TestCase):
  """`seed_run._within_budget`: a round runs only if the epsilon after it
  is at most the target, with no tolerance."""

  def _rounds_run(self, epsilons, target=2.0, lost_rounds=0, private=True):
    """(rounds the loop of `train_seed` runs, `progress.stopped`) for a run
    whose epsilon after round r is epsilons[r - 1]."""
    run_ = types.SimpleNamespace(
        aggregator=types.SimpleNamespace(
            private=private, epsilon_after=lambda r: epsilons[r - 1]),
        config=types.SimpleNamespace(target_epsilon=target))
    progress = types.SimpleNamespace(lost_rounds=lost_rounds, stopped=None)
    within_budget = seed_run._within_budget  # pylint: disable=protected-access
    rounds = 0
    for round_num in range(1, len(epsilons) - lost_rounds + 1):
      if not within_budget(run_, progress, round_num):
        break
      rounds = round_num
    return rounds, progress.stopped

  def test_a_run_stops_before_it_would_exceed_the_target(self):
    over = 2.0 * (1 + 1e-10)  # Within the old slack of 1e-9.
    rounds, stopped = self._rounds_run([1.0, 1.9, over, 2.5])
    self.assertEqual(rounds, 2)
    self.assertEqual(stopped, 'stopped before round 3: epsilon would reach '
                     f'{over!r} > 2.0')
    rounds, stopped = self._rounds_run([1.0, 1.9, 2.0009, 2.5])
    self.assertEqual(stopped, 'stopped before round 3: epsilon would reach '
                     '2.0009 > 2.0')

  def test_the_target_itself_is_within_the_budget(self):
    self.assertEqual(self._rounds_run([1.0, 1.9, 2.0]), (3, None))

  def test_lost_rounds_are_spent(self):
    # Round 2 runs as the third spent round: epsilon 2.5 is over the target.
    self.assertEqual(self._rounds_run([1.0, 1.9, 2.5], lost_rounds=1)[0], 1)

  def test_nan_stops_and_a_non_private_run_never_does(self):
    self.assertEqual(self._rounds_run([1.0, math.nan])[0], 1)
    self.assertEqual(self._rounds_run([9.0, 9.0], private=False), (2, None))


if __name__ == '__main__':
  tf.test.main()
