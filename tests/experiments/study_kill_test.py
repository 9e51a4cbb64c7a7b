"""A study killed (SIGKILL to its process group) at random moments, several
times, then let finish, ends as an uninterrupted one does.

The study is `experiments.epsilon_sweep` at test scale: a one-setting tuning
grid (the choice cannot depend on fresh noise), DP-FedAvg with its no-noise
control, one seed, two rounds, on the digits task. DP-FedAvg's runs draw
fresh noise by design (as DP-REC's client seeds are fresh; a DP-REC run's
own resume is `seed_run_test.ResumeTest`'s); the controls are seeded. Kill
moments come from `random.Random(seed)`; the seed is in every failure message,
and `TFF_DPREC_KILL_SEED` sets another.
"""

import csv
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import tensorflow as tf

from tests import support

_REPO = support.REPO
_SEED = int(os.environ.get('TFF_DPREC_KILL_SEED', '20261201'))
_KILLS = 3
_ARGS = ['--task=digits', '--aggregators=dp_fedavg', '--epsilons=8',
         '--num_seeds=1', '--grids=dp_fedavg: l2_clip=0.5', '--rounds=2']
# What a killed writer may leave: `atomic_files`' and the ledger's temporary
# names, checkpoint versions half written, the output folder's probe.
_TEMPORARY = re.compile(r'\.\d+\.[0-9a-f]{32}|\.tmp\d+$|\.partial|'
                        r'^\.write_test')
_TIMING = ('seconds_per_round', 'seconds')


def _sweep(output_dir, data_dir, kill_after=None):
  """(return code or None if killed, output) of one invocation."""
  env = dict(os.environ)
  env.pop(support.KILL_ENV, None)
  process = subprocess.Popen(
      [sys.executable, '-m', 'experiments.epsilon_sweep', *_ARGS,
       f'--output_dir={output_dir}', f'--data_dir={data_dir}'],
      cwd=_REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, start_new_session=True)
  try:
    output, _ = process.communicate(timeout=kill_after or 900)
    return process.returncode, output
  except subprocess.TimeoutExpired:
    os.killpg(process.pid, signal.SIGKILL)
    output, _ = process.communicate()
    return None, output


def _files(root, name):
  found = {}
  for folder, _, names in os.walk(root):
    if name in names:
      path = os.path.join(folder, name)
      with open(path, 'rb') as f:
        found[os.path.relpath(path, root)] = f.read()
  return found


def _records(root):
  return {path: json.loads(text)['record']
          for path, text in _files(root, 'record.json').items()}


def _csv_rows(root):
  with open(os.path.join(root, 'digits', 'epsilon_sweep.csv')) as f:
    return {(r['aggregator'], r['target_epsilon']): r
            for r in csv.DictReader(f)}


class StudyKillTest(tf.test.TestCase):

  def _kill_repeatedly(self, output_dir, data_dir, span, why):
    """Kills the study `_KILLS` times; checks finished runs stay as they
    were (never retrained). Returns the kill moments."""
    rng = random.Random(_SEED)
    moments = []
    for _ in range(_KILLS):
      before = _files(output_dir, 'record.json')
      moment = rng.uniform(2.0, span)
      moments.append(round(moment, 2))
      code, output = _sweep(output_dir, data_dir, kill_after=moment)
      self.assertIn(code, (None, 0), f'{why(moments)}: {output[-3000:]}')
      after = _files(output_dir, 'record.json')
      for path, content in before.items():
        self.assertEqual(after.get(path), content,
                         f'{why(moments)}: {path} was retrained')
    return moments

  def test_random_kills_end_as_an_uninterrupted_study(self):
    data_dir = self.create_tempdir().full_path
    reference_dir = self.create_tempdir().full_path
    start = time.time()
    code, output = _sweep(reference_dir, data_dir)
    span = time.time() - start
    self.assertEqual(code, 0, output[-3000:])
    output_dir = self.create_tempdir().full_path
    why = lambda moments: (f'kill seed {_SEED} (TFF_DPREC_KILL_SEED), kills '
                           f'at {moments} s')
    moments = self._kill_repeatedly(output_dir, data_dir, span, why)
    before = _files(output_dir, 'record.json')
    code, output = _sweep(output_dir, data_dir)
    self.assertEqual(code, 0, f'{why(moments)}: {output[-3000:]}')
    for path, content in before.items():
      self.assertEqual(_files(output_dir, 'record.json')[path], content,
                       f'{why(moments)}: {path} was retrained')
    self._check_records(reference_dir, output_dir, why(moments))
    self._check_tables(reference_dir, output_dir, why(moments))
    left = [os.path.join(folder, n)
            for folder, dirs, names in os.walk(output_dir)
            for n in names + dirs if _TEMPORARY.search(n)]
    self.assertEmpty(left, why(moments))

  def _check_records(self, reference_dir, output_dir, why):
    reference, resumed = _records(reference_dir), _records(output_dir)
    self.assertEqual(sorted(resumed), sorted(reference), why)
    for path, want in reference.items():
      got = resumed[path]
      where = f'{why}: {path}'
      for key in ('aggregator', 'seed', 'params', 'target_epsilon', 'delta',
                  'clients_per_round', 'population', 'sampling'):
        self.assertEqual(got[key], want[key], f'{where} {key}')
      if want['epsilon'] is not None:
        # Rounds lost to a kill count as spent: a private run trains fewer.
        self.assertEqual(got['rounds'] + got['lost_rounds'], want['rounds'],
                         where)
        self.assertGreaterEqual(got['epsilon'], want['epsilon'], where)
      else:  # A control reruns its lost rounds.
        self.assertEqual(got['rounds'], want['rounds'], where)
      if '_no_noise' in got['aggregator']:  # Seeded: the same values.
        for key in ('final_metric', 'final_metrics'):
          self.assertEqual(got[key], want[key], f'{where} {key}')

  def _check_tables(self, reference_dir, output_dir, why):
    want, got = _csv_rows(reference_dir), _csv_rows(output_dir)
    self.assertEqual(sorted(got), sorted(want), why)
    for key, row in want.items():
      for field in ('setting', 'parameter', 'seeds', 'epsilon'):
        self.assertEqual(got[key][field], row[field], f'{why}: {key} {field}')
      if '_no_noise' in key[0]:
        self.assertEqual(got[key]['mean'], row['mean'], f'{why}: {key}')
      lost = sum(r['lost_rounds'] for r in _records(output_dir).values()
                 if r['aggregator'] == key[0])
      self.assertEqual('lost to interruptions' in got[key]['note'],
                       lost > 0, f'{why}: {key} note')
    for name in ('epsilon_sweep.md', 'metric_vs_target_epsilon.png'):
      self.assertTrue(os.path.exists(os.path.join(output_dir, 'digits',
                                                  name)), why)
    tuning = 'eps8/tune/dp_fedavg/tune_dp_fedavg.json'
    with open(os.path.join(reference_dir, tuning)) as f:
      want_tuning = json.load(f)
    with open(os.path.join(output_dir, tuning)) as f:
      got_tuning = json.load(f)
    self.assertEqual(sorted(got_tuning), sorted(want_tuning), why)
    for setting, result in want_tuning.items():
      for field in ('setting', 'epsilon', 'params', 'base'):
        self.assertEqual(got_tuning[setting][field], result[field],
                         f'{why}: tuning {setting} {field}')


if __name__ == '__main__':
  tf.test.main()
