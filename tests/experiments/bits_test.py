"""`experiments.bits`: its rows, summary and table."""

import os
import types
from unittest import mock

import tensorflow as tf

from experiments.runner import config as config_lib
from experiments.runner import run_setup
from experiments.studies import bits


def _task():
  defaults = types.SimpleNamespace(
      rounds=5, clients_per_round=2, bits=None, grouping='network',
      noise_stddev=0.006, l2_clip=0.2, eval_every=10, client_lr=0.1)
  return types.SimpleNamespace(defaults=defaults, population=1000)


def _record(metric, bits_, c, epsilon, seed, lost_rounds=0):
  return dict(final_metric=metric, epsilon=epsilon, seed=seed,
              upload_bits_per_client_round=64 + bits_,
              params=dict(bits=bits_, clip_ratio=c, noise_stddev=0.1),
              metric_label='recall@5', lost_rounds=lost_rounds)


class RowsTest(tf.test.TestCase):

  def test_rows(self):
    base = config_lib.RunConfig(task='stackoverflow_lr',
                                aggregators=('dp_rec_in_law',),
                                output_dir='/out', num_seeds=3)
    calibrated = lambda *a: types.SimpleNamespace(
        params=dict(clip_ratio=1.5, num_groups=1))
    with mock.patch.object(run_setup, 'calibrated_aggregator', calibrated), \
        mock.patch.object(bits, '_epsilon', return_value=2.99123):
      auto, same_c, same_epsilon = bits.rows(_task(), base, 80, 0.13, 8,
                                             '/frontier')
    self.assertEqual(auto.folder, os.path.join(
        '/frontier', 'B80', 'dp_rec_in_law', 'noise_stddev=0.13'))
    self.assertEqual((auto.config.bits, auto.config.clip_ratio,
                      auto.config.target_epsilon), (None, None, 1.0))
    # The same c at 8 bits spends more: its target is that epsilon,
    # rounded up.
    self.assertEqual((same_c.config.bits, same_c.config.clip_ratio,
                      same_c.config.target_epsilon), (8, 1.5, 2.9913))
    self.assertEqual((same_epsilon.config.bits, same_epsilon.config.clip_ratio,
                      same_epsilon.config.target_epsilon), (8, None, 1.0))
    for row in (auto, same_c, same_epsilon):
      self.assertEqual(row.config.noise_stddev, 0.13)
      self.assertEqual(row.config.clients_per_round, 80)
      self.assertEqual(row.config.aggregators, ('dp_rec_in_law',))
      self.assertEqual(row.config.output_dir, row.folder)
    self.assertEqual(same_c.folder, os.path.join('/out', 'B80',
                                                 'bits8_same_c'))

  def test_summary_and_table(self):
    rows = [types.SimpleNamespace(name=name) for name in bits.ROWS]
    trained = [
        (rows[0], [_record(0.30, 5, 1.5, 1.0, s) for s in (0, 1)]),
        (rows[1], [_record(0.34 + 0.02 * s, 8, 1.5, 2.99, s,
                           lost_rounds=s) for s in (0, 1)]),
        (rows[2], [])]
    lines = bits.summarize(trained)
    self.assertAllClose([lines[1]['difference'], lines[1]['difference_se']],
                        [0.05, 0.01])
    self.assertNotIn('difference', lines[0])
    self.assertEqual([l['lost_rounds'] for l in lines], [0, 1, 0])
    table = bits.markdown(lines, 2560, 'recall@5')
    self.assertIn('| bits from c | 5 | 1.500 | 0.1 | 1.000 | 69 | '
                  '30.00 ± 0.00 (2 seeds) |  |', table)
    self.assertIn('| more bits, same c | 8 | 1.500 | 0.1 | 2.990 | 72 | '
                  '35.00 ± 1.00 (2 seeds, 1 round lost) | +5.00 ± 1.00 |',
                  table)
    self.assertIn('| more bits, same epsilon | not trained yet |', table)
    self.assertIn('simulates DP-REC', table)


if __name__ == '__main__':
  tf.test.main()
