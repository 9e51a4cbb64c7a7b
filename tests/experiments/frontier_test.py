"""`experiments.frontier`: its points, tuning, table and figure."""

import csv
import math
import os
import types
from unittest import mock

import numpy as np
import tensorflow as tf

from experiments.data import tasks as tasks_lib
from experiments.runner import config as config_lib
from experiments.runner import planning
from experiments.runner import registry
from experiments.runner import training
from experiments.runner import run_setup
from experiments.runner import finished
from experiments.studies import frontier
from experiments.studies import frontier_points
from experiments.studies import frontier_report
from experiments.studies import tuning


def _record(name, metric, upload, download, clients, seed=0, *, rounds=5,
            lost_rounds=0, **params):
  return dict(aggregator=name, final_metric=metric, upload_gb=upload,
              download_gb=download, epsilon=1.0, rounds=rounds,
              lost_rounds=lost_rounds, seed=seed, seconds_per_round=0.5,
              clients_per_round=clients, params=params,
              metric_label='recall@5')


class ParseTest(tf.test.TestCase):

  def test_points_and_sizes(self):
    self.assertEqual(
        frontier_points.parse_points('dp_rec: 640,40,40; dp_fedavg: 40'),
        {'dp_rec': [40, 640], 'dp_fedavg': [40]})
    defaults = frontier_points.parse_points(frontier_points.DEFAULT_POINTS)
    self.assertEqual(defaults['ddgauss16'], [40, 160, 640])
    # DDGauss's reference where the split is asked for.
    self.assertEqual(defaults['dp_fedavg_rdp'], [40, 640])
    for text, message in (
        ('dp_rec 40', 'is not "method: B,B"'),
        ('fedavg: 40', "'fedavg' is not a private aggregator"),
        ('dp_rec: 40; dp_rec: 80', "'dp_rec' is listed twice"),
        ('dp_rec: many', "'many' is not an int"),
        ('dp_rec: 0', "'0' must be at least 1"),
        ('', '--points is empty')):
      with self.assertRaisesRegex(ValueError, message):
        frontier_points.parse_points(text)

  def test_grids(self):
    points = frontier_points.parse_points(frontier_points.DEFAULT_POINTS)
    grids = frontier_points.parse_grids(frontier_points.DEFAULT_GRIDS, points)
    self.assertEqual(grids[('dp_rec', 2560)],
                     [{'clip': 0.1}, {'clip': 0.2}, {'clip': 0.4}])
    self.assertEqual(grids[('dp_fedavg', 2560)],
                     [{'l2_clip': 0.2}, {'l2_clip': 0.5}, {'l2_clip': 1.0}])
    # DDGauss16 and its RDP reference tuned where DP-FedAvg is, alike.
    for point in (('ddgauss16', 160), ('ddgauss16', 640),
                  ('dp_fedavg_rdp', 640)):
      self.assertEqual(grids[point], grids[('dp_fedavg', 640)], point)
    self.assertNotIn(('ddgauss16', 40), grids)
    self.assertEqual(frontier_points.parse_grids(
        'dp_rec@40: clip=0.01 server_lr=3,10', points)[('dp_rec', 40)],
                     [{'server_lr': 3.0, 'clip': 0.01},
                      {'server_lr': 10.0, 'clip': 0.01}])
    self.assertEqual(frontier_points.parse_grids('', points), {})
    for text, message in (
        ('dp_rec: clip=0.1', 'is not "method@B: grid"'),
        ('dp_rec@80: clip=0.1', "'dp_rec@80' is not a point"),
        ('ddgauss16@2560: l2_clip=1', "'ddgauss16@2560' is not a point"),
        ('dp_rec@40: clip=1; dp_rec@40: clip=2', 'has two grids'),
        ('dp_rec@40: rounds=5,10', "'rounds' defines the point"),
        ('dp_rec@40: clip=fast', "is not a number")):
      with self.assertRaisesRegex(tuning.GridError, message):
        frontier_points.parse_grids(text, points)

  def test_sigma_for_clip(self):
    self.assertEqual(frontier_points.sigma_for_clip(0.2, 1.52235), 0.1314)
    self.assertEqual(frontier_points.sigma_for_clip(0.0102, 1.70271), 0.006)
    with self.assertRaisesRegex(ValueError, 'below 0.0001'):
      frontier_points.sigma_for_clip(1e-5, 1.5)


class RunFrontierTest(tf.test.TestCase):

  def _fakes(self, calls):
    """(task, calibrated_aggregator, run): fakes that record the runs asked for.
    """
    # training, the plans and the task are fakes: this checks which runs the
    # frontier asks for and what it keeps, not what they learn.
    defaults = types.SimpleNamespace(
        rounds=5, clients_per_round=2, bits=None, grouping='network',
        noise_stddev=0.006, l2_clip=0.2, eval_every=10, client_lr=0.1)
    task = types.SimpleNamespace(defaults=defaults, population=1000)
    # Validation metric by DP-REC sigma (clip / c with c = 2 at B = 80).
    validation = {0.05: 0.1, 0.1: 0.3, 0.2: math.nan}

    def calibrated_aggregator(task_, config, name, record_messages):
      del task_, record_messages
      assert name == 'dp_rec'
      return types.SimpleNamespace(params=dict(
          clip_ratio=2.0 if config.clients_per_round == 80 else 3.0))

    def run(config, print_fn=print, context_out=None):
      calls.append(config)
      print_fn('[x] WARNING: shown')
      print_fn('[x] chatter: hidden')
      if context_out is not None:
        context_out.update(frequent_tags=0.22)
      metric = (validation[config.noise_stddev]
                if config.eval_split == 'validation' else 0.5)
      return [_record(a, metric, 1e-6, 1e-3, config.clients_per_round,
                      seed=s, clip_ratio=2.0, noise_stddev=0.1, l2_clip=0.2)
              for a in config.aggregators for s in config.seeds]

    return task, calibrated_aggregator, run

  def test_tunes_on_validation_then_runs_on_test(self):
    calls = []
    task, calibrated_aggregator, run = self._fakes(calls)
    out = self.create_tempdir().full_path
    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_rec', 'dp_fedavg'),
                                output_dir=out, num_seeds=3, progress=False)
    points = frontier_points.parse_points('dp_rec: 80, 20; dp_fedavg: 20')
    grids = frontier_points.parse_grids('dp_rec@80: clip=0.1,0.2,0.4', points)
    printed = []
    with mock.patch.object(training, 'run', run), \
        mock.patch.object(run_setup, 'calibrated_aggregator',
                          calibrated_aggregator), \
        mock.patch.object(tasks_lib, 'create_task', lambda *a, **k: task):
      done, context, label = frontier.run_frontier(
          base, points, grids, tune_seeds=1, print_fn=printed.append)
    # B = 20 first (DP-FedAvg, the cheaper, before DP-REC), then B = 80's
    # three tuning runs and its point.
    self.assertEqual([(c.aggregators, c.clients_per_round, c.eval_split)
                      for c in calls],
                     [(('dp_fedavg',), 20, 'test'), (('dp_rec',), 20, 'test'),
                      *[(('dp_rec',), 80, 'validation')] * 3,
                      (('dp_rec',), 80, 'test')])
    tuned = calls[2:5]
    self.assertEqual([c.noise_stddev for c in tuned], [0.05, 0.1, 0.2])
    for c in tuned:
      self.assertEqual(c.seeds, (tuning.TUNE_SEED_OFFSET,))
      self.assertStartsWith(c.output_dir,
                            os.path.join(out, 'tune', 'B80', 'dp_rec'))
    point = calls[-1]
    self.assertEqual((point.seeds, point.noise_stddev, point.output_dir),
                     ((0, 1, 2), 0.1,
                      os.path.join(out, 'B80', 'dp_rec', 'noise_stddev=0.1')))
    self.assertEqual(calls[0].output_dir,
                     os.path.join(out, 'B20', 'dp_fedavg', 'task_defaults'))
    info = done[-1][3]
    self.assertEqual((info['tuned'], info['edges']), (True, []))
    self.assertEqual(info['validation']['noise_stddev=0.1'], 0.3)
    self.assertTrue(math.isnan(info['validation']['noise_stddev=0.2']))
    self.assertEqual((context, label), (dict(frequent_tags=0.22),
                                        'recall@5'))
    self.assertIn('[x] WARNING: shown', printed)
    self.assertNotIn('[x] chatter: hidden', printed)

  def test_in_law_point_trains_the_codec_points_setting(self):
    calls = []
    task, calibrated_aggregator, run = self._fakes(calls)
    out = self.create_tempdir().full_path
    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_rec',), output_dir=out,
                                num_seeds=2, progress=False)
    points = frontier_points.parse_points('dp_rec: 80; dp_rec_in_law: 80,20')
    grids = frontier_points.parse_grids('dp_rec@80: clip=0.1,0.2,0.4',
                                        points)
    with mock.patch.object(training, 'run', run), \
        mock.patch.object(run_setup, 'calibrated_aggregator',
                          calibrated_aggregator), \
        mock.patch.object(tasks_lib, 'create_task', lambda *a, **k: task):
      done, _, _ = frontier.run_frontier(base, points, grids, tune_seeds=1,
                                         print_fn=lambda *a: None)
    # The codec's point (tuned) before the in-law point at the same B,
    # which trains the chosen sigma untuned.
    self.assertEqual([(c.aggregators, c.clients_per_round, c.eval_split)
                      for c in calls],
                     [(('dp_rec_in_law',), 20, 'test'),
                      *[(('dp_rec',), 80, 'validation')] * 3,
                      (('dp_rec',), 80, 'test'),
                      (('dp_rec_in_law',), 80, 'test')])
    self.assertEqual((calls[-1].noise_stddev, calls[-1].output_dir),
                     (0.1, os.path.join(out, 'B80', 'dp_rec_in_law',
                                        'noise_stddev=0.1')))
    info = done[-1][3]
    self.assertEqual((info['tuned'], info['shared_with']), (False, 'dp_rec'))


  def test_report_only_trains_nothing_and_reports_what_finished(self):
    defaults = types.SimpleNamespace(
        rounds=5, clients_per_round=2, bits=None, grouping='network',
        noise_stddev=0.006, l2_clip=0.2, eval_every=10, client_lr=0.1)
    task = types.SimpleNamespace(defaults=defaults, population=1000)
    calibrated_aggregator = lambda *a: types.SimpleNamespace(
        params=dict(clip_ratio=2.0))

    def run(config, print_fn=print, context_out=None):
      del print_fn, context_out
      metric = {0.05: 0.2, 0.1: 0.3, 0.2: 0.25}[config.noise_stddev]
      return [_record('dp_rec', metric, 1e-6, 1e-3, config.clients_per_round,
                      seed=s) for s in config.seeds]

    base = config_lib.RunConfig(
        task='stackoverflow_lr', aggregators=('dp_rec',), num_seeds=2,
        output_dir=self.create_tempdir().full_path, progress=False)
    points = frontier_points.parse_points('dp_rec: 40, 80, 160')
    grids = frontier_points.parse_grids('dp_rec@80: clip=0.1,0.2,0.4; '
                                 'dp_rec@160: clip=0.1,0.2', points)
    with mock.patch.object(training, 'run', run), \
        mock.patch.object(run_setup, 'calibrated_aggregator',
                          calibrated_aggregator), \
        mock.patch.object(tasks_lib, 'create_task', lambda *a, **k: task):
      # Tune B = 80 only (its test runs are faked below).
      frontier_points.tune_point(base, 'dp_rec', 80, [
          dict(noise_stddev=v) for v in (0.05, 0.1, 0.2)], 1, print)
    done_by_b = {40: [_record('dp_rec', 0.2, 1e-6, 1e-3, 40, seed=0)],
                80: [_record('dp_rec', 0.3, 1e-6, 1e-3, 80, seed=s)
                     for s in (0, 1)]}

    def no_training(*a, **k):
      raise AssertionError('report_only trained')
    with mock.patch.object(training, 'run', no_training), \
        mock.patch.object(run_setup, 'calibrated_aggregator',
                          calibrated_aggregator), \
        mock.patch.object(finished, 'finished_records',
                          lambda c: done_by_b[c.clients_per_round]), \
        mock.patch.object(run_setup, 'reference_context',
                          lambda *a: dict(frequent_tags=0.22)), \
        mock.patch.object(tasks_lib, 'create_task', lambda *a, **k: task):
      done, context, _ = frontier.run_frontier(
          base, points, grids, tune_seeds=1, print_fn=lambda *a: None,
          extensions=2, report_only=True)
    self.assertEqual([(b, len(records)) for _, b, records, _ in done],
                     [(40, 1), (80, 2), (160, 0)])
    self.assertEqual(done[0][3]['note'], 'task defaults: 1 of 2 seeds finished')
    self.assertNotIn('note', done[1][3])
    self.assertEqual(done[1][3]['setting'], 'noise_stddev=0.1')
    self.assertEqual(done[2][3]['note'], '2 of 2 tuning settings not trained '
                     'yet (noise_stddev=0.05, noise_stddev=0.1)')
    self.assertEqual(context, dict(frequent_tags=0.22))
    table = frontier_report.markdown(frontier_report.summarize(done), context,
                                     'recall@5')
    self.assertIn('| dp_rec | 40 | task defaults: 1 of 2 seeds finished | ',
                  table)
    self.assertIn('| dp_rec | 160 | 2 of 2 tuning settings not trained yet',
                  table)

  def _extend(self, validation, extensions, grid='clip=0.1,0.2'):
    """Tunes DP-REC at B = 80 (c = 2) from `grid` with fakes."""
    task = types.SimpleNamespace(defaults=types.SimpleNamespace(
        rounds=5, clients_per_round=2, bits=None, grouping='network',
        noise_stddev=0.006, l2_clip=0.2, eval_every=10, client_lr=0.1),
                                 population=1000)
    tuned = []

    def run(config, print_fn=print, context_out=None):
      del print_fn, context_out
      if config.eval_split == 'validation':
        tuned.append(config.noise_stddev)
      metric = (validation[config.noise_stddev]
                if config.eval_split == 'validation' else 0.5)
      return [_record('dp_rec', metric, 1e-6, 1e-3, 80, seed=s,
                      clip_ratio=2.0, noise_stddev=0.1, l2_clip=0.2)
              for s in config.seeds]

    calibrated_aggregator = lambda *a: types.SimpleNamespace(
        params=dict(clip_ratio=2.0))
    base = config_lib.RunConfig(
        task='stackoverflow_lr', aggregators=('dp_rec',), num_seeds=1,
        output_dir=self.create_tempdir().full_path, progress=False)
    points = frontier_points.parse_points('dp_rec: 80')
    printed = []
    with mock.patch.object(training, 'run', run), \
        mock.patch.object(run_setup, 'calibrated_aggregator',
                          calibrated_aggregator), \
        mock.patch.object(tasks_lib, 'create_task', lambda *a, **k: task):
      done, _, _ = frontier.run_frontier(
          base, points, frontier_points.parse_grids(f'dp_rec@80: {grid}',
                                                    points),
          tune_seeds=1, print_fn=printed.append, extensions=extensions)
    return tuned, done[0][3], printed

  def test_extends_a_grid_past_its_edge(self):
    # Sigmas 0.05, 0.1 (clip / c); the best climbs to 0.2, then 0.4 falls.
    validation = {0.05: 0.1, 0.1: 0.2, 0.2: 0.3, 0.4: 0.25}
    tuned, info, printed = self._extend(validation, extensions=2)
    self.assertEqual(tuned, [0.05, 0.1, 0.2, 0.4])
    self.assertEqual((info['setting'], info['edges'], info['extended']),
                     ('noise_stddev=0.2', [],
                      ['noise_stddev=0.2', 'noise_stddev=0.4']))
    self.assertIn('[frontier] dp_rec B=80: best at the edge '
                  '(noise_stddev=0.1); trying noise_stddev=0.2', printed)
    # One extension only: the best stays at the (new) edge, and says so.
    tuned, info, _ = self._extend(validation, extensions=1)
    self.assertEqual(tuned, [0.05, 0.1, 0.2])
    self.assertEqual((info['setting'], info['edges']),
                     ('noise_stddev=0.2', ['noise_stddev (largest)']))
    row = frontier_report.summarize([('dp_rec', 80, [_record(
        'dp_rec', 0.5, 1e-6, 1e-3, 80, clip_ratio=2.0, noise_stddev=0.2,
        l2_clip=0.4)], info)])
    self.assertIn('(tuned, grid grown past its edge to noise_stddev=0.2, '
                  'edge: noise_stddev (largest))',
                  frontier_report.markdown(row, {}, 'recall@5'))
    # Best at the smallest edge: one step down, then inside.
    tuned, info, _ = self._extend({0.025: 0.1, 0.05: 0.3, 0.1: 0.2},
                                  extensions=2)
    self.assertEqual((tuned, info['extended'], info['edges']),
                     ([0.05, 0.1, 0.025], ['noise_stddev=0.025'], []))

  def test_a_grid_of_one_setting_is_trained_untuned(self):
    tuned, info, printed = self._extend({}, extensions=2, grid='clip=0.4')
    self.assertEqual(tuned, [])  # No validation run,
    self.assertEqual(info['setting'], 'noise_stddev=0.2')  # clip / c.
    self.assertTrue(info['fixed'])
    self.assertIn('[frontier] dp_rec B=80: noise_stddev=0.2', printed)
    row = frontier_report.summarize([('dp_rec', 80, [_record(
        'dp_rec', 0.5, 1e-6, 1e-3, 80, clip_ratio=2.0, noise_stddev=0.2,
        l2_clip=0.4)], info)])
    self.assertIn('noise_stddev=0.2 (given, untuned)',
                  frontier_report.markdown(row, {}, 'recall@5'))


class ReportTest(tf.test.TestCase):

  def test_summary_table_and_figure(self):
    rec = dict(clip_ratio=1.5, noise_stddev=0.1314, l2_clip=0.197)
    points = [
        ('dp_fedavg', 40, [
            _record('dp_fedavg', 0.38, 0.4, 0.4, 40, 0, noise_multiplier=0.463,
                    l2_clip=0.2),
            _record('dp_fedavg', 0.40, 0.4, 0.4, 40, 1, noise_multiplier=0.463,
                    l2_clip=0.2)], dict(setting='task defaults')),
        ('dp_rec', 40, [_record('dp_rec', 0.20, 1e-6, 1e-2, 40, 0, **rec),
                        _record('dp_rec', 0.22, 1e-6, 1e-2, 40, 1, **rec)],
         dict(setting='task defaults')),
        ('dp_rec', 2560, [_record('dp_rec', 0.35, 1e-3, 50.0, 2560, 0, **rec),
                          _record('dp_rec', 0.37, 1e-3, 50.0, 2560, 1, **rec)],
         dict(setting='noise_stddev=0.1314', tuned=True,
              edges=['noise_stddev (largest)'])),
        ('ddgauss16', 640, [], dict(note='every tuned setting diverged'))]
    rows = frontier_report.summarize(points)
    self.assertAllClose(rows[0]['relative_noise'], 0.463 / 40)
    self.assertAllClose(rows[1]['relative_noise'], 1 / (1.5 * 40**0.5))
    self.assertAllClose(rows[2]['mean'], 0.36)
    self.assertAllClose(rows[2]['se'], 0.01)
    self.assertAllClose(rows[2]['total_gb'], 50.001)
    context = dict(frequent_tags=0.22)
    table = frontier_report.markdown(rows, context, 'recall@5')
    self.assertIn('| dp_rec | 2560 | noise_stddev=0.1314 (tuned, edge: '
                  'noise_stddev (largest)) | c 1.500, sigma 0.1314, clip '
                  '0.197 | 0.01318 (1.14x) | 36.00 ± 1.00 (2 seeds) |', table)
    self.assertIn('| ddgauss16 | 640 | every tuned setting diverged |',
                  table)
    self.assertIn('| frequent tags (5 most frequent) | | | | | 22.00 |',
                  table)
    directory = self.create_tempdir().full_path
    paths = frontier_report.write(directory, rows, context, 'recall@5')
    self.assertEqual([os.path.basename(p) for p in paths],
                     ['frontier.csv', 'frontier.md', 'frontier.png'])
    with open(paths[0]) as f:
      self.assertLen(list(csv.DictReader(f)), 4)
    self.assertGreater(os.path.getsize(paths[2]), 10_000)

  def test_rounds_are_the_fewest_and_lost_rounds_their_sum(self):
    # Seed 1 lost a round (trained 4 of 5), seed 2 lost two before its
    # budget bound (trained 5): the fewest is 4, 3 rounds lost in all.
    records = [_record('dp_rec', 0.3, 1e-6, 1e-2, 4096, 0),
               _record('dp_rec', 0.4, 1e-6, 1e-2, 4096, 1, rounds=4,
                       lost_rounds=1),
               _record('dp_rec', 0.5, 1e-6, 1e-2, 4096, 2, lost_rounds=2)]
    points = [('dp_fedavg', 40, [_record('dp_fedavg', m, 0.4, 0.4, 40, s)
                                 for s, m in ((0, 0.39), (1, 0.41))],
               dict(setting='defaults')),
              ('dp_rec', 4096, records, dict(setting='noise_stddev=0.1'))]
    rows = frontier_report.summarize(points)
    self.assertEqual([(r['rounds'], r['lost_rounds']) for r in rows],
                     [(5, 0), (4, 3)])
    self.assertAllClose(rows[1]['train_seconds'], 0.5 * 14)
    table = frontier_report.markdown(rows, dict(frequent_tags=0.2), 'metric')
    self.assertIn('| metric (%) | rounds | rounds lost | upload GB |', table)
    self.assertIn('| 40.00 ± 1.00 (2 seeds) | 5 | 0 | 0.4 |', table)
    self.assertIn('| 40.00 ± 5.77 (3 seeds) | 4 | 3 | 1e-06 |', table)
    self.assertIn(frontier_report.ROUNDS_NOTE, table)
    # Every line of the table has as many cells as its header.
    cells = {l.count('|') for l in table.splitlines() if l.startswith('|')}
    self.assertEqual(cells, {13})
    self.assertIn('* dp_rec at B = 4096 (3 seeds, 3 rounds lost): ',
                  '\n'.join(frontier_report.verdict(rows)))
    directory = self.create_tempdir().full_path
    csv_path = frontier_report.write(directory, rows, {}, 'metric')[0]
    with open(csv_path) as f:
      read = list(csv.DictReader(f))
    self.assertEqual([(r['rounds'], r['lost_rounds']) for r in read],
                     [('5', '0'), ('4', '3')])

  def test_size_ticks_slant_only_when_neighbours_crowd(self):
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use('Agg')
    from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
    for sizes, rotation in (({40, 160, 640, 2560}, 0),
                            ({40, 640, 2560, 4096, 10240}, 45)):
      fig, ax = plt.subplots()
      ax.set_xscale('log')
      frontier_report.size_ticks(ax, sizes)
      labels = ax.get_xticklabels()
      self.assertEqual([l.get_text() for l in labels],
                       [str(b) for b in sorted(sizes)])
      self.assertEqual({l.get_rotation() for l in labels}, {rotation})
      self.assertEqual(list(ax.get_xticks()), sorted(sizes))
      plt.close(fig)

  def test_write_before_anything_finished(self):
    rows = frontier_report.summarize([('dp_rec', 40, [], dict(
        note='task defaults: 0 of 3 seeds finished'))])
    directory = self.create_tempdir().full_path
    paths = frontier_report.write(directory, rows, {}, 'recall@5')
    self.assertEqual(sorted(os.listdir(directory)),
                     ['frontier.csv', 'frontier.md'])  # No temporaries.
    self.assertEqual([os.path.basename(p) for p in paths],
                     ['frontier.csv', 'frontier.md'])
    with open(paths[1]) as f:
      self.assertIn('| dp_rec | 40 | task defaults: 0 of 3 seeds finished |',
                    f.read())

  def _rows(self, dp_rec_means):
    """DP-FedAvg at 40 (39 +- 1) and DP-REC at 40, 160, ... (SE 1 each)."""
    def point(name, b, mean, upload, download):
      return (name, b, [_record(name, mean - 0.01, upload, download, b, 0),
                        _record(name, mean + 0.01, upload, download, b, 1)],
              dict(setting='task defaults'))
    points = [point('dp_fedavg', 40, 0.39, 0.4, 0.4)]
    points += [point('dp_rec', 40 * 4**i, m, 1e-5 * 4**i, 0.02 * 4**i)
               for i, m in enumerate(dp_rec_means)]
    return frontier_report.summarize(points)

  def test_split_at_each_b_with_the_three_rows(self):
    def point(name, b, mean):
      return (name, b, [_record(name, mean - 0.01, 0.4, 0.4, b, 0),
                        _record(name, mean + 0.01, 0.4, 0.4, b, 1)],
              dict(setting='task defaults'))
    rows = frontier_report.summarize([
        point('dp_fedavg', 40, 0.40), point('dp_fedavg_rdp', 40, 0.35),
        point('ddgauss16', 40, 0.33), point('dp_fedavg', 640, 0.70),
        point('dp_fedavg_rdp', 640, 0.68), point('ddgauss16', 640, 0.58),
        point('dp_fedavg', 160, 0.60), point('ddgauss16', 160, 0.50)])
    lines = frontier_report.split_lines(rows)
    # B = 160 has no RDP reference: no split there. SE 1 point each.
    self.assertEqual(lines, [
        '* At B = 40: ddgauss16 - dp_fedavg -7.00 points, in two parts: '
        'ddgauss16 - dp_fedavg_rdp -2.00 ± 1.41 (the mechanism and its '
        'general subsampling bound); dp_fedavg_rdp - dp_fedavg -5.00 ± 1.41 '
        '(RDP against PLD, the accountant).',
        '* At B = 640: ddgauss16 - dp_fedavg -12.00 points, in two parts: '
        'ddgauss16 - dp_fedavg_rdp -10.00 ± 1.41 (the mechanism and its '
        'general subsampling bound); dp_fedavg_rdp - dp_fedavg -2.00 ± 1.41 '
        '(RDP against PLD, the accountant).'])
    self.assertIn('\n* At B = 640: ddgauss16 - dp_fedavg -12.00',
                  frontier_report.report_text(rows, {}, 'recall@5'))
    rows[4]['mean'] = math.nan  # A diverged reference: no split at 640.
    self.assertLen(frontier_report.split_lines(rows), 1)

  def test_verdict(self):
    # SE of each mean 1 point, so the gap's is sqrt(2).
    lines = frontier_report.verdict(self._rows([0.21, 0.27, 0.33, 0.36]),
                             predicted=3272)
    self.assertEqual(lines[0],
                     'Against dp_fedavg at B = 40 (39.00%, 2 seeds):')
    self.assertIn('* dp_rec at B = 2560 (2 seeds): -3.00 ± 1.41 points; upload '
                  'x0.0016, total traffic x1.6.', lines)
    self.assertIn('Measured: dp_rec stays below dp_fedavg at B = 40 up to '
                  'B = 2560, by -3.00 ± 1.41 points (more than one SE).',
                  lines)
    self.assertEqual(lines[-1], "The planner predicted B' = 3,272 (equal "
                     'noise over the clip).')
    # Crossing between 640 (33) and 2560 (45): 39 is half way, in log B;
    # the gaps +- 1.41 cross at 640 * 4**(4.59 / 12) and 4**(7.41 / 12).
    lines = frontier_report.verdict(self._rows([0.21, 0.27, 0.33, 0.45]))
    self.assertIn('Measured: dp_rec comes within one SE of dp_fedavg at '
                  'B = 40, or above it, first at B = 2,560 (+6.00 ± 1.41 '
                  "points). Its metric reaches the reference's at B ≈ 1,280 "
                  '(linear in log B between the measured points); with each '
                  'gap moved by one SE, between B ≈ 1,087 and B ≈ 1,507 (a '
                  '±1 SE band, not a confidence interval). A 95% percentile '
                  "bootstrap interval over seeds (10,000 resamples of each "
                  "point's seeds): B 1,060 to 1,546.", lines)
    self.assertNotIn('planner', lines[-1])
    lines = frontier_report.verdict(self._rows([0.40]))
    self.assertIn('Measured: dp_rec comes within one SE of dp_fedavg at '
                  'B = 40, or above it, first at B = 40 (+1.00 ± 1.41 '
                  'points). It reaches the reference already at B = 40.',
                  lines)
    # Within one SE at 160, below the reference's mean everywhere.
    lines = frontier_report.verdict(self._rows([0.21, 0.38]))
    self.assertIn('Measured: dp_rec comes within one SE of dp_fedavg at '
                  'B = 40, or above it, first at B = 160 (-1.00 ± 1.41 '
                  "points). Its metric stays below the reference's up to "
                  'B = 160.', lines)
    self.assertEqual(frontier_report.verdict(self._rows([])), [])
    # A diverged point is named and left out of the break-even; a point
    # with one seed has no SE, so neither has its gap.
    rows = self._rows([0.21, math.nan, 0.33])
    rows[3]['se'] = None
    lines = frontier_report.verdict(rows, label='recall@5')
    self.assertIn('* dp_rec at B = 160 (2 seeds): diverged; left out.', lines)
    self.assertIn('Measured: dp_rec stays below dp_fedavg at B = 40 up to '
                  'B = 640, by -6.00 points (more than one SE).', lines)
    rows = self._rows([0.21, 0.27, 0.45])
    rows[0]['mean'] = math.nan  # A diverged reference: no verdict.
    self.assertEqual(frontier_report.verdict(rows), [])
    # The report carries the verdict under the table.
    text = frontier_report.report_text(self._rows([0.21]),
                                dict(predicted_break_even=3272), 'recall@5')
    self.assertIn(frontier_report.ROUNDS_NOTE +
                  '\n\nAgainst dp_fedavg at B = 40', text)
    self.assertIn("B' = 3,272", text)
    # Two runs of 5 rounds at 0.5 s per point, 2 points.
    self.assertIn('Time, summed over runs: 0.00 h of tuning', text)
    rows = self._rows([0.21])
    rows[1]['tune_seconds'] = 5400.0
    self.assertEqual(frontier_report.time_line(rows),
                     'Time, summed over runs: 1.50 h of tuning runs (wall '
                     "time) and 0.00 h in the points' training rounds "
                     '(s/round x rounds: building and evaluation not '
                     'counted).')
    self.assertAllClose(rows[0]['train_seconds'], 5.0)

  def test_break_even_bounds(self):
    # Gaps -3 +- 1 at 100 and +1 +- 1 at 1000: the mean crosses at 3/4 of
    # the way in log B, the gap + 1 at 1/2, the gap - 1 at the far end.
    found = frontier_report.break_even([(1000, 1.0, 1.0), (100, -3.0, 1.0)])
    self.assertEqual(found['first'], 1000)
    self.assertAllClose(
        [found['estimate'], found['low'], found['high']],
        [10**2.75, 10**2.5, 1000.0])
    self.assertEqual(found['at_first'], [])
    # Never reached by the gap - 1; the gap + 1 at the first point.
    found = frontier_report.break_even([(100, -0.5, 1.0), (1000, -0.2, 1.0)])
    self.assertEqual(found['first'], 100)
    self.assertIsNone(found['estimate'])
    self.assertIsNone(found['high'])
    self.assertEqual(found['at_first'], ['low'])

  def test_break_even_interval(self):
    # Seeds' scores without spread: every resample gives the means' break-
    # even (3/4 of the way from 100 to 1000 in log B).
    curve = [(100, [0.1, 0.1, 0.1]), (1000, [0.5, 0.5])]
    self.assertAllClose(
        frontier_report.break_even_interval(curve, [0.4, 0.4]),
        [10**2.75, 10**2.75])
    # Spread: the interval holds the point estimate and widens with it.
    rng = np.random.default_rng(3)
    noisy = [(b, list(m + 0.02 * rng.standard_normal(5)))
             for b, m in ((100, 0.1), (1000, 0.5))]
    ref = list(0.4 + 0.02 * rng.standard_normal(5))
    low, high = frontier_report.break_even_interval(noisy, ref)
    gaps = [(b, np.mean(s) - np.mean(ref), 0.0) for b, s in noisy]
    estimate = frontier_report.break_even(gaps)['estimate']
    self.assertLess(low, estimate)
    self.assertGreater(high, estimate)
    wider = frontier_report.break_even_interval(
        [(b, [m + 3 * (x - m) for x in s]) for (b, s), m in
         zip(noisy, (0.1, 0.5))], ref)
    self.assertLess(wider[0], low)
    # Open ends: never reached (inf) and reached at the first point (0).
    self.assertEqual(frontier_report.break_even_interval(
        [(100, [0.1, 0.1]), (1000, [0.2, 0.2])], [0.4, 0.4]),
                     (math.inf, math.inf))
    self.assertEqual(frontier_report.break_even_interval(
        [(100, [0.5, 0.5]), (1000, [0.6, 0.6])], [0.4, 0.4]), (0.0, 0.0))
    self.assertIsNone(frontier_report.break_even_interval(
        [(100, [0.5])], [0.4, 0.4]))

  def test_in_law_rows_cross_check_and_complete_the_curve(self):
    rows = self._rows([0.21, 0.27, 0.33])
    def point(b, mean, seconds):
      records = [_record(registry.DP_REC_IN_LAW, mean + d, 1e-5, 0.02, b, i)
                 for i, d in enumerate((-0.01, 0.01))]
      for r in records:
        r['seconds_per_round'] = seconds
      return (registry.DP_REC_IN_LAW, b, records,
              dict(setting='noise_stddev=0.1', shared_with='dp_rec'))
    rows += frontier_report.summarize([point(640, 0.32, 0.2),
                                       point(2560, 0.40, 0.3)])
    lines = frontier_report.verdict(rows)
    self.assertIn('* Cross-check at B = 640: dp_rec_in_law - dp_rec '
                  '-1.00 ± 1.41 points (equal in law: expected 0); s/round '
                  '0.20 in law, 0.50 with the codec.', lines)
    # The real codec's point at 640, the in-law point at 2560.
    self.assertIn('first at B = 2,560 (+1.00 ± 1.41 points)', lines[-1])
    self.assertIn('Measured: dp_rec (in law at B = 2,560) comes', lines[-1])
    self.assertIn('B ≈ 2,100', lines[-1])
    table = frontier_report.markdown(rows, {}, 'metric')
    self.assertIn("noise_stddev=0.1 (dp_rec's: a cross-check)", table)
    self.assertIn('dp_rec_in_law: simulates DP-REC\'s decoded update in law',
                  table)

  def test_in_law_point_takes_no_grid_where_dp_rec_has_a_point(self):
    points = frontier_points.parse_points(
        'dp_rec: 640; dp_rec_in_law: 640,4096')
    with self.assertRaisesRegex(tuning.GridError, "cross-check"):
      frontier_points.parse_grids('dp_rec_in_law@640: clip=0.1,0.2', points)
    grids = frontier_points.parse_grids('dp_rec_in_law@4096: clip=0.1,0.2',
                                        points)
    self.assertEqual(grids[('dp_rec_in_law', 4096)],
                     [{'clip': 0.1}, {'clip': 0.2}])

  def test_predicted_break_even(self):
    task = types.SimpleNamespace(
        population=1000, defaults=types.SimpleNamespace(
            rounds=5, clients_per_round=2, bits=None, grouping='network',
            noise_stddev=0.006, l2_clip=0.2, eval_every=10, client_lr=0.1))
    seen = []

    def calibrated_aggregator(task_, config, name, record_messages):
      del task_, record_messages
      seen.append((name, config.clients_per_round))
      return 'plan'

    def plan_for_run(task_, config, dp_rec_plan):
      del task_
      self.assertEqual(dp_rec_plan, 'plan')
      # The planner needs the task's defaults filled in.
      self.assertEqual((config.rounds, config.clients_per_round), (5, 40))
      return types.SimpleNamespace(dp_rec=types.SimpleNamespace(
          break_even=types.SimpleNamespace(clients_per_round=3272)))

    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_rec',), progress=False)
    with mock.patch.object(run_setup, 'calibrated_aggregator',
                           calibrated_aggregator), \
        mock.patch.object(planning, 'plan_for_run', plan_for_run):
      self.assertEqual(frontier.predicted_break_even(task, base), 3272)
    self.assertEqual(seen, [('dp_rec', 40)])

    def refuse(*_):
      raise ValueError('epsilon 1 is out of reach')
    printed = []
    with mock.patch.object(run_setup, 'calibrated_aggregator',
                           calibrated_aggregator), \
        mock.patch.object(planning, 'plan_for_run', refuse):
      self.assertIsNone(frontier.predicted_break_even(task, base,
                                                      printed.append))
    self.assertEqual(printed, ['[frontier] the planner could not plan B = 40:'
                               ' epsilon 1 is out of reach'])


if __name__ == '__main__':
  tf.test.main()
