"""Tests for tff_dprec.learning."""

import collections
import re
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import accounting
from tff_dprec import history
from tff_dprec import learning
from tff_dprec import process_check
from tff_dprec import simulation
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import dp_rec_mean
from tff_dprec.plan import search as plan_search

_INPUT_SPEC = (tf.TensorSpec([None, 3], tf.float32),
               tf.TensorSpec([None, 1], tf.float32))


def _model_fn():
  # Four trainable tensors: kernels (3, 4) and (4, 1), biases (4,) and (1,).
  keras_model = tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(3,)),
      tf.keras.layers.Dense(4, activation='relu'),
      tf.keras.layers.Dense(1)])
  return tff.learning.models.from_keras_model(
      keras_model, input_spec=_INPUT_SPEC,
      loss=tf.keras.losses.MeanSquaredError())


def _client_data(seed):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(8, 3)).astype(np.float32)
  y = x.sum(axis=1, keepdims=True)
  return tf.data.Dataset.from_tensor_slices((x, y)).batch(4)


def _sgd():
  return tff.learning.optimizers.build_sgdm(0.1)


class AggregatorTest(tf.test.TestCase, parameterized.TestCase):
  """Construction, types and accounting: no round is run."""

  def test_repr_shows_the_settings(self):
    self.assertEqual(
        repr(learning.dp_rec_aggregator(0.1, 0.2, bits=4)),
        "DpRecMeanFactory(DpRecSumFactory(noise_stddev=0.1, l2_clip=0.2, "
        "bits=4, grouping='tensor'))")

  def test_is_an_unweighted_mean_over_the_dp_rec_sum(self):
    aggregator = learning.dp_rec_aggregator(0.1, 0.3, bits=5, grouping=2)
    self.assertIsInstance(aggregator, tff.aggregators.UnweightedMeanFactory)
    self.assertIsInstance(aggregator.sum_factory, dp_rec.DpRecSumFactory)
    self.assertEqual(aggregator.sum_factory.bits, 5)
    self.assertEqual(aggregator.sum_factory.grouping, 2)
    self.assertAlmostEqual(aggregator.sum_factory.clip_ratio, 3.0)

  @parameterized.named_parameters(
      ('tensor', 'tensor', 4), ('network', 'network', 1),
      # 12 + 4 + 4 + 1 elements in groups of at most 3: 4 + 2 + 2 + 1.
      ('int', 3, 9))
  def test_layout_counts_the_models_groups(self, grouping, num_groups):
    aggregator = learning.dp_rec_aggregator(0.1, 0.2, bits=6,
                                            grouping=grouping)
    layout = aggregator.layout(_model_fn)
    self.assertEqual(layout.num_groups, num_groups)
    self.assertEqual(layout.message_bits, 64 + 6 * num_groups)
    trainable = tff.learning.models.weights_type_from_model(
        _model_fn).trainable
    self.assertEqual(aggregator.layout(trainable), layout)
    self.assertEqual(
        learning.message_layout(_model_fn, bits=6, grouping=grouping),
        layout)
    self.assertEqual(aggregator.sum_factory.num_groups(trainable),
                     num_groups)

  def test_dp_event_and_epsilon_in_one_call(self):
    aggregator = learning.dp_rec_aggregator(0.05, 0.06, bits=4)
    layout = aggregator.layout(_model_fn)
    self.assertEqual(
        aggregator.dp_event(_model_fn),
        accounting.DpRecEvent(clip_ratio=1.2, bits=4, num_groups=4))
    common = dict(population=1000, clients_per_round=10, rounds=20,
                  delta=1e-5)
    self.assertEqual(
        aggregator.epsilon(_model_fn, **common),
        accounting.dp_rec_epsilon(clip_ratio=0.06 / 0.05, bits=layout.bits,
                                  num_groups=layout.num_groups, **common))

  def test_the_clip_is_required(self):
    with self.assertRaisesRegex(TypeError,
                                'l2_clip.*None.*rec_compression_aggregator'):
      learning.dp_rec_aggregator(0.05, None)
    with self.assertRaisesRegex(ValueError, 'l2_clip must be positive'):
      learning.dp_rec_aggregator(0.05, 0.0)

  def test_compression_only_is_its_own_mean_without_epsilon(self):
    aggregator = learning.rec_compression_aggregator(0.05, bits=4)
    self.assertNotIsInstance(aggregator, dp_rec_mean.DpRecMeanBase)
    self.assertIsInstance(aggregator, tff.aggregators.UnweightedMeanFactory)
    self.assertFalse(hasattr(aggregator, 'epsilon'))
    process = tff.learning.algorithms.build_unweighted_fed_avg(
        _model_fn, client_optimizer_fn=_sgd(), model_aggregator=aggregator,
        metrics_aggregator=learning.no_client_metrics)
    self.assertEqual(
        [u.intrinsic for u in learning.check_process(process).uploads],
        ['federated_aggregate', 'federated_sum'])

  def test_learning_process_types(self):
    process = tff.learning.algorithms.build_unweighted_fed_avg(
        _model_fn, client_optimizer_fn=_sgd(),
        model_aggregator=learning.dp_rec_aggregator(0.1, 0.3, bits=5),
        metrics_aggregator=learning.no_client_metrics)
    metrics = process.next.type_signature.result.metrics.member
    tff.test.assert_types_equivalent(
        metrics.aggregator.mean_value,
        tff.to_type(collections.OrderedDict(
            upload_bits=np.int64, num_messages=np.int32,
            rejected_messages=np.int32)))
    # No client training metric leaves the clients.
    self.assertEmpty(metrics.client_work.train)


class CalibratedAggregatorTest(tf.test.TestCase, parameterized.TestCase):
  """`dp_rec_aggregator_for_epsilon`: one call to a target epsilon."""

  _RUN = dict(population=100, clients_per_round=4, rounds=3)

  def test_meets_the_target_with_the_largest_clip(self):
    aggregator = learning.dp_rec_aggregator_for_epsilon(
        1.0, model=_model_fn, noise_stddev=0.05, delta=1e-5, bits=7,
        **self._RUN)
    self.assertIsInstance(aggregator, dp_rec_mean.DpRecMeanFactory)
    sum_factory = aggregator.sum_factory
    self.assertEqual(sum_factory.bits, 7)
    self.assertEqual(sum_factory.noise_stddev, 0.05)
    c = sum_factory.clip_ratio
    self.assertLessEqual(
        aggregator.epsilon(_model_fn, delta=1e-5, **self._RUN), 1.0)
    # The largest c: a clip 0.1% larger misses the target.
    self.assertGreater(
        accounting.dp_rec_epsilon(clip_ratio=1.001 * c, bits=7,
                                  num_groups=4, delta=1e-5, **self._RUN),
        1.0)

  def test_bits_from_c_and_default_delta(self):
    aggregator = learning.dp_rec_aggregator_for_epsilon(
        1.0, model=_model_fn, noise_stddev=0.05, **self._RUN)
    delta = accounting.default_delta(self._RUN['population'])
    self.assertLessEqual(
        aggregator.epsilon(_model_fn, delta=delta, **self._RUN), 1.0)
    bits, c = aggregator.sum_factory.bits, aggregator.sum_factory.clip_ratio
    # The fewest bits that meet the coding margin: one bit fewer misses it
    # at this c, and so at its own (larger) calibrated c.
    self.assertTrue(plan_search.margin_met(bits, c))
    self.assertFalse(plan_search.margin_met(bits - 1, c))

  def test_other_accounting_and_grouping(self):
    aggregator = learning.dp_rec_aggregator_for_epsilon(
        2.0, model=_model_fn, noise_stddev=0.1, delta=1e-5, bits=5,
        grouping='network', accounting='rdp', **self._RUN)
    self.assertEqual(aggregator.layout(_model_fn).num_groups, 1)
    self.assertLessEqual(
        aggregator.epsilon(_model_fn, delta=1e-5, accounting='rdp',
                           **self._RUN), 2.0)

  @parameterized.named_parameters(
      ('target_zero', dict(target_epsilon=0.0), ValueError,
       r'^target_epsilon must be positive, found 0\.0\.$'),
      ('target_bool', dict(target_epsilon=True), TypeError,
       'target_epsilon must be a number, found True'),
      ('rounds_zero', dict(rounds=0), ValueError,
       'rounds must be positive, found 0'),
      ('population_float', dict(population=100.0), TypeError,
       'population must be an int, found 100.0'),
      ('more_draws_than_clients', dict(clients_per_round=101), ValueError,
       'clients_per_round=101 exceeds population=100'),
      ('noise_zero', dict(noise_stddev=0.0), ValueError,
       'noise_stddev must be positive, found 0.0'),
      ('delta_one', dict(delta=1.0), ValueError,
       r'delta must be in \(0, 1\), found 1\.0'),
      ('bits_zero', dict(bits=0), ValueError, 'bits must be in'),
      ('accounting_unknown', dict(accounting='exact'), ValueError,
       "accounting must be one of .*found 'exact'"),
      ('grouping_unknown', dict(grouping='layer'), ValueError,
       "grouping must be .*found 'layer'"),
      ('record_int', dict(record_messages=1), TypeError,
       'record_messages must be a bool'),
      ('model_of_ints', dict(model=tff.TensorType(np.int32, [3])),
       TypeError, 'float tensors only'),
  )
  def test_bad_arguments_are_refused_before_calibrating(self, override,
                                                         error, regex):
    kwargs = dict(target_epsilon=1.0, model=_model_fn, noise_stddev=0.05,
                  **self._RUN)
    kwargs.update(override)
    with mock.patch.object(accounting, 'calibrate_clip_ratio') as calibrate:
      with self.assertRaisesRegex(error, regex):
        learning.dp_rec_aggregator_for_epsilon(**kwargs)
    calibrate.assert_not_called()

  def test_unreachable_target(self):
    # Two clients, both drawn: even c = 1e-3 costs epsilon 0.09.
    with self.assertRaisesRegex(accounting.TargetUnreachableError,
                                'target'):
      learning.dp_rec_aggregator_for_epsilon(
          0.01, model=_model_fn, population=2, clients_per_round=2,
          rounds=3, noise_stddev=0.05, delta=1e-5, bits=7)


class WeightedUseTest(tf.test.TestCase):
  """Weighted builders fail, saying what to use."""

  def test_weighted_fed_avg_with_the_mean_is_refused_by_tff(self):
    # TFF type-checks the factory before any DP-REC code runs.
    with self.assertRaisesRegex(TypeError, 'WeightedAggregationFactory'):
      tff.learning.algorithms.build_weighted_fed_avg(
          _model_fn, client_optimizer_fn=_sgd(),
          model_aggregator=learning.dp_rec_aggregator(0.1, 1.0))

  def test_fed_sgd_is_refused_saying_what_to_use(self):
    # build_fed_sgd passes a weight type to any model aggregator.
    with self.assertRaisesRegex(
        TypeError, 'weight type.*build_fed_sgd.*build_dp_rec_fed_avg'):
      tff.learning.algorithms.build_fed_sgd(
          _model_fn, model_aggregator=learning.dp_rec_aggregator(0.1, 1.0))

  def test_unweighted_means_around_the_sum_still_work(self):
    value_type = tff.TensorType(np.float32, [3])
    sum_factory = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0)
    tff.aggregators.UnweightedMeanFactory(sum_factory).create(value_type)
    tff.aggregators.as_weighted_aggregator(
        dp_rec_mean.DpRecMeanFactory(sum_factory)).create(
            value_type, tff.TensorType(np.float32))


class BuildDpRecFedAvgTest(tf.test.TestCase, parameterized.TestCase):
  """The owned builder: the DP-REC mean unwrapped, no client metrics."""

  @parameterized.named_parameters(
      ('none', lambda: None),
      ('tff_mean', tff.aggregators.UnweightedMeanFactory),
      ('dp_rec_sum', lambda: dp_rec.DpRecSumFactory(noise_stddev=0.1,
                                                    l2_clip=1.0)),
      ('clipping_around_the_mean', lambda: tff.aggregators.clipping_factory(
          10.0, learning.dp_rec_aggregator(0.1, 1.0))),
      ('weighted_mean_around_the_sum', lambda: tff.aggregators.MeanFactory(
          dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0))),
      ('compression_only', lambda: learning.rec_compression_aggregator(0.1)))
  def test_other_aggregators_are_refused(self, make):
    aggregator = make()
    with self.assertRaisesRegex(
        TypeError, r'^aggregator must be a DP-REC mean factory \(a '
        r'DpRecMeanFactory from tff_dprec.learning.dp_rec_aggregator'
        r'\(\.\.\.\), or a DpRecInLawMeanFactory from '
        r'tff_dprec.simulation.dp_rec_in_law_aggregator\(\.\.\.\)\), '
        rf'unwrapped, found {re.escape(repr(aggregator))}\.$'):
      learning.build_dp_rec_fed_avg(_model_fn, _sgd(), aggregator=aggregator)

  def test_builds_the_safe_process(self):
    process = learning.build_dp_rec_fed_avg(
        _model_fn, _sgd(), tff.learning.optimizers.build_sgdm(1.0),
        aggregator=learning.dp_rec_aggregator(0.1, 0.3, bits=5))
    metrics = process.next.type_signature.result.metrics.member
    self.assertEmpty(metrics.client_work.train)
    tff.test.assert_types_equivalent(
        metrics.aggregator.mean_value,
        tff.to_type(collections.OrderedDict(
            upload_bits=np.int64, num_messages=np.int32,
            rejected_messages=np.int32)))
    report = learning.check_process(process, strict=True)
    self.assertEqual([u.intrinsic for u in report.dp_rec_messages],
                     ['federated_aggregate'])
    self.assertEmpty(report.outside_dp_rec)

  def test_simulation_in_law_is_built_unchecked(self):
    # Its clients send floats by design: a simulation, not a protocol.
    process = learning.build_dp_rec_fed_avg(
        _model_fn, _sgd(),
        aggregator=simulation.dp_rec_in_law_aggregator(0.1, 0.3, bits=5))
    self.assertNotEmpty(learning.check_process(process).outside_dp_rec)

  def test_learning_exports_the_check(self):
    self.assertIs(learning.check_process, process_check.check_process)
    self.assertIs(learning.UploadReport, process_check.UploadReport)
    self.assertIs(learning.ClientUpload, process_check.ClientUpload)
    self.assertIs(learning.ClientDataOutsideDpRecError,
                  process_check.ClientDataOutsideDpRecError)


class HistoryArgumentsTest(tf.test.TestCase):

  def test_start_history_argument_errors(self):
    with self.assertRaisesRegex(TypeError, 'aggregator'):
      learning.start_history(
          None, aggregator=tff.aggregators.UnweightedMeanFactory(),
          model_fn=_model_fn, initial_seed=1)
    with self.assertRaisesRegex(ValueError, 'record_messages=True'):
      learning.start_history(
          None, aggregator=learning.dp_rec_aggregator(0.1, 1.0),
          model_fn=_model_fn, initial_seed=1)

  def test_round_messages_without_messages(self):
    with self.assertRaisesRegex(ValueError, 'record_messages=True'):
      learning.round_messages(collections.OrderedDict(
          aggregator=collections.OrderedDict(
              mean_value=collections.OrderedDict(num_messages=3))))


class ExecutionTest(tf.test.TestCase):
  """Rounds of a learning process with history downlinks."""

  def test_history_downlink_replays_bit_for_bit(self):
    aggregator = learning.dp_rec_aggregator(0.05, 0.2, bits=4,
                                            record_messages=True)
    server_optimizer = tff.learning.optimizers.build_sgdm(1.0)
    process = learning.build_dp_rec_fed_avg(
        _model_fn, _sgd(), server_optimizer, aggregator=aggregator)
    state, server = learning.start_history(
        process, aggregator=aggregator, model_fn=_model_fn, initial_seed=7)
    seeded = history.seeded_model_weights(_model_fn, 7)
    for a, b in zip(process.get_model_weights(state).trainable,
                    seeded.trainable):
      self.assertAllEqual(a, b)
    self.assertEqual(server.initial_seed, 7)
    data = [_client_data(i) for i in range(3)]
    for t in range(2):
      for client in (0, 1):
        server.downlink(client, t)
      output = process.next(state, data[:2])
      state = output.state
      messages = learning.round_messages(output)
      self.assertEqual(messages.shape, (2, 1 + 4))
      server.record_round(t, messages)
    # A first-time client rebuilds the round-2 model from R' and 2 rounds.
    downlink = server.downlink(2, 2)
    self.assertEqual(downlink.kind, history.HISTORY)
    replay = history.ClientReplay(model_fn=_model_fn,
                                  factory=aggregator.sum_factory,
                                  server_optimizer=server_optimizer)
    replayed = replay.receive(None, downlink, server.messages(downlink))
    for a, b in zip(replayed.weights.trainable,
                    process.get_model_weights(state).trainable):
      self.assertEqual(np.asarray(a).tobytes(), np.asarray(b).tobytes())


if __name__ == '__main__':
  tf.test.main()
