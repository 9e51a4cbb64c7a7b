"""Tuning grids and the epsilon sweep's summary and outputs (no training)."""

import csv
import os

import tensorflow as tf

from experiments.studies import epsilon_sweep
from experiments.studies import tune


class TuneGridTest(tf.test.TestCase):

  def test_blocks_are_products_in_order(self):
    settings = tune.parse_grid(
        'server_optimizer=sgdm server_lr=0.3,1 | server_optimizer=adam '
        'server_lr=0.01 l2_clip=0.2,0.5')
    self.assertEqual(settings, [
        dict(server_optimizer='sgdm', server_lr=0.3),
        dict(server_optimizer='sgdm', server_lr=1.0),
        dict(server_optimizer='adam', server_lr=0.01, l2_clip=0.2),
        dict(server_optimizer='adam', server_lr=0.01, l2_clip=0.5)])
    self.assertEqual(tune.key(settings[0]),
                     'server_lr=0.3 server_optimizer=sgdm')

  def test_bad_grids_name_the_problem(self):
    for text, message in (('', 'empty'), ('server_lr', 'name=v1'),
                          ('server_lr=fast', "'fast' is not a number"),
                          ('seed=1', "'seed' cannot be tuned"),
                          ('server_lr=1 | ', 'empty block')):
      with self.assertRaisesRegex(tune.GridError, message):
        tune.parse_grid(text)


class EpsilonSweepTest(tf.test.TestCase):

  def test_epsilons_are_parsed_sorted_and_checked(self):
    self.assertEqual(epsilon_sweep.parse_epsilons(['16', '1', '4', '1']),
                     [1.0, 4.0, 16.0])
    for bad, message in ((['x'], "'x' is not a number"),
                         (['0'], "'0' must be positive"),
                         (['inf'], "'inf' must be positive"), ([], 'empty')):
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
        dict(aggregator='dp_fedavg', final_metric=0.4, epsilon=0.99,
             params=dict(noise_multiplier=0.4634, l2_clip=0.2))]
    rows = epsilon_sweep.summarize([
        (1.0, records, dict(noise_stddev=0.006)),
        (64.0, [], dict(aggregator='dp_rec', note='not run: c = 5.683'))])
    self.assertEqual([(r['aggregator'], r['setting'], r['parameter'])
                      for r in rows],
                     [('dp_rec', 'noise_stddev=0.006', 'c 1.703, 5 bits'),
                      ('dp_rec_no_noise', 'noise_stddev=0.006',
                       'clip 0.0102'),
                      ('dp_fedavg', 'noise_stddev=0.006', 'z 0.463'),
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
        ('dp_rec: sigma=1', "'sigma' cannot be tuned")):
      with self.assertRaisesRegex(tune.GridError, message):
        epsilon_sweep.parse_grids(text, ('dp_rec',))

  def test_choose_takes_the_best_eligible_setting(self):
    settings = [dict(noise_stddev=0.003), dict(noise_stddev=0.006),
                dict(noise_stddev=0.012)]
    def results(means, clip_ratios):
      return {tune.key(s): dict(mean=m, params=dict(clip_ratio=c))
              for s, m, c in zip(settings, means, clip_ratios)}
    self.assertEqual(
        epsilon_sweep.choose(results([0.2, 0.3, 0.1], [1.7] * 3), settings),
        dict(noise_stddev=0.006))
    # Ties go to the first in grid order.
    self.assertEqual(
        epsilon_sweep.choose(results([0.3, 0.3, 0.1], [1.7] * 3), settings),
        dict(noise_stddev=0.003))
    # A setting outside the idealisation is never chosen, however good.
    self.assertEqual(
        epsilon_sweep.choose(results([0.2, 0.9, 0.1], [1.7, 4.0, 1.7]),
                             settings),
        dict(noise_stddev=0.003))
    self.assertIsNone(
        epsilon_sweep.choose(results([0.2, 0.9, 0.1], [4.5] * 3), settings))
    self.assertEqual(epsilon_sweep.choose({}, []), {})

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
