"""Tests for tff_dprec.aggregators.dp_rec_mean."""

import collections
import re

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import learning
from tff_dprec import message
from tff_dprec import simulation
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import dp_rec_in_law
from tff_dprec.aggregators import dp_rec_mean
from tff_dprec.aggregators import rec_compression

_STRUCT = tff.to_type(collections.OrderedDict(
    a=tff.TensorType(np.float32, [3]),
    b=tff.TensorType(np.float32, [2])))


def _model_fn():
  keras_model = tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(3,)),
      tf.keras.layers.Dense(2)])
  return tff.learning.models.from_keras_model(
      keras_model, loss=tf.keras.losses.MeanSquaredError(),
      input_spec=(tf.TensorSpec([None, 3], tf.float32),
                  tf.TensorSpec([None, 2], tf.float32)))


class ConstructionTest(tf.test.TestCase):

  def test_public_import_path(self):
    # pylint: disable=g-import-not-at-top
    from tff_dprec.aggregators import DpRecMeanFactory
    from tff_dprec import aggregators
    # pylint: enable=g-import-not-at-top
    self.assertIs(DpRecMeanFactory, dp_rec_mean.DpRecMeanFactory)
    self.assertIn('DpRecMeanFactory', aggregators.__all__)
    self.assertIsInstance(learning.dp_rec_aggregator(0.1, 0.2),
                          DpRecMeanFactory)
    # The simulation's mean is a type of its own.
    self.assertNotIsInstance(simulation.dp_rec_in_law_aggregator(0.1, 0.2),
                             DpRecMeanFactory)

  def test_package_exports_exist(self):
    # pylint: disable=g-import-not-at-top
    from tff_dprec import aggregators
    # pylint: enable=g-import-not-at-top
    for name in aggregators.__all__:
      self.assertTrue(hasattr(aggregators, name), name)

  def test_takes_the_dp_rec_sum_only(self):
    sum_factory = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=0.2)
    mean = dp_rec_mean.DpRecMeanFactory(sum_factory)
    self.assertIs(mean.sum_factory, sum_factory)
    self.assertIsInstance(mean, tff.aggregators.UnweightedMeanFactory)
    for other in (
        tff.aggregators.SumFactory(),
        rec_compression.RecCompressionSumFactory(noise_stddev=0.1),
        dp_rec_in_law.DpRecInLawSumFactory(noise_stddev=0.1, l2_clip=0.2)):
      with self.assertRaisesRegex(
          TypeError, rf'^sum_factory must be a DpRecSumFactory, found '
          rf'{re.escape(repr(other))}\.$'):
        dp_rec_mean.DpRecMeanFactory(other)

  def test_the_base_is_not_used_directly(self):
    with self.assertRaisesRegex(TypeError, 'not used directly'):
      dp_rec_mean.DpRecMeanBase(
          dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=0.2))

  def test_update_type_of_a_model_is_its_trainable_weights(self):
    update = dp_rec_mean.update_type(_model_fn)
    tff.test.assert_types_equivalent(
        update, tff.learning.models.weights_type_from_model(
            _model_fn).trainable)
    self.assertIs(dp_rec_mean.update_type(_STRUCT), _STRUCT)

  def test_layout_from_a_model_or_its_type(self):
    mean = dp_rec_mean.DpRecMeanFactory(
        dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=0.2, bits=6))
    layout = mean.layout(_model_fn)
    self.assertEqual(layout.num_groups, 2)  # Kernel and bias.
    self.assertEqual(layout.message_bits, 64 + 2 * 6)
    self.assertEqual(mean.layout(dp_rec_mean.update_type(_model_fn)), layout)


class ExecutionTest(tf.test.TestCase):

  def test_result_is_the_mean_of_the_decoded_messages(self):
    mean = dp_rec_mean.DpRecMeanFactory(dp_rec.DpRecSumFactory(
        noise_stddev=0.5, l2_clip=1.0, bits=4, record_messages=True))
    process = mean.create(_STRUCT)
    values = [collections.OrderedDict(a=np.full(3, v, np.float32),
                                      b=np.full(2, -v, np.float32))
              for v in (0.1, 0.2, 0.6)]
    output = process.next(process.initialize(), values)
    measurements = output.measurements
    self.assertEqual(measurements['mean_value']['upload_bits'],
                     3 * (64 + 2 * 4))
    layout = mean.layout(_STRUCT)
    decoded = [message.decode_message(row[0], row[1:].astype(np.int32),
                                      layout, noise_stddev=0.5)
               for row in measurements['mean_value']['messages']]
    self.assertLen(decoded, 3)
    for key in ('a', 'b'):
      expected = sum(d[key].numpy() for d in decoded) / 3
      self.assertAllClose(output.result[key], expected, rtol=1e-6,
                          atol=1e-6)


if __name__ == '__main__':
  tf.test.main()
