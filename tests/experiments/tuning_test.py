"""Tuning grids and the epsilon sweep's summary and outputs (no training)."""

import csv
import json
import math
import os
import types
from unittest import mock

import tensorflow as tf

from experiments.data import tasks as tasks_lib
from experiments.runner import config as config_lib
from experiments.runner import training
from experiments.runner import run_setup
from experiments.studies import epsilon_sweep
from experiments.studies import tuning
from tff_dprec.accounting import accountings


class TuneGridTest(tf.test.TestCase):

  def test_blocks_are_products_in_order(self):
    settings = tuning.parse_grid(
        'server_optimizer=sgdm server_lr=0.3,1 | server_optimizer=adam '
        'server_lr=0.01 l2_clip=0.2,0.5')
    self.assertEqual(settings, [
        dict(server_optimizer='sgdm', server_lr=0.3),
        dict(server_optimizer='sgdm', server_lr=1.0),
        dict(server_optimizer='adam', server_lr=0.01, l2_clip=0.2),
        dict(server_optimizer='adam', server_lr=0.01, l2_clip=0.5)])
    self.assertEqual(tuning.key(settings[0]),
                     'server_lr=0.3 server_optimizer=sgdm')

  def test_bad_grids_name_the_problem(self):
    for text, message in (('', 'empty'), ('server_lr', 'name=v1'),
                          ('server_lr=fast', "'fast' is not a number"),
                          ('seed=1', "'seed' cannot be tuned"),
                          ('server_lr=1 | ', 'empty block')):
      with self.assertRaisesRegex(tuning.GridError, message):
        tuning.parse_grid(text)


class EdgeTest(tf.test.TestCase):

  def test_edges(self):
    grid = [{'l2_clip': v, 'server_lr': lr} for v in (0.2, 0.5, 1.0)
            for lr in (3.0, 10.0)]
    self.assertEqual(tuning.edges({'l2_clip': 0.5, 'server_lr': 10.0}, grid),
                     ['server_lr (largest)'])
    self.assertEqual(tuning.edges({'l2_clip': 0.2, 'server_lr': 3.0}, grid),
                     ['l2_clip (smallest)', 'server_lr (smallest)'])
    self.assertEqual(tuning.edges({'l2_clip': 0.5}, [{'l2_clip': 0.5}]), [])

  def test_beyond_edge(self):
    grid = [{'noise_stddev': v} for v in (0.0122, 0.0305, 0.0609)]
    # Smallest chosen: 0.0122^2 / 0.0305 = 0.00488; largest: 0.0609^2/0.0305.
    self.assertEqual(tuning.beyond_edge(grid[0], grid),
                     {'noise_stddev': 0.00488})
    self.assertEqual(tuning.beyond_edge(grid[2], grid),
                     {'noise_stddev': 0.1216})
    self.assertIsNone(tuning.beyond_edge(grid[1], grid))
    # Fixed fields ride along; only the varied one steps.
    grid = [{'l2_clip': v, 'server_lr': 10.0} for v in (0.2, 0.5, 1)]
    self.assertEqual(tuning.beyond_edge(grid[2], grid),
                     {'l2_clip': 2.0, 'server_lr': 10.0})
    for chosen, settings in (
        ({'l2_clip': 0.5}, [{'l2_clip': 0.5}]),  # One value.
        ({'l2_clip': 0.2, 'server_lr': 3.0},  # Two varied fields.
         [{'l2_clip': a, 'server_lr': b} for a in (0.2, 1) for b in (3., 9.)]),
        ({'grouping': 'a'}, [{'grouping': 'a'}, {'grouping': 'b'}]),
        ({'l2_clip': 0.0}, [{'l2_clip': 0.0}, {'l2_clip': 1.0}]),
        # Blocks that do not all set the field, and mixed types.
        ({'l2_clip': 0.5}, [{'l2_clip': 0.2}, {'l2_clip': 0.5},
                            {'server_lr': 3.0}]),
        ({'grouping': 8}, [{'grouping': 'tensor'}, {'grouping': 4},
                           {'grouping': 8}]),
        ({'bits': 1}, [{'bits': 1}, {'bits': 2}])):  # Down to 0.
      self.assertIsNone(tuning.beyond_edge(chosen, settings), chosen)
    # Int fields step to ints, at least one past the edge.
    bits = [{'bits': b} for b in (4, 6, 8)]
    self.assertEqual(tuning.beyond_edge(bits[2], bits), {'bits': 11})
    self.assertEqual(tuning.beyond_edge(bits[0], bits), {'bits': 3})
    close = [{'bits': b} for b in (9, 10)]
    self.assertEqual(tuning.beyond_edge(close[1], close), {'bits': 11})
    self.assertEqual(tuning.beyond_edge(close[0], close), {'bits': 8})
    self.assertEqual(tuning.edges({'grouping': 8}, [
        {'grouping': 'tensor'}, {'grouping': 8}]), [])

  def test_tune_past_edges_grows_until_inside_or_out_of_steps(self):
    scores = {1.0: 0.1, 2.0: 0.2, 4.0: 0.3, 8.0: 0.25}
    calls, announced = [], []

    def tune_grid(settings):
      calls.append([s['l2_clip'] for s in settings])
      results = {tuning.key(s): dict(mean=scores[s['l2_clip']])
                 for s in settings}
      return max(settings, key=lambda s: scores[s['l2_clip']]), results

    grid = [{'l2_clip': 1.0}, {'l2_clip': 2.0}]
    chosen, results, settings, added = tuning.tune_past_edges(
        tune_grid, grid, 2, lambda c, s: announced.append((c, s)))
    self.assertEqual(calls, [[1, 2], [1, 2, 4], [1, 2, 4, 8]])
    self.assertEqual((chosen, added), ({'l2_clip': 4.0},
                                       [{'l2_clip': 4.0}, {'l2_clip': 8.0}]))
    self.assertLen(settings, 4)
    self.assertLen(results, 4)
    self.assertEqual(announced[0], ({'l2_clip': 2.0}, {'l2_clip': 4.0}))
    self.assertEqual(grid, [{'l2_clip': 1.0}, {'l2_clip': 2.0}])  # Unchanged.
    self.assertEqual(tuning.grown_note([tuning.key(s) for s in added]),
                     'grid grown past its edge to l2_clip=4.0, then '
                     'l2_clip=8.0')
    self.assertEqual(tuning.grown_note([]), '')
    calls.clear()
    chosen, _, _, added = tuning.tune_past_edges(tune_grid, grid, 0)
    self.assertEqual((calls, chosen, added), ([[1, 2]], {'l2_clip': 2.0}, []))
    # Nothing eligible (None): no steps.
    chosen, _, _, added = tuning.tune_past_edges(lambda s: (None, {}), grid, 2)
    self.assertEqual((chosen, added), (None, []))


class PopulationFlagTest(tf.test.TestCase):

  def test_parse_population_names_the_flag_and_value(self):
    self.assertIsNone(config_lib.parse_population(None))
    self.assertEqual(config_lib.parse_population('stored'), 'stored')
    self.assertEqual(config_lib.parse_population('5000'), 5000)
    for bad in ('1', 'many', '-3', '2.5'):
      with self.assertRaisesRegex(
          ValueError, f"--population must be 'stored' or an int >= 2, found "
          f"'{bad}'"):
        config_lib.parse_population(bad)


class TuneReuseTest(tf.test.TestCase):

  def test_results_are_reused_only_under_the_same_configuration(self):
    trained = []

    def run(config, print_fn=print, context_out=None):
      del print_fn, context_out
      trained.append((config.l2_clip, config.rounds))
      return [dict(final_metric=0.3, epsilon=1.0, params={})]

    out = self.create_tempdir().full_path
    path = os.path.join(out, 'tune.json')
    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_fedavg',), output_dir=out,
                                rounds=5)
    settings = tuning.parse_grid('l2_clip=0.2,0.5')
    with mock.patch.object(training, 'run', run):
      tuning.tune(base, settings, path, print_fn=lambda *a: None)
      tuning.tune(base, settings, path, print_fn=lambda *a: None)
      self.assertEqual(trained, [(0.2, 5), (0.5, 5)])
      # Another configuration (here the rounds; a population change alike):
      # the stored results are not reused but rerun and replaced.
      printed = []
      results = tuning.tune(
          config_lib.RunConfig(**{**base.asdict(), 'rounds': 7}), settings,
          path, print_fn=printed.append)
    self.assertEqual(trained[2:], [(0.2, 7), (0.5, 7)])
    self.assertIn('l2_clip=0.2: stored result ran under another '
                  'configuration; rerunning.', printed)
    self.assertEqual({r['base']['rounds'] for r in results.values()}, {7})

  def test_another_data_folder_reuses_and_keeps_the_stored_results(self):
    # A study moved to another machine or folder: its data folder differs,
    # its results do not. Stored before data_dir was neutral (the file names
    # it) or after: either is reused, and the file is left as it was (its
    # seconds are the tuning's, not a reuse's).
    trained = []

    def run(config, print_fn=print, context_out=None):
      del print_fn, context_out
      trained.append(config.l2_clip)
      return [dict(final_metric=0.3, epsilon=1.0, params={})]

    out = self.create_tempdir().full_path
    path = os.path.join(out, 'tune.json')
    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_fedavg',), output_dir=out,
                                rounds=5, data_dir='data_cache')
    old_style = dict(tuning.base_fingerprint(base), data_dir='data_cache')
    with open(path, 'w') as f:
      json.dump({'l2_clip=0.2': dict(setting={'l2_clip': 0.2}, mean=0.41,
                                     metrics=[0.41], seconds=36.0,
                                     base=old_style)}, f)
    with open(path) as f:
      before = f.read()
    moved = config_lib.RunConfig(**{**base.asdict(),
                                    'data_dir': '/elsewhere/data_cache'})
    with mock.patch.object(training, 'run', run):
      results = tuning.tune(moved, [{'l2_clip': 0.2}], path,
                          print_fn=lambda *a: None)
    self.assertEqual(trained, [])
    self.assertEqual(results['l2_clip=0.2']['seconds'], 36.0)
    with open(path) as f:
      self.assertEqual(f.read(), before)
    self.assertEqual(list(tuning.stored_results(moved, [{'l2_clip': 0.2}],
                                              path)), ['l2_clip=0.2'])
    # Any field that changes results still reruns (here the rounds).
    self.assertFalse(tuning.ran_under(
        dict(base=old_style), tuning.base_fingerprint(
            config_lib.RunConfig(**{**base.asdict(), 'rounds': 7}))))
    self.assertFalse(tuning.ran_under({}, tuning.base_fingerprint(base)))


  def test_results_stored_under_the_earlier_accounting_name_are_reused(self):
    # Tuning results written when the default accounting was named 'pld'
    # (the same accounting as 'min_pld_rdp') ran under today's default.
    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_fedavg',), rounds=5)
    self.assertEqual(base.accounting, 'min_pld_rdp')
    stored = dict(tuning.base_fingerprint(base), accounting='pld')
    self.assertTrue(tuning.ran_under(dict(base=stored),
                                     tuning.base_fingerprint(base)))
    rdp = config_lib.RunConfig(**{**base.asdict(), 'accounting': 'rdp'})
    self.assertFalse(tuning.ran_under(dict(base=stored),
                                      tuning.base_fingerprint(rdp)))

  def test_a_config_given_the_earlier_accounting_name_holds_todays(self):
    with self.assertWarns(accountings.RenamedAccountingWarning):
      config = config_lib.RunConfig(task='stackoverflow_lr',
                                    aggregators=('dp_rec',), accounting='pld')
    self.assertEqual(config.accounting, 'min_pld_rdp')


class StoredResultsTest(tf.test.TestCase):

  def test_reads_only_results_of_this_configuration(self):
    path = os.path.join(self.create_tempdir().full_path, 'tune.json')
    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_rec',), progress=False)
    other = config_lib.RunConfig(**{**base.asdict(), 'rounds': 7})
    with open(path, 'w') as f:
      json.dump({'l2_clip=0.1': dict(mean=0.3,
                                     base=tuning.base_fingerprint(base)),
                 'l2_clip=0.2': dict(mean=0.4,
                                     base=tuning.base_fingerprint(other))}, f)
    grid = [{'l2_clip': 0.1}]
    self.assertEqual(list(tuning.stored_results(base, grid, path)),
                     ['l2_clip=0.1'])
    with self.assertRaisesRegex(tuning.NotTrainedYet,
                                r'1 of 2 tuning settings not trained yet '
                                r'\(l2_clip=0.2\)'):
      tuning.stored_results(base, grid + [{'l2_clip': 0.2}], path)
    with self.assertRaisesRegex(tuning.NotTrainedYet, '1 of 1'):
      tuning.stored_results(base, grid, path + '.missing')


class EpsilonSweepTest(tf.test.TestCase):

  def test_epsilons_are_parsed_sorted_and_checked(self):
    self.assertEqual(epsilon_sweep.parse_epsilons(['16', '1', '4', '1']),
                     [1.0, 4.0, 16.0])
    for bad, message in ((['x'], "'x' is not a number"),
                         (['0'], "'0' must be positive"),
                         (['inf'], "'inf' must be positive"), ([], 'empty'),
                         (['1', '1.0000001'], 'too close to tell apart')):
      with self.assertRaisesRegex(ValueError, message):
        epsilon_sweep.parse_epsilons(bad)

  def test_summary_mean_and_standard_error(self):
    def record(name, metric, eps):
      return dict(aggregator=name, final_metric=metric, epsilon=eps)
    rows = epsilon_sweep.summarize([
        (1.0, [record('dp_rec', 0.10, 0.99), record('dp_rec', 0.12, 0.99),
               record('dp_rec', 0.14, 1.0), record('dp_fedavg', 0.2, 1.0)]),
        (4.0, [record('dp_rec', 0.3, 3.9)])])
    first = rows[0]
    self.assertEqual((first['aggregator'], first['target_epsilon'],
                      first['seeds'], first['epsilon']),
                     ('dp_rec', 1.0, 3, 1.0))
    self.assertAlmostEqual(first['mean'], 0.12)
    # Sample standard deviation 0.02, over sqrt(3).
    self.assertAlmostEqual(first['se'], 0.02 / 3**0.5)
    self.assertIsNone(rows[1]['se'])
    self.assertEqual([r['target_epsilon'] for r in rows], [1.0, 1.0, 4.0])

  def test_summary_carries_the_setting_the_parameter_and_skipped_points(self):
    dp_rec = dict(clip_ratio=1.7027, bits=5, l2_clip=0.0102)
    control = dict(control_of='dp_rec', l2_clip=0.0102, noise_multiplier=0.0)
    records = [
        dict(aggregator='dp_rec', final_metric=0.2, epsilon=1.0,
             params=dp_rec),
        dict(aggregator='dp_rec_no_noise', final_metric=0.25, epsilon=None,
             params=control),
    ]
    fedavg = [dict(aggregator='dp_fedavg', final_metric=0.4, epsilon=0.99,
                   params=dict(noise_multiplier=0.4634, l2_clip=0.2))]
    rows = epsilon_sweep.summarize([
        (1.0, records, dict(noise_stddev=0.006)),
        (1.0, fedavg, {}),
        (64.0, [], dict(aggregator='dp_rec', note='not run: c = 5.683'))])
    self.assertEqual([(r['aggregator'], r['setting'], r['parameter'])
                      for r in rows],
                     [('dp_rec', 'noise_stddev=0.006', 'c 1.703, 5 bits'),
                      ('dp_rec_no_noise', 'noise_stddev=0.006',
                       'clip 0.0102'),
                      ('dp_fedavg', 'task defaults', 'z 0.463'),
                      ('dp_rec', '', '')])
    self.assertIsNone(rows[1]['epsilon'])
    skipped = rows[3]
    self.assertEqual((skipped['seeds'], skipped['mean'], skipped['note']),
                     (0, None, 'not run: c = 5.683'))
    table = epsilon_sweep.markdown_table(rows, dict(frequent_tags=0.22),
                                         'recall@5')
    self.assertIn('| 1 | dp_rec (no noise) | noise_stddev=0.006 | '
                  'clip 0.0102 | 25.00 |', table)
    self.assertIn('| 64 | dp_rec |  |  | not run | not run: c = 5.683 |',
                  table)
    self.assertIn('| | frequent tags | | | 22.00 | |', table)

  def test_grids_per_aggregator(self):
    grids = epsilon_sweep.parse_grids(
        'dp_fedavg: l2_clip=0.2,0.5 server_lr=10; dp_rec: noise_stddev=0.01',
        ('dp_fedavg',))
    # Grids of aggregators the sweep does not run are dropped.
    self.assertEqual(grids, {'dp_fedavg': [dict(l2_clip=0.2, server_lr=10.0),
                                           dict(l2_clip=0.5, server_lr=10.0)]})
    self.assertEqual(epsilon_sweep.parse_grids('', ('dp_rec',)), {})
    self.assertEqual(
        set(epsilon_sweep.parse_grids(epsilon_sweep.DEFAULT_GRIDS,
                                      ('dp_rec', 'dp_fedavg'))),
        {'dp_rec', 'dp_fedavg'})
    for text, message in (
        ('dp_fedavg l2_clip=0.2', 'is not "aggregator: grid"'),
        ('fedavg: server_lr=1', "'fedavg' is not a private aggregator"),
        ('dp_rec_no_noise: l2_clip=1', "'dp_rec_no_noise' is not a private"),
        ('dp_rec: noise_stddev=1; dp_rec: noise_stddev=2', 'two grids'),
        ('dp_rec: sigma=1', "'sigma' cannot be tuned"),
        ('dp_rec: target_epsilon=64',
         "dp_rec: 'target_epsilon' cannot vary in an epsilon sweep"),
        ('dp_rec: noise_stddev=0.1 rounds=5', "'rounds' cannot vary"),
        ('dp_rec: accounting=paper', "'accounting' cannot vary"),
        ('dp_rec: clients_per_round=80', "'clients_per_round' cannot vary")):
      with self.assertRaisesRegex(tuning.GridError, message):
        epsilon_sweep.parse_grids(text, ('dp_rec',))

  def test_grid_values_are_checked_before_anything_trains(self):
    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_fedavg',))
    epsilon_sweep.check_grid_values(
        base, epsilon_sweep.parse_grids(epsilon_sweep.DEFAULT_GRIDS,
                                        ('dp_fedavg', 'dp_rec')))
    with self.assertRaisesRegex(ValueError, r'--grids: dp_fedavg: '
                                r'l2_clip=-1.0 server_lr=10.0: .*l2_clip'):
      epsilon_sweep.check_grid_values(base, epsilon_sweep.parse_grids(
          'dp_fedavg: l2_clip=0.2,-1 server_lr=10', ('dp_fedavg',)))

  def test_choose_takes_the_best_eligible_setting(self):
    settings = [dict(noise_stddev=0.003), dict(noise_stddev=0.006),
                dict(noise_stddev=0.012)]
    def results(means, clip_ratios):
      return {tuning.key(s): dict(mean=m, params=dict(clip_ratio=c))
              for s, m, c in zip(settings, means, clip_ratios)}
    self.assertEqual(
        tuning.choose(results([0.2, 0.3, 0.1], [1.7] * 3), settings),
        dict(noise_stddev=0.006))
    # Ties go to the first in grid order.
    self.assertEqual(
        tuning.choose(results([0.3, 0.3, 0.1], [1.7] * 3), settings),
        dict(noise_stddev=0.003))
    # A setting outside the idealisation is never chosen, however good.
    self.assertEqual(
        tuning.choose(results([0.2, 0.9, 0.1], [1.7, 4.0, 1.7]),
                             settings),
        dict(noise_stddev=0.003))
    self.assertIsNone(
        tuning.choose(results([0.2, 0.9, 0.1], [4.5] * 3), settings))
    # A NaN clip ratio is not inside the limit either.
    self.assertEqual(
        tuning.choose(results([0.2, 0.9, 0.1],
                                     [1.7, math.nan, 1.7]), settings),
        dict(noise_stddev=0.003))
    # A diverged run (non-finite mean) never wins.
    self.assertEqual(
        tuning.choose(results([0.2, math.nan, 0.1], [1.7] * 3),
                             settings), dict(noise_stddev=0.003))
    self.assertIsNone(
        tuning.choose(results([math.nan] * 3, [1.7] * 3), settings))
    self.assertEqual(tuning.choose({}, []), {})

  def _sweep_fakes(self, calls):
    """(task, calibrated_aggregator, run): fakes that record the runs asked for.
    """
    # training, the plans and the task are replaced by fakes: this checks
    # which runs the sweep asks for, not what they learn.
    defaults = types.SimpleNamespace(
        rounds=5, clients_per_round=2, bits=None, grouping='network',
        noise_stddev=0.006, l2_clip=0.2, eval_every=10, client_lr=0.1)
    task = types.SimpleNamespace(defaults=defaults, population=1000)
    # Validation metric of each prior sigma: 0.012 diverges.
    validation = {0.003: 0.1, 0.006: 0.3, 0.012: math.nan}

    def calibrated_aggregator(task_, config, name, record_messages):
      del task_, record_messages
      if name == 'dp_rec':  # c grows with epsilon: 2 at 1, 4 at 4.
        return types.SimpleNamespace(params=dict(
            clip_ratio=2.0 * config.target_epsilon**0.5, bits=5))
      return types.SimpleNamespace(params=dict(noise_multiplier=1.0))

    def run(config, print_fn=print, context_out=None):
      calls.append(config)
      print_fn('[x] WARNING: shown')
      print_fn('[x] chatter: hidden')
      if context_out is not None:
        context_out.update(frequent_tags=0.22)
      metric = (validation[config.noise_stddev]
                if config.eval_split == 'validation' else 0.5)
      return [dict(aggregator=a, seed=s, final_metric=metric, epsilon=1.0,
                   params=dict(clip_ratio=2.0, bits=5), metric_label='m')
              for a in config.aggregators for s in config.seeds]

    return task, calibrated_aggregator, run

  def test_run_sweep_tunes_on_validation_and_runs_points_on_test(self):
    calls = []
    task, calibrated_aggregator, run = self._sweep_fakes(calls)
    out = self.create_tempdir().full_path
    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_rec',), output_dir=out,
                                num_seeds=3, progress=False)
    printed = []
    with mock.patch.object(training, 'run', run), \
        mock.patch.object(run_setup, 'calibrated_aggregator',
                          calibrated_aggregator), \
        mock.patch.object(tasks_lib, 'create_task',
                          lambda *a, **k: task):
      points, context, label = epsilon_sweep.run_sweep(
          base, [1.0, 4.0],
          epsilon_sweep.parse_grids(epsilon_sweep.DEFAULT_GRIDS,
                                    ('dp_rec',)),
          tune_seeds=1, controls=True, print_fn=printed.append)
    tuned, final = calls[:3], calls[3:]
    self.assertEqual([c.noise_stddev for c in tuned], [0.003, 0.006, 0.012])
    for c in tuned:
      self.assertEqual((c.eval_split, c.target_epsilon, c.seeds,
                        c.aggregators),
                       ('validation', 1.0, (tuning.TUNE_SEED_OFFSET,),
                        ('dp_rec',)))
      self.assertStartsWith(c.output_dir,
                            os.path.join(out, 'eps1', 'tune', 'dp_rec'))
    # One point: the best finite validation mean, on the test split, seeds
    # 0-2, with its control; epsilon 4 (c = 4) is neither tuned nor run.
    self.assertLen(final, 1)
    point = final[0]
    self.assertEqual(
        (point.eval_split, point.target_epsilon, point.seeds,
         point.aggregators, point.noise_stddev),
        ('test', 1.0, (0, 1, 2), ('dp_rec', 'dp_rec_no_noise'), 0.006))
    self.assertEqual(point.output_dir,
                     os.path.join(out, 'eps1', 'dp_rec', 'noise_stddev=0.006'))
    self.assertEqual([(p[0], len(p[1]), p[2].get('note', '')[:16])
                      for p in points],
                     [(1.0, 6, ''), (4.0, 0, 'not run: c = 4.0')])
    self.assertEqual((context, label), (dict(frequent_tags=0.22), 'm'))
    self.assertIn('[x] WARNING: shown', printed)
    self.assertNotIn('[x] chatter: hidden', printed)

  def test_writes_the_table_and_the_plot(self):
    rows = [dict(aggregator=n, target_epsilon=e, epsilon=e, setting='',
                 parameter='', seeds=3, mean=m, se=0.01, note='')
            for n, e, m in (('dp_rec', 1.0, 0.1), ('dp_rec', 16.0, 0.25),
                            ('dp_rec_no_noise', 1.0, 0.12),
                            ('dp_fedavg', 1.0, 0.2))]
    rows.append(dict(aggregator='dp_rec', target_epsilon=64.0, epsilon=None,
                     setting='', parameter='', seeds=0, mean=None, se=None,
                     note='not run'))
    directory = self.create_tempdir().full_path
    csv_path, md_path, png_path = epsilon_sweep.write(
        directory, rows, dict(frequent_tags=0.22, initial_metric=0.11),
        'recall@5')
    with open(csv_path) as f:
      written = list(csv.DictReader(f))
    self.assertLen(written, 5)
    self.assertEqual(written[-1]['note'], 'not run')
    with open(md_path) as f:
      self.assertIn('| 16 | dp_rec |  |  | 25.00 ± 1.00 |  |', f.read())
    self.assertGreater(os.path.getsize(png_path), 1000)


if __name__ == '__main__':
  tf.test.main()
