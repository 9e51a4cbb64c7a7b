"""Tests for experiments.runner.stats: the statistics studies share."""

import math

import tensorflow as tf

from experiments.runner import stats


def _curve(points):
  return [dict(round=r, metric=m) for r, m in points]


class MeanSeTest(tf.test.TestCase):

  def test_mean_and_standard_error(self):
    mean, se = stats.mean_se([0.3, 0.5])
    self.assertAllClose([mean, se], [0.4, 0.1])
    self.assertEqual(stats.mean_se([0.3]), (0.3, None))

  def test_a_diverged_run_makes_the_mean_nan_without_se(self):
    for bad in (math.nan, math.inf):
      mean, se = stats.mean_se([0.3, bad, 0.5])
      self.assertTrue(math.isnan(mean))
      self.assertIsNone(se)


class MeanCurveTest(tf.test.TestCase):

  def test_seeds_ending_together(self):
    curves = [_curve([(0, 0.1), (10, 0.3), (20, 0.5)]),
              _curve([(0, 0.1), (10, 0.5), (20, 0.7)])]
    series = stats.mean_curve(curves, lambda p: p['metric'])
    self.assertEqual([x for x, _, _ in series], [0, 10, 20])
    self.assertAllClose([m for _, m, _ in series], [0.1, 0.4, 0.6])
    self.assertAllClose([s for _, _, s in series], [0.0, 0.1, 0.1])

  def test_a_seed_cut_short_by_lost_rounds(self):
    # Seed 2 lost rounds and ended at 15: the mean is drawn at the rounds
    # both evaluated before their ends, then once at the end (the latest
    # round), over every seed's last point; never over one seed alone.
    curves = [_curve([(0, 0.1), (10, 0.3), (20, 0.5)]),
              _curve([(0, 0.1), (10, 0.5), (15, 0.6)])]
    series = stats.mean_curve(curves, lambda p: p['metric'])
    self.assertEqual([x for x, _, _ in series], [0, 10, 20])
    self.assertAllClose([m for _, m, _ in series], [0.1, 0.4, 0.55])

  def test_missing_values_and_x(self):
    curves = [[dict(round=0, metric=None, x=None),
               dict(round=5, metric=0.2, x=1.0)],
              [dict(round=0, metric=None, x=None),
               dict(round=5, metric=0.4, x=3.0)]]
    series = stats.mean_curve(curves, lambda p: p['metric'],
                              lambda p: p['x'])
    self.assertEqual(len(series), 1)
    self.assertAllClose(series[0], (2.0, 0.3, 0.1))
    self.assertEqual(stats.mean_curve([], lambda p: p['metric']), [])


class RelativeNoiseTest(tf.test.TestCase):

  def test_relative_noise(self):
    self.assertAllClose(stats.relative_noise(dict(noise_multiplier=2.0), 40),
                        2.0 / 40)
    self.assertAllClose(stats.relative_noise(dict(clip_ratio=2.0), 100),
                        1 / (2.0 * 10))
    self.assertEqual(stats.relative_noise(dict(noise_multiplier=0.0), 10),
                     0.0)
    self.assertIsNone(stats.relative_noise({}, 10))


if __name__ == '__main__':
  tf.test.main()
