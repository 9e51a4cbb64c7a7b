"""Tests for tff_dprec.aggregators.rec_compression."""

# The client encoder is private to the factory; a test calls it directly.
# pylint: disable=protected-access

import collections

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import support
from tff_dprec import learning
from tff_dprec import message as message_lib
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import rec_compression

_STRUCT = tff.to_type(
    collections.OrderedDict(
        a=tff.TensorType(np.float32, [3]),
        b=tff.TensorType(np.float32, [2, 2])))


class ConstructionTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ('stddev_zero', dict(noise_stddev=0.0), ValueError, 'noise_stddev'),
      ('stddev_bool', dict(noise_stddev=True), TypeError, 'noise_stddev'),
      ('bits_zero', dict(bits=0), ValueError, 'bits'),
      ('grouping_unknown', dict(grouping='layer'), ValueError, 'grouping'),
      ('chunk_zero', dict(chunk_elements=0), ValueError, 'chunk_elements'),
      ('record_int', dict(record_messages=1), TypeError, 'record_messages'),
      ('test_seed_float', dict(insecure_test_seed=1.0), TypeError,
       'insecure_test_seed'),
      # Compression only has no clip to set.
      ('clip', dict(l2_clip=1.0), TypeError, 'l2_clip'),
  )
  def test_rejects(self, override, error, name):
    kwargs = dict(noise_stddev=0.1, bits=7)
    kwargs.update(override)
    with self.assertRaisesRegex(error, name):
      rec_compression.RecCompressionSumFactory(**kwargs)

  def test_is_not_private(self):
    factory = rec_compression.RecCompressionSumFactory(noise_stddev=0.1,
                                                       bits=5)
    self.assertNotIsInstance(factory, dp_rec.DpRecSumFactory)
    for private_only in ('l2_clip', 'clip_ratio', 'dp_event'):
      self.assertFalse(hasattr(factory, private_only), private_only)
    self.assertEqual(
        repr(factory),
        "RecCompressionSumFactory(noise_stddev=0.1, bits=5, "
        "grouping='tensor')")

  def test_sends_dp_rec_messages(self):
    factory = rec_compression.RecCompressionSumFactory(noise_stddev=0.1,
                                                       bits=6)
    process = factory.create(_STRUCT)
    (uri, moved), = support.clients_to_server_value_types(process.next)
    self.assertEqual(uri, 'federated_aggregate')
    tff.test.assert_types_equivalent(
        moved.member, dp_rec.message_type(factory.num_groups(_STRUCT)))
    self.assertEqual(factory.message_bits(_STRUCT), 64 + 2 * 6)

  def test_weighted_call_is_refused(self):
    factory = rec_compression.RecCompressionSumFactory(noise_stddev=0.1)
    with self.assertRaisesRegex(TypeError, 'weight type'):
      factory.create(_STRUCT, tff.TensorType(np.float32))

  def test_learning_mean_is_tffs_unweighted_mean(self):
    aggregator = learning.rec_compression_aggregator(0.1, bits=5)
    self.assertIsInstance(aggregator, tff.aggregators.UnweightedMeanFactory)
    self.assertFalse(hasattr(aggregator, 'epsilon'))
    process = aggregator.create(_STRUCT)
    moved = support.clients_to_server_value_types(process.next)
    for _, value_type in moved:
      for dtype in support.tensor_dtypes(value_type.member):
        self.assertTrue(np.issubdtype(dtype, np.integer), msg=str(value_type))


class ExecutionTest(tf.test.TestCase):

  def test_encodes_the_update_unclipped(self):
    # Far outside any clip: the message is that of the whole update.
    value = collections.OrderedDict(a=np.array([30.0, -10.0, 20.0],
                                               np.float32),
                                    b=np.full([2, 2], 5.0, np.float32))
    factory = rec_compression.RecCompressionSumFactory(
        noise_stddev=0.1, bits=8, insecure_test_seed=3)
    layout = factory.layout(_STRUCT)
    sent = factory._client_encoder(_STRUCT)(value)
    unclipped = message_lib.encode_update(
        value, layout, noise_stddev=0.1, l2_clip=None, insecure_test_seed=3)
    clipped = dp_rec.DpRecSumFactory(
        noise_stddev=0.1, l2_clip=1.0, bits=8,
        insecure_test_seed=3)._client_encoder(_STRUCT)(value)
    self.assertEqual(sent['seed'], unclipped['seed'])
    self.assertAllEqual(sent['indices'], unclipped['indices'])
    self.assertNotEqual(sent['seed'], clipped['seed'])

  def test_fed_avg_lowers_training_loss(self):
    rng = np.random.default_rng(0)
    w_true = rng.normal(size=(5, 1)).astype(np.float32)

    def client_data(seed):
      r = np.random.default_rng(seed)
      x = r.normal(size=(64, 5)).astype(np.float32)
      y = x @ w_true + 0.01 * r.normal(size=(64, 1)).astype(np.float32)
      return tf.data.Dataset.from_tensor_slices((x, y)).batch(16)

    data = [client_data(i) for i in range(4)]

    def model_fn():
      keras_model = tf.keras.Sequential(
          [tf.keras.layers.Dense(1, input_shape=(5,),
                                 kernel_initializer='zeros')])
      return tff.learning.models.from_keras_model(
          keras_model, input_spec=data[0].element_spec,
          loss=tf.keras.losses.MeanSquaredError())

    process = tff.learning.algorithms.build_unweighted_fed_avg(
        model_fn,
        client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.05),
        server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0),
        model_aggregator=learning.rec_compression_aggregator(0.02, bits=7))
    state = process.initialize()
    losses = []
    for _ in range(12):
      output = process.next(state, data)
      state = output.state
      losses.append(
          output.metrics['client_work']['train']['loss'])
    self.assertLess(losses[-1], 0.3 * losses[0])


if __name__ == '__main__':
  tf.test.main()
