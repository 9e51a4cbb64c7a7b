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

  def test_writes_the_table_and_the_plot(self):
    rows = [dict(aggregator=n, target_epsilon=e, epsilon=e, seeds=3,
                 mean=m, se=0.01)
            for n, e, m in (('dp_rec', 1.0, 0.1), ('dp_rec', 16.0, 0.25),
                            ('dp_fedavg', 1.0, 0.2))]
    directory = self.create_tempdir().full_path
    csv_path, png_path = epsilon_sweep.write(
        directory, rows, dict(frequent_tags=0.22, initial_metric=0.11),
        'recall@5')
    with open(csv_path) as f:
      self.assertLen(list(csv.DictReader(f)), 3)
    self.assertGreater(os.path.getsize(png_path), 1000)


if __name__ == '__main__':
  tf.test.main()
