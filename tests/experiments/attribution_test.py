"""`experiments.reproduce --part=attribution` (studies.attribution), with
training, the task and the calibrations replaced by fakes."""

import collections
import csv
import json
import os
import subprocess
from unittest import mock

import tensorflow as tf

from experiments.data import tasks as tasks_lib
from experiments.infra import atomic_files
from experiments.runner import jobs
from experiments.runner import registry
from experiments.runner import training
from experiments.runner import finished
from experiments.runner import stats
from experiments.studies import attribution
from experiments.studies import attribution_report
from experiments.studies import attribution_rows
from experiments.studies import reproduce
from experiments.studies import tuning
from tests import support

# Final accuracy by (aggregator, the row's distinguishing setting).
_ACCURACY = {'dp_fedavg': 0.70, 'dp_rec': 0.66, registry.EXACT_SAMPLE: 0.67,
             'ddgauss16': 0.62, 'fedavg': 0.88}


def _record(config, seed):
  name = config.aggregators[0]
  metric = _ACCURACY[name] + 0.01 * seed
  params = {}
  if name == 'dp_fedavg':
    params = dict(noise_multiplier=config.noise_multiplier or 2.85,
                  l2_clip=config.l2_clip)
  elif name in ('dp_rec', registry.EXACT_SAMPLE):
    params = dict(clip_ratio=config.clip_ratio or 0.38, bits=4,
                  l2_clip=0.001)
  private = name in ('dp_fedavg', 'dp_rec', 'ddgauss16')
  curve = [dict(round=r, metric=metric * r / 1000) for r in
           range(0, 1001, 25)]
  return dict(record=dict(
      aggregator=name, seed=seed, final_metric=metric, params=params,
      epsilon=config.target_epsilon if private else None,
      clients_per_round=10, upload_gb=1e-3, seconds_per_round=1.0,
      lost_rounds=0), curve=curve)


class AttributionTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.trained = []  # (row folder, seeds, jobs) per training call.
    self.groups = []  # Per training call: None, or its side-by-side group.
    self.done = {}  # row folder -> {seed: saved run}.

    def train(config, print_fn=print, group=None):
      del print_fn
      self.trained.append((os.path.basename(config.output_dir),
                           config.seeds, config.jobs))
      self.groups.append(group)
      for seed in config.seeds:
        self.done.setdefault(config.output_dir, {})[seed] = _record(config,
                                                                     seed)

    def side_by_side(configs, print_fn=print):
      group = len(self.trained)
      for config in configs:
        train(config, print_fn, group=group)

    def finished_runs(config, task=None):
      del task
      return [self.done.get(config.output_dir, {})[s] for s in config.seeds
              if s in self.done.get(config.output_dir, {})]

    def tune(config, settings, path, print_fn=print):
      del print_fn
      results = {tuning.key(s): dict(mean=0.5 + 0.1 * (i == 1),
                                       base=tuning.base_fingerprint(config))
                 for i, s in enumerate(settings)}
      atomic_files.write_json(path, results)
      return results

    task = mock.Mock(data_note='fake Fashion-MNIST', population=100)
    for target, new in ((training, 'run'), (jobs, 'run')):
      self.enter_context(mock.patch.object(target, new, train))
    self.enter_context(mock.patch.object(jobs, 'run_side_by_side',
                                         side_by_side))
    self.enter_context(mock.patch.object(finished, 'finished_runs',
                                         finished_runs))
    self.enter_context(mock.patch.object(tuning, 'tune', tune))
    self.enter_context(mock.patch.object(tasks_lib, 'create_task',
                                         lambda *a, **k: task))
    self.enter_context(mock.patch.object(
        attribution_rows, 'proven_epsilon_of_c',
        lambda task, base: lambda c: 6.15))

  def test_trains_block_by_block_and_seed_by_seed(self):
    out = self.create_tempdir().full_path
    table = attribution.run(out, 'data', jobs=2, log=lambda *a: None)
    first_rows = [folder for folder, seeds, _ in self.trained
                  if seeds == (0, 1)]
    # The epsilon-3 rows' first two seeds come before any row's third.
    third = next(i for i, (_, seeds, _) in enumerate(self.trained)
                 if seeds[0] == 2)
    self.assertEqual(first_rows[:9], [r.key for r in attribution_rows.all_rows()
                                      if r.block == 'eps3'])
    self.assertGreaterEqual(third, 9)
    for folder, seeds, job_count in self.trained:
      self.assertEqual(job_count, len(seeds))  # Two side by side, or one.
    # A row's odd seed trains beside the next row's, in the same block:
    # epsilon 3's third seeds of the 3-seed rows pair up (the fifth with a
    # 5-seed row's fifth seed), and no group holds more than two runs.
    sizes = collections.Counter(g for g in self.groups if g is not None)
    self.assertTrue(sizes)
    self.assertEqual(set(sizes.values()), {2})
    # Not a row's folder: a neighbour setting's (tune's runs/<setting>).
    block_of = collections.defaultdict(
        lambda: 'neighbours',
        {r.key: r.block for r in attribution_rows.all_rows()})
    third = [group for (folder, seeds, _), group in
             zip(self.trained, self.groups)
             if seeds == (2,) and block_of[folder] == 'eps3']
    self.assertLen(third, 5)
    self.assertNotIn(None, third)
    blocks = {}
    for (folder, _, _), group in zip(self.trained, self.groups):
      if group is not None:
        blocks.setdefault(group, set()).add(block_of[folder])
    self.assertTrue(all(len(b) == 1 for b in blocks.values()), blocks)
    # The six neighbour settings train two at a time, each once, after the
    # epsilon-3 rows and before epsilon 6's.
    blocks_in_order = [block_of[folder] for folder, _, _ in self.trained]
    neighbours = [i for i, b in enumerate(blocks_in_order)
                  if b == 'neighbours']
    self.assertLen(neighbours, 6)
    self.assertLen({self.groups[i] for i in neighbours}, 3)
    self.assertLen({self.trained[i][0] for i in neighbours}, 6)
    self.assertEqual(blocks_in_order[neighbours[0] - 1], 'eps3')
    self.assertEqual(blocks_in_order[neighbours[-1] + 1], 'eps6_paper')
    by = {l['key']: l for l in table}
    self.assertLen(by['paper_dp_rec_eps3']['per_seed'], 5)
    self.assertLen(by['paper_dp_fedavg_eps3']['per_seed'], 3)
    # The paper rows train at the proven epsilon of the paper's c.
    self.assertEqual(by['paper_dp_rec_eps3']['spent_epsilon'], 6.15)
    self.assertEqual(by['paper_dp_fedavg_eps3']['spent_epsilon'], 3.0)
    with open(os.path.join(out, 'attribution.md')) as f:
      text = f.read()
    self.assertIn("| DP-REC - its exact-sample control, the paper's c (REC's "
                  'cost under noise) | 3 | -1.00 ± 1.00 |', text)
    self.assertIn("| DP-REC - DP-FedAvg, the paper's parameters | 3 | -3.00 "
                  '± 0.91 | -2.89 | -12.6 |', text)
    self.assertIn('dp_fedavg l2_clip=0.0025: 50.00, l2_clip=0.005: 60.00, '
                  'l2_clip=0.01: 50.00 (the choice is best, by 10.00 '
                  'points, inside the grid)', text)
    self.assertNotIn('Not finished yet', text)
    for name in ('attribution.csv', 'attribution_curves.png'):
      self.assertTrue(os.path.exists(os.path.join(out, name)))

  def test_report_only_trains_nothing_and_lists_what_is_left(self):
    out = self.create_tempdir().full_path
    attribution.run(out, 'data', log=lambda *a: None, report_only=True)
    self.assertEmpty(self.trained)
    with open(os.path.join(out, 'attribution.md')) as f:
      text = f.read()
    self.assertIn("Not finished yet (rerun the command to train them): "
                  "DP-FedAvg, paper's z at eps3 (0 of 3 seeds)", text)
    self.assertIn('dp_fedavg not trained yet', text)

  def test_flags(self):
    out = self.create_tempdir().full_path
    for argv in (['--part=attribution', '--training_seeds=3'],
                 ['--part=utility', '--jobs=2'],
                 ['--part=attribution', '--jobs=0']):
      with self.assertRaises(SystemExit) as raised:
        support.run_main(reproduce, argv + ['--output_dir', out])
      self.assertEqual(raised.exception.code, 2, argv)
    with self.assertRaisesRegex(ValueError, 'jobs must be a positive'):
      attribution.run(out, jobs=0)


class NeighbourVerdictTest(tf.test.TestCase):

  def test_says_which_is_best_and_whether_on_the_edge(self):
    verdict = attribution_report._verdict  # pylint: disable=protected-access
    scores = {'noise_stddev=0.00125': 0.50, 'noise_stddev=0.0025': 0.55,
              'noise_stddev=0.005': 0.58}
    self.assertEqual(verdict('dp_rec', scores),
                     " (best: noise_stddev=0.005, on the grid's edge; the "
                     'rows keep the 300-round choice)')
    scores['noise_stddev=0.005'] = 0.54
    self.assertEqual(verdict('dp_rec', scores),
                     ' (the choice is best, by 1.00 points, inside the grid)')
    del scores['noise_stddev=0.005']  # A grid not finished: no verdict.
    self.assertEqual(verdict('dp_rec', scores), '')


class CommittedReportTest(tf.test.TestCase):
  """docs' attribution table (REPRODUCTION.md, figures/attribution.csv) is
  the committed records' (results/attribution): copied by hand, so checked."""

  _REPO = support.REPO

  def _tracked_finals(self):
    """{row key: [final accuracy]} of the records git tracks."""
    listed = subprocess.run(
        ['git', 'ls-files', 'results/attribution/rows'], cwd=self._REPO,
        capture_output=True, text=True, check=True).stdout.split()
    finals = collections.defaultdict(list)
    for path in listed:
      if path.endswith('/record.json'):
        with open(os.path.join(self._REPO, path)) as f:
          record = json.load(f)['record']
        finals[path.split('/')[3]].append(record['final_metric'])
    return finals

  def test_csv_and_markdown_are_the_committed_records(self):
    with open(os.path.join(self._REPO, 'docs', 'figures',
                           'attribution.csv')) as f:
      table = list(csv.DictReader(f))
    with open(os.path.join(self._REPO, 'docs', 'REPRODUCTION.md')) as f:
      markdown = f.read()
    finals = self._tracked_finals()
    self.assertNotEmpty(table)
    self.assertCountEqual([r['key'] for r in table], list(finals))
    for row in table:
      values = finals[row['key']]
      self.assertLen(values, int(row['seeds']), row['key'])
      mean, se = stats.mean_se(values)
      self.assertAlmostEqual(float(row['mean']), mean, places=9,
                             msg=row['key'])
      self.assertIn(f'{100 * mean:.2f} ± {100 * se:.2f} ({len(values)} '
                    'seeds)', markdown, row['key'])


if __name__ == '__main__':
  tf.test.main()
