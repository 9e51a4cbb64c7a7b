"""DP-REC's exact-sample control (`registry.EXACT_SAMPLE`)."""

import math

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.runner import config as config_lib
from experiments.runner import aggregator_builders
from experiments.runner import registry
from experiments.runner import sampling

_DIM = 4000
_SETTING = dict(value_type=tff.to_type([tff.TensorType(np.float32, [_DIM])]),
                population=1000, clients_per_round=10, rounds=5, delta=1e-4,
                target_epsilon=4.0, bits=4, grouping='network',
                noise_stddev=0.05)


class ExactSampleTest(tf.test.TestCase):

  def test_sigma_c_and_b_map_to_dp_fedavgs_z_and_clip(self):
    params = aggregator_builders.exact_sample_parameters(0.545, 0.005, 10)
    self.assertAllClose(params['noise_multiplier'], math.sqrt(10) / 0.545)
    self.assertAllClose(params['l2_clip'], 0.545 * 0.005)
    # The noise on the mean, z * clip / B, is sigma / sqrt(B).
    self.assertAllClose(params['noise_multiplier'] * params['l2_clip'] / 10,
                        0.005 / math.sqrt(10))

  def test_bad_arguments_are_named(self):
    for args, name in (((0.0, 0.1, 10), 'clip_ratio'),
                       ((0.5, -1.0, 10), 'noise_stddev'),
                       ((0.5, 0.1, 0), 'clients_per_round'),
                       ((math.inf, 0.1, 10), 'clip_ratio')):
      with self.assertRaisesRegex(ValueError, name):
        aggregator_builders.exact_sample_parameters(*args)

  def test_plan_takes_dp_recs_c_sigma_and_sampling(self):
    for extra in ({}, {'clip_ratio': 0.5}):  # Calibrated c, then fixed c.
      setting = dict(_SETTING, l2_clip=1.0, **extra)
      rec = registry.build('dp_rec', **setting)
      control = registry.build(registry.EXACT_SAMPLE, **setting)
      c = rec.params['clip_ratio']
      if extra:
        self.assertEqual(c, 0.5)
      self.assertEqual(control.params['clip_ratio'], c)
      self.assertAllClose(control.params['l2_clip'], c * 0.05)
      self.assertAllClose(control.params['noise_multiplier'],
                          math.sqrt(10) / c)
      self.assertEqual(control.sampling, rec.sampling)
      self.assertEqual(control.sampling, registry.WITH_REPLACEMENT)
      self.assertFalse(control.private)  # Not DP-REC's privacy: a control.
      self.assertIsNone(control.epsilon_after)
      self.assertEqual(control.control_of, 'dp_rec')
      self.assertTrue(control.private_setting)  # Trains as DP-REC does.

  def test_its_clients_are_drawn_as_dp_recs_are(self):
    ids = np.arange(100)
    draws = [sampling.sample_clients(np.random.default_rng(7), ids, 10,
                                     registry.get(name).sampling)
             for name in ('dp_rec', registry.EXACT_SAMPLE)]
    self.assertAllEqual(draws[0], draws[1])
    self.assertLen(draws[0], 10)

  def test_mean_and_variance_match_exact_gaussian_samples(self):
    """The mean of B exact samples of N(clip(u), sigma^2 I) has mean
    clip-mean(u) and variance sigma^2 / B in every coordinate."""
    setting = dict(_SETTING, l2_clip=1.0, clip_ratio=0.5)
    control = registry.build(registry.EXACT_SAMPLE, **setting)
    clip, sigma, b = control.params['l2_clip'], 0.05, 10
    process = control.factory.create(_SETTING['value_type'])
    rng = np.random.default_rng(0)
    big = rng.normal(size=_DIM).astype(np.float32)  # Norm ~63: clipped.
    small = np.full(_DIM, 1e-4, np.float32)  # Norm 0.0063: kept.
    values = [[big]] * 5 + [[small]] * 5
    expected = (5 * big * clip / np.linalg.norm(big) + 5 * small) / b
    noise = np.concatenate([
        process.next(process.initialize(), values).result[0] - expected
        for _ in range(3)])
    n = noise.size
    var = sigma**2 / b
    # Mean: SE sqrt(var / n); variance: SE var * sqrt(2 / (n - 1)).
    self.assertLess(abs(noise.mean()), 4 * math.sqrt(var / n))
    self.assertLess(abs(noise.var(ddof=1) - var), 4 * var * math.sqrt(2 / n))

  def test_clip_ratio_flag_applies_to_the_control(self):
    config = config_lib.RunConfig(task='fashion_mnist',
                                  aggregators=(registry.EXACT_SAMPLE,),
                                  clip_ratio=0.5)
    self.assertEqual(config.clip_ratio, 0.5)
    with self.assertRaisesRegex(ValueError, 'clip_ratio=0.5 applies to'):
      config_lib.RunConfig(task='fashion_mnist', aggregators=('fedavg',),
                           clip_ratio=0.5)


if __name__ == '__main__':
  tf.test.main()
