"""Tests of experiments.runner.aggregator_builders: DDGauss's accounted
parameters against TFF's, and DP-FedAvg and DP-REC at a given noise
multiplier or clip ratio."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.runner import aggregator_builders
from experiments.runner import config as config_lib
from experiments.runner import execution
from experiments.runner import registry
from tff_dprec import accounting
from tff_dprec.accounting import baselines
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import dp_rec_in_law
from tff_dprec.aggregators import rec_compression


class DDGaussAccountingMatchesTffTest(tf.test.TestCase):

  def test_parameters_equal_what_tff_runs(self):
    # The accountant's DDGauss parameters must be those of the aggregator that
    # actually runs: compare with TFF's own round measurements.
    execution.allow_oversize_protos()
    tff.backends.test.set_sync_test_cpp_execution_context()
    try:
      value_type = tff.to_type([tff.TensorType(np.float32, [30, 10]),
                                tff.TensorType(np.float32, [10])])
      aggregator = registry.build(
          'ddgauss16', value_type=value_type, population=500,
          clients_per_round=5, rounds=20, target_epsilon=4.0, delta=1e-4,
          bits=7, grouping='tensor', noise_stddev=0.1, l2_clip=0.3)
      process = aggregator.factory.create(value_type)
      values = [[np.full((30, 10), 0.01, np.float32),
                 np.full(10, 0.01, np.float32)] for _ in range(5)]
      measured = process.next(process.initialize(),
                              values).measurements['mean_value']
    finally:
      tff.backends.native.set_sync_local_cpp_execution_context()
    params = baselines.ddgauss_params(
        noise_multiplier=aggregator.params['noise_multiplier'], l2_clip=0.3,
        bits=16, clients_per_round=5, dimension=310)
    self.assertEqual(int(measured['padded_dim']), params.padded_dim)
    self.assertAllClose(measured['scale_factor'], params.scale, rtol=1e-5)
    self.assertAllClose(measured['scaled_local_stddev'],
                        params.scaled_local_stddev, rtol=1e-5)
    self.assertAllClose(measured['scaled_inflated_l2'],
                        params.l2_sensitivity, rtol=1e-4)


class FixedNoiseMultiplierTest(tf.test.TestCase):
  """DP-FedAvg at a given noise multiplier (the local-DP comparison)."""

  _SETTING = dict(value_type=tff.to_type([tff.TensorType(np.float32, [3])]),
                  population=100, clients_per_round=10, rounds=5, delta=1e-3,
                  bits=7, grouping='tensor', noise_stddev=0.1, l2_clip=0.3)

  def test_given_noise_is_used_and_its_epsilon_reported(self):
    aggregator = registry.build('dp_fedavg', target_epsilon=50.0,
                          noise_multiplier=0.9, **self._SETTING)
    self.assertEqual(aggregator.params['noise_multiplier'], 0.9)
    self.assertEqual(aggregator.epsilon_after(5), accounting.dp_fedavg_epsilon(
        noise_multiplier=0.9, population=100, clients_per_round=10, rounds=5,
        delta=1e-3))
    calibrated = registry.build('dp_fedavg', target_epsilon=50.0,
                            **self._SETTING)
    self.assertLess(calibrated.params['noise_multiplier'], 0.9)

  def test_noise_above_the_budget_is_refused(self):
    with self.assertRaisesRegex(aggregator_builders.OverBudgetError,
                                r'noise_multiplier=0.5 gives epsilon=.*'
                                r'above target_epsilon=1.0'):
      registry.build('dp_fedavg', target_epsilon=1.0, noise_multiplier=0.5,
                 **self._SETTING)

  def test_clip_ratios_outside_the_idealisation_are_warned(self):
    self.assertIsNone(registry.idealisation_warning(dict(clip_ratio=3.99)))
    self.assertIsNone(registry.idealisation_warning(dict(noise_multiplier=1)))
    self.assertRegex(registry.idealisation_warning(dict(clip_ratio=4.0)),
                     r'WARNING: clip ratio 4.000 >= 4: outside the '
                     r'idealisation .* docs/PRIVACY.md section 7')

  def test_given_clip_ratio_is_used_and_checked(self):
    aggregator = registry.build('dp_rec', target_epsilon=50.0, clip_ratio=0.8,
                      **self._SETTING)
    self.assertEqual(aggregator.params['clip_ratio'], 0.8)
    self.assertAllClose(aggregator.params['l2_clip'], 0.08)
    self.assertLessEqual(aggregator.epsilon_after(5), 50.0)
    with self.assertRaisesRegex(ValueError, r'clip_ratio=3.0 gives epsilon='
                                r'.* above target_epsilon=1.0'):
      registry.build('dp_rec', target_epsilon=1.0, clip_ratio=3.0,
                 **self._SETTING)

  def test_accounting_label_names_the_worst_pair_where_it_applies(self):
    # 'tensor' grouping of two tensors is two groups: no worst pair.
    pair = tff.to_type([tff.TensorType(np.float32, [3]),
                        tff.TensorType(np.float32, [2])])
    two = registry.build('dp_rec', target_epsilon=50.0, clip_ratio=0.8,
                         **dict(self._SETTING, value_type=pair))
    self.assertEqual(two.accounting, 'dp_rec_pld')
    one = registry.build('dp_rec', target_epsilon=50.0, clip_ratio=0.8,
                         **dict(self._SETTING, grouping='network'))
    self.assertEqual(one.accounting, 'dp_rec_pld+worst_pair')
    rdp = registry.build('dp_rec', target_epsilon=50.0, clip_ratio=0.8,
                         **dict(self._SETTING, grouping='network',
                                accounting='rdp'))
    self.assertEqual(rdp.accounting, 'dp_rec_rdp')

  def test_config_refuses_it_without_dp_fedavg(self):
    with self.assertRaisesRegex(ValueError,
                                r'noise_multiplier=1.5 applies to dp_fedavg'):
      config_lib.RunConfig(task='digits', aggregators=('dp_rec',),
                           noise_multiplier=1.5)
    with self.assertRaisesRegex(ValueError, 'noise_multiplier must be'):
      config_lib.RunConfig(task='digits', aggregators=('dp_fedavg',),
                           noise_multiplier=-1.0)
    with self.assertRaisesRegex(ValueError, r'clip_ratio must be in \[0.001, '
                                r'25.0\].*found 30.0'):
      config_lib.RunConfig(task='digits', aggregators=('dp_rec',),
                           clip_ratio=30.0)
    with self.assertRaisesRegex(ValueError, r'clip_ratio=0.5 applies to '
                                'dp_rec only'):
      config_lib.RunConfig(task='digits', aggregators=('dp_fedavg',),
                           clip_ratio=0.5)


class InLawTest(tf.test.TestCase):
  """`dp_rec_in_law`: DP-REC's calibration, accounting and traffic, its sum
  drawn in law."""

  _SETTING = dict(value_type=tff.to_type([tff.TensorType(np.float32, [6]),
                                          tff.TensorType(np.float32, [2])]),
                  population=1000, clients_per_round=4, rounds=5,
                  delta=1e-4, target_epsilon=4.0, bits=None,
                  grouping='tensor', noise_stddev=0.1, l2_clip=0.3)

  def test_same_calibration_accounting_and_traffic_as_dp_rec(self):
    real = registry.build('dp_rec', **self._SETTING)
    law = registry.build(registry.DP_REC_IN_LAW, **self._SETTING)
    self.assertEqual(law.params, dict(real.params, simulation='in_law'))
    for field in ('private', 'sampling', 'upload_bits_per_client',
                  'download_bits_per_client', 'accounting', 'local_epsilon'):
      self.assertEqual(getattr(law, field), getattr(real, field), field)
    self.assertEqual(law.epsilon_after(5), real.epsilon_after(5))
    self.assertIsInstance(law.rec_sum, dp_rec_in_law.DpRecInLawSumFactory)
    spec = registry.get(registry.DP_REC_IN_LAW)
    self.assertTrue(spec.in_law)
    self.assertEqual(registry.protocol(registry.DP_REC_IN_LAW), 'dp_rec')

  def test_a_fixed_clip_ratio_applies_to_it(self):
    config = config_lib.RunConfig(task='stackoverflow_lr',
                                  aggregators=(registry.DP_REC_IN_LAW,),
                                  clip_ratio=1.5)
    self.assertEqual(config.clip_ratio, 1.5)
    with self.assertRaisesRegex(ValueError, 'clip_ratio=1.5 applies to dp_rec'):
      config_lib.RunConfig(task='stackoverflow_lr', aggregators=('fedavg',),
                           clip_ratio=1.5)



class RecTest(tf.test.TestCase):
  """`rec` and `dp_rec`: the same wire, private only with the clip."""

  _SETTING = dict(InLawTest._SETTING, bits=5)

  def test_compression_only_has_its_own_factory(self):
    aggregator = registry.build('rec', **self._SETTING)
    self.assertFalse(aggregator.private)
    self.assertIsInstance(aggregator.rec_sum,
                          rec_compression.RecCompressionSumFactory)
    self.assertNotIsInstance(aggregator.rec_sum, dp_rec.DpRecSumFactory)
    self.assertIsNone(aggregator.epsilon_after)

  def test_dp_rec_is_the_private_factory_with_the_calibrated_clip(self):
    aggregator = registry.build('dp_rec', **self._SETTING)
    self.assertIsInstance(aggregator.rec_sum, dp_rec.DpRecSumFactory)
    self.assertEqual(aggregator.rec_sum.clip_ratio,
                     aggregator.params['clip_ratio'])
    self.assertEqual(aggregator.upload_bits_per_client,
                     registry.build('rec', **self._SETTING)
                     .upload_bits_per_client)


if __name__ == '__main__':
  tf.test.main()
