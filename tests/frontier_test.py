"""`experiments.frontier`: its plan of runs, its table and its figure."""

import csv
import os

import tensorflow as tf

from experiments.studies import frontier


def _record(name, metric, upload, download, epsilon=1.0, seed=0):
  return dict(aggregator=name, final_metric=metric, upload_gb=upload,
              download_gb=download, epsilon=epsilon, rounds=5, seed=seed,
              seconds_per_round=0.5)


class FrontierTest(tf.test.TestCase):

  def test_plan_runs(self):
    self.assertEqual(
        frontier.plan_runs([40, 160], [40], ('dp_fedavg', 'ddgauss16')),
        {40: ['dp_rec', 'dp_fedavg', 'ddgauss16'], 160: ['dp_rec']})
    self.assertEqual(frontier.parse_sizes(['640', '40', '40'], 'x'),
                     [40, 640])
    with self.assertRaisesRegex(ValueError, "--dp_rec_clients: 'many' is not"):
      frontier.parse_sizes(['many'], 'dp_rec_clients')
    with self.assertRaisesRegex(ValueError, "--x: '0' must be at least 1"):
      frontier.parse_sizes(['0'], 'x')
    with self.assertRaisesRegex(ValueError, '--x is empty'):
      frontier.parse_sizes([], 'x')

  def test_noise_stddev_scaling_keeps_the_averaged_noise(self):
    sigma = frontier.noise_stddev_for(640, 40, 0.006)
    self.assertAllClose(sigma, 0.024)
    # sigma / sqrt(B): the noise of the mean, equal at both sizes.
    self.assertAllClose(sigma / 640**0.5, 0.006 / 40**0.5)
    self.assertEqual(frontier.noise_stddev_for(40, 40, 0.006), 0.006)

  def test_summary_table_and_figure(self):
    points = [
        (40, [_record('dp_rec', 0.10, 1e-6, 1e-4, seed=0),
              _record('dp_rec', 0.14, 1e-6, 1e-4, seed=1),
              _record('dp_fedavg', 0.30, 0.4, 0.4, seed=0),
              _record('dp_fedavg', 0.32, 0.4, 0.4, seed=1)]),
        (160, [_record('dp_rec', 0.20, 4e-6, 4e-4, seed=0),
               _record('dp_rec', 0.22, 4e-6, 4e-4, seed=1)])]
    rows = frontier.summarize(points)
    self.assertEqual([(r['aggregator'], r['clients_per_round'])
                      for r in rows],
                     [('dp_rec', 40), ('dp_fedavg', 40), ('dp_rec', 160)])
    self.assertAllClose(rows[0]['mean'], 0.12)
    self.assertAllClose(rows[0]['se'], 0.02)  # sd 0.0283 / sqrt(2)
    self.assertAllClose(rows[2]['total_gb'], 4.04e-4)
    context = dict(frequent_tags=0.22, initial_metric=0.11)
    table = frontier.markdown(rows, context, 'recall@5')
    self.assertIn('| dp_rec | 160 | 5 | 1.000 | 21.00 ± 1.00 (2 seeds) |',
                  table)
    self.assertIn('| frequent tags (5 most frequent) | - | - | - | 22.00 |',
                  table)
    directory = self.create_tempdir().full_path
    paths = frontier.write(directory, rows, context, 'recall@5')
    self.assertEqual([os.path.basename(p) for p in paths],
                     ['frontier.csv', 'frontier.md', 'frontier.png'])
    with open(paths[0]) as f:
      self.assertLen(list(csv.DictReader(f)), 3)
    self.assertGreater(os.path.getsize(paths[2]), 10_000)


if __name__ == '__main__':
  tf.test.main()
