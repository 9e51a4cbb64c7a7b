"""`<method>_no_noise` control rows: the method's clip and sampling, no noise.
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.data import stackoverflow_data
from experiments.data import tasks
from experiments.runner import aggregator_builders
from experiments.runner import config as config_lib
from experiments.runner import registry
from experiments.runner import seed_run
from experiments.runner import run_setup
from tff_dprec.plan import search as plan_search

_SETTING = dict(value_type=tff.to_type([tff.TensorType(np.float32, [3])]),
                population=1000, clients_per_round=4, rounds=5, delta=1e-4,
                target_epsilon=4.0, bits=4, grouping='network',
                noise_stddev=0.1, l2_clip=0.3)


class ControlPlanTest(tf.test.TestCase):

  def test_controls_take_the_methods_clip_and_sampling(self):
    for base in ('dp_rec', 'dp_fedavg', 'ddgauss16'):
      method = registry.build(base, **_SETTING)
      control = registry.build(base + registry.NO_NOISE_SUFFIX, **_SETTING)
      self.assertEqual(control.params['l2_clip'], method.params['l2_clip'])
      self.assertEqual(control.sampling, method.sampling)
      self.assertFalse(control.private)
      self.assertTrue(control.private_setting)
      self.assertEqual(control.control_of, base)
      self.assertIsNone(control.epsilon_after)
    # DP-REC's clip is c * sigma, with its calibrated c.
    dp_rec = registry.build('dp_rec', **_SETTING)
    self.assertAllClose(
        registry.build('dp_rec_no_noise', **_SETTING).params['l2_clip'],
        dp_rec.params['clip_ratio'] * _SETTING['noise_stddev'])

  def test_control_averages_clipped_updates_exactly(self):
    control = registry.build('dp_fedavg_no_noise', **_SETTING)
    process = control.factory.create(_SETTING['value_type'])
    values = [[np.array([3.0, 4.0, 0.0], np.float32)],  # norm 5: clipped
              [np.array([0.1, 0.0, 0.2], np.float32)]]  # within the clip
    output = process.next(process.initialize(), values)
    clip = _SETTING['l2_clip']
    expected = (values[0][0] * clip / 5.0 + values[1][0]) / 4  # Denominator B.
    self.assertAllClose(output.result[0], expected, rtol=1e-6)

  def test_controls_train_with_the_private_optimizer(self):
    data_dir = self.create_tempdir().full_path
    tiny = dict(seed=1, train_clients=8, heldout_clients=2, test_clients=2,
                num_words=200, num_tags=20, num_topics=4, mean_examples=8.0,
                std_examples=10.0, max_examples=50)
    stackoverflow_data.generate(data_dir, tiny)
    task = tasks.create_task('stackoverflow_lr', data_dir,
                             embedded_config=tiny, population='stored')
    d = task.defaults
    for name, lr in (('dp_fedavg_no_noise', d.private_server_lr),
                     ('dp_fedavg', d.private_server_lr),
                     ('fedavg', d.server_lr)):
      config = config_lib.RunConfig(
          task='stackoverflow_lr', aggregators=(name,), bits=4, rounds=2,
          clients_per_round=4, target_epsilon=8.0).resolved(task)
      aggregator = run_setup.calibrated_aggregator(task, config, name,
                                             record_messages=False)
      lines = []
      built = seed_run.build_aggregator(task, config, aggregator, None,  # pylint: disable=protected-access
                                         lines.append)
      self.assertEqual(built.server_lr, lr, msg=name)
      optimizer = (d.server_optimizer if name == 'fedavg' else
                   d.private_server_optimizer)
      self.assertIn(f'server optimizer {optimizer}', lines[-1], msg=name)

  def test_auto_bits_is_the_smallest_with_the_margin(self):
    asked = []

    def calibrate_c(bits):  # Falls with bits, as calibrations do.
      asked.append(bits)
      return 3.0 - 0.2 * bits

    bits, c, met = plan_search.auto_bits(calibrate_c)
    self.assertTrue(met)
    margin = plan_search.REC_MARGIN_NATS
    self.assertGreaterEqual(bits * np.log(2), c * c / 2 + margin)
    smaller = bits - 1
    self.assertLess(smaller * np.log(2),
                    calibrate_c(smaller) ** 2 / 2 + margin)
    self.assertEqual(asked[0], int(np.ceil(margin / np.log(2))))
    # Capped: a c too large for any allowed bits gets the cap, flagged.
    self.assertEqual(plan_search.auto_bits(lambda b: 10.0),
                     (plan_search.MAX_AUTO_BITS, 10.0, False))

    # Bit widths the calibration refuses are skipped; all refused: raised.
    def refuses_few_bits(bits):
      if bits < 6:
        raise ValueError(f'unreachable at {bits} bits')
      return 1.0

    self.assertEqual(plan_search.auto_bits(refuses_few_bits), (6, 1.0, True))
    with self.assertRaisesRegex(
        ValueError, f'unreachable at {plan_search.MAX_AUTO_BITS - 10} bits'):
      plan_search.auto_bits(lambda b: refuses_few_bits(b - 10))

  def test_fixed_clip_ratio_takes_its_bits_from_it(self):
    aggregator = registry.build('dp_rec', **dict(
        _SETTING, bits=None, clip_ratio=0.5, target_epsilon=50.0))
    # c = 0.5: 0.125 + 2 nats: 3 bits (2.08 nats) fall short, 4 suffice.
    self.assertEqual(aggregator.params['bits'], 4)
    self.assertTrue(aggregator.params['bits_from_c'])
    self.assertEqual(
        registry.build('rec', **dict(_SETTING, bits=None)).params['bits'],
        aggregator_builders.PAPER_BITS)

  def test_dp_rec_plan_picks_bits_from_c(self):
    aggregator = registry.build('dp_rec', **dict(_SETTING, bits=None))
    c, bits = aggregator.params['clip_ratio'], aggregator.params['bits']
    self.assertTrue(aggregator.params['bits_from_c'])
    self.assertGreaterEqual(bits * np.log(2),
                            c * c / 2 + plan_search.REC_MARGIN_NATS)
    self.assertEqual(aggregator.upload_bits_per_client,
                     registry.build('dp_rec', **dict(_SETTING, bits=bits))
                     .upload_bits_per_client)

  def test_registry_and_errors(self):
    # Every private protocol has its control (a simulation in law shares
    # the control of the protocol it simulates).
    for base in {registry.protocol(n) for n in registry.private_names()}:
      self.assertIn(base + registry.NO_NOISE_SUFFIX, registry.names())
      self.assertEqual(
          registry.control_of(base + registry.NO_NOISE_SUFFIX), base)
    self.assertIsNone(registry.control_of('dp_rec'))
    with self.assertRaisesRegex(ValueError, "unknown 'dp_rec_no_nois'"):
      config_lib.RunConfig(task='stackoverflow_lr',
                           aggregators=('dp_rec_no_nois',))
    # DP-REC's fixed clip ratio applies to its control too.
    config_lib.RunConfig(task='stackoverflow_lr',
                         aggregators=('dp_rec_no_noise',), clip_ratio=1.0)


if __name__ == '__main__':
  tf.test.main()
