"""Tests for tff_dprec.process_check: what a process moves to the server."""

import collections
import functools
import re

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import learning
from tff_dprec import process_check
from tff_dprec import simulation
from tff_dprec.aggregators import dp_rec

_INPUT_SPEC = (tf.TensorSpec([None, 3], tf.float32),
               tf.TensorSpec([None, 1], tf.float32))
_MESSAGE = dp_rec.message_type(2)  # The README model: a kernel and a bias.
_UPDATE = tff.to_type([tff.TensorType(np.float32, [3, 1]),
                       tff.TensorType(np.float32, [1])])
_COUNT = tff.TensorType(np.int32)
_METRICS = tff.to_type(collections.OrderedDict(
    loss=[np.float32, np.float32], num_examples=[np.int64],
    num_batches=[np.int64]))


def _model_fn():
  # The README's model.
  keras_model = tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(3,)),
      tf.keras.layers.Dense(1)])
  return tff.learning.models.from_keras_model(
      keras_model, loss=tf.keras.losses.MeanSquaredError(),
      input_spec=_INPUT_SPEC)


def _sgd(learning_rate=0.1):
  return tff.learning.optimizers.build_sgdm(learning_rate)


@functools.lru_cache(maxsize=None)
def _readme_process():
  """The README's pipeline: the DP-REC mean, no client metrics."""
  return tff.learning.algorithms.build_unweighted_fed_avg(
      _model_fn, client_optimizer_fn=_sgd(), server_optimizer_fn=_sgd(1.0),
      model_aggregator=learning.dp_rec_aggregator(
          noise_stddev=0.05, l2_clip=0.06, bits=7),
      metrics_aggregator=learning.no_client_metrics)


@functools.lru_cache(maxsize=None)
def _client_metrics_process():
  """The README's pipeline without `metrics_aggregator`: TFF's default."""
  return tff.learning.algorithms.build_unweighted_fed_avg(
      _model_fn, client_optimizer_fn=_sgd(), server_optimizer_fn=_sgd(1.0),
      model_aggregator=learning.dp_rec_aggregator(
          noise_stddev=0.05, l2_clip=0.06, bits=7))


def _upload(intrinsic, value_type, *, message=False, client_data=True):
  return process_check.ClientUpload(
      intrinsic=intrinsic, value_type=value_type, is_dp_rec_message=message,
      from_client_data=client_data)


_DP_REC_MESSAGE = _upload('federated_aggregate', _MESSAGE, message=True)
# UnweightedMeanFactory sums a 1 from each client: the count of messages.
_MESSAGE_COUNT = _upload('federated_sum', _COUNT, client_data=False)


def _assert_uploads(test, report, expected):
  test.assertLen(report.uploads, len(expected))
  for upload, want in zip(report.uploads, expected):
    test.assertEqual(
        (upload.intrinsic, upload.is_dp_rec_message, upload.from_client_data),
        (want.intrinsic, want.is_dp_rec_message, want.from_client_data))
    tff.test.assert_types_equivalent(upload.value_type, want.value_type)


class ArgumentsTest(tf.test.TestCase, parameterized.TestCase):
  """Argument errors: nothing is built."""

  @parameterized.named_parameters(
      ('none', None), ('factory', learning.dp_rec_aggregator(0.1, 1.0)),
      ('python_function', lambda state, data: state))
  def test_not_a_process_is_refused(self, value):
    with self.assertRaisesRegex(
        TypeError, r'process must be a tff.templates.IterativeProcess.*'
        f'found {re.escape(repr(value))}'):
      process_check.check_process(value)

  def test_strict_must_be_a_bool(self):
    with self.assertRaisesRegex(TypeError, "strict must be a bool, found 'y'"):
      process_check.check_process(None, strict='y')


class LearningProcessTest(tf.test.TestCase):
  """The processes of `tff.learning` builders, read as built."""

  def test_readme_pipeline_sends_only_dp_rec_messages(self):
    report = process_check.check_process(_readme_process(), strict=True)
    _assert_uploads(self, report, [_DP_REC_MESSAGE, _MESSAGE_COUNT])
    self.assertTrue(report.only_dp_rec_messages)
    self.assertEmpty(report.outside_dp_rec)
    self.assertLen(report.dp_rec_messages, 1)
    self.assertEqual(
        str(report),
        '2 value(s) move from the clients to the server each round:\n'
        '  federated_aggregate of <seed=int64,indices=int32[2]>: DP-REC '
        'message\n'
        '  federated_sum of int32: no client data')

  def test_the_next_computation_is_read_as_its_process(self):
    process = _readme_process()
    self.assertEqual(process_check.check_process(process.next),
                     process_check.check_process(process))

  def test_client_metrics_are_reported(self):
    report = process_check.check_process(_client_metrics_process())
    metrics = _upload('federated_sum', _METRICS)
    _assert_uploads(self, report, [metrics, _DP_REC_MESSAGE, _MESSAGE_COUNT])
    self.assertFalse(report.only_dp_rec_messages)
    self.assertEqual(report.outside_dp_rec, report.uploads[:1])
    self.assertIn('num_examples=<int64>', str(report))
    self.assertIn('client data OUTSIDE DP-REC', str(report))

  def test_strict_mode_refuses_client_metrics(self):
    with self.assertRaisesRegex(
        process_check.ClientDataOutsideDpRecError,
        r'sends 1 value\(s\) of client data to the server outside DP-REC '
        r'messages.*federated_sum of <loss=<float32,float32>.*'
        'metrics_aggregator=tff_dprec.learning.no_client_metrics'):
      process_check.check_process(_client_metrics_process(), strict=True)

  def test_weighted_mean_around_the_sum_reports_the_weights(self):
    process = tff.learning.algorithms.build_weighted_fed_avg(
        _model_fn, client_optimizer_fn=_sgd(),
        model_aggregator=tff.aggregators.MeanFactory(
            dp_rec.DpRecSumFactory(noise_stddev=0.05, l2_clip=0.06)),
        metrics_aggregator=learning.no_client_metrics)
    report = process_check.check_process(process)
    weights = _upload('federated_sum', tff.TensorType(np.float32))
    _assert_uploads(self, report, [_DP_REC_MESSAGE, weights])

  def test_clipping_around_the_mean_reports_its_count(self):
    process = tff.learning.algorithms.build_unweighted_fed_avg(
        _model_fn, client_optimizer_fn=_sgd(),
        model_aggregator=tff.aggregators.clipping_factory(
            10.0, learning.dp_rec_aggregator(0.05, 0.06)),
        metrics_aggregator=learning.no_client_metrics)
    report = process_check.check_process(process)
    clipped_count = _upload('federated_sum', _COUNT)
    _assert_uploads(self, report,
                    [_DP_REC_MESSAGE, _MESSAGE_COUNT, clipped_count])

  def test_simulation_in_law_sends_floats(self):
    process = tff.learning.algorithms.build_unweighted_fed_avg(
        _model_fn, client_optimizer_fn=_sgd(),
        model_aggregator=simulation.dp_rec_in_law_aggregator(0.05, 0.06),
        metrics_aggregator=learning.no_client_metrics)
    report = process_check.check_process(process)
    self.assertEmpty(report.dp_rec_messages)
    tff.test.assert_types_equivalent(report.outside_dp_rec[0].value_type,
                                     _UPDATE)


class FederatedComputationTest(tf.test.TestCase):
  """Hand-written computations: each intrinsic, and what it is given."""

  def test_every_kind_of_upload_is_found(self):
    data_type = tff.FederatedType(np.int32, tff.CLIENTS)
    server_type = tff.FederatedType(np.int32, tff.SERVER)

    @tff.federated_computation(server_type, data_type)
    def comp(server_value, client_value):
      as_float = tff.federated_map(
          tff.tensorflow.computation(lambda x: tf.cast(x, tf.float32),
                                     np.int32), client_value)
      return (tff.federated_secure_sum_bitwidth(client_value, 8),
              tff.federated_mean(as_float),
              tff.federated_max(client_value),
              tff.federated_sum(tff.federated_broadcast(server_value)))

    report = process_check.check_process(comp)
    float_type = tff.TensorType(np.float32)
    _assert_uploads(self, report, [
        _upload('federated_secure_sum_bitwidth', _COUNT),
        _upload('federated_mean', float_type),
        _upload('federated_max', _COUNT),
        _upload('federated_sum', _COUNT, client_data=False)])

  def test_a_message_type_counts_whatever_computes_it(self):
    # The check judges types: a seed and indices made up on the server and
    # broadcast are a DP-REC message too.
    message = tff.FederatedType(_MESSAGE, tff.SERVER)

    @tff.federated_computation(message)
    def comp(server_message):
      return tff.federated_aggregate(
          tff.federated_broadcast(server_message), np.int32(0),
          tff.tensorflow.computation(lambda a, m: a + 1, np.int32, _MESSAGE),
          tff.tensorflow.computation(lambda a, b: a + b, np.int32, np.int32),
          tff.tensorflow.computation(lambda a: a, np.int32))

    report = process_check.check_process(comp)
    _assert_uploads(self, report, [_upload(
        'federated_aggregate', _MESSAGE, message=True, client_data=False)])


if __name__ == '__main__':
  tf.test.main()
