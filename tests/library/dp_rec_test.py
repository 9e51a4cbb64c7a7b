"""Tests for tff_dprec.aggregators.dp_rec."""

# The client encoder and the server's message aggregator are private to the
# factory; these tests call them directly.
# pylint: disable=protected-access

import collections
import math

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import support
from tff_dprec import accounting
from tff_dprec import learning
from tff_dprec import message as message_lib
from tff_dprec import rec
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import rec_compression

_STRUCT = tff.to_type(
    collections.OrderedDict(
        a=tff.TensorType(np.float32, [3]),
        b=tff.TensorType(np.float32, [2, 2])))
_VECTOR = tff.TensorType(np.float32, [4])
class ConstructionTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ('stddev_zero', dict(noise_stddev=0.0), ValueError, 'noise_stddev'),
      ('stddev_negative', dict(noise_stddev=-1.0), ValueError,
       'noise_stddev'),
      ('stddev_nan', dict(noise_stddev=float('nan')), ValueError,
       'noise_stddev'),
      ('stddev_str', dict(noise_stddev='0.1'), TypeError, 'noise_stddev'),
      ('stddev_bool', dict(noise_stddev=True), TypeError, 'noise_stddev'),
      ('clip_none', dict(l2_clip=None), TypeError, 'l2_clip'),
      ('clip_zero', dict(l2_clip=0.0), ValueError, 'l2_clip'),
      ('clip_negative', dict(l2_clip=-0.5), ValueError, 'l2_clip'),
      ('clip_inf', dict(l2_clip=float('inf')), ValueError, 'l2_clip'),
      ('bits_zero', dict(bits=0), ValueError, 'bits'),
      ('bits_too_many', dict(bits=25), ValueError, 'bits'),
      ('bits_float', dict(bits=7.5), TypeError, 'bits'),
      ('grouping_unknown', dict(grouping='layer'), ValueError, 'grouping'),
      ('grouping_zero', dict(grouping=0), ValueError, 'grouping'),
      ('grouping_huge', dict(grouping=2**30), ValueError, 'grouping'),
      ('chunk_zero', dict(chunk_elements=0), ValueError, 'chunk_elements'),
  )
  def test_rejects(self, override, error, name):
    kwargs = dict(noise_stddev=0.1, l2_clip=1.0, bits=7)
    kwargs.update(override)
    with self.assertRaisesRegex(error, name):
      dp_rec.DpRecSumFactory(**kwargs)

  def test_error_shows_value(self):
    with self.assertRaisesRegex(ValueError, r'-2\.5'):
      dp_rec.DpRecSumFactory(noise_stddev=-2.5, l2_clip=1.0)

  def test_accepts_numpy_scalars(self):
    factory = dp_rec.DpRecSumFactory(
        noise_stddev=np.float32(0.1), l2_clip=np.float64(1.0), bits=np.int64(5))
    self.assertEqual(factory.bits, 5)

  @parameterized.named_parameters(
      ('int', tff.TensorType(np.int32, [3])),
      ('mixed', tff.to_type([tff.TensorType(np.float32, [2]),
                             tff.TensorType(np.int64, [2])])),
      ('federated', tff.FederatedType(_VECTOR, tff.CLIENTS)),
      ('sequence', tff.SequenceType(_VECTOR)),
  )
  def test_create_rejects_value_type(self, value_type):
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0)
    with self.assertRaises(TypeError):
      factory.create(value_type)

  def test_create_rejects_group_over_memory_budget(self):
    big = tff.TensorType(np.float32, [2**27 + 1])
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0,
                                     grouping='network')
    with self.assertRaisesRegex(ValueError, 'memory budget'):
      factory.create(big)

  def test_type_signatures(self):
    process = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0,
                                     bits=6).create(_STRUCT)
    tff.test.assert_types_equivalent(
        process.initialize.type_signature,
        tff.FunctionType(None, tff.FederatedType((), tff.SERVER)))
    measurements = collections.OrderedDict(
        upload_bits=np.int64, num_messages=np.int32,
        rejected_messages=np.int32)
    tff.test.assert_types_equivalent(
        process.next.type_signature,
        tff.FunctionType(
            collections.OrderedDict(
                state=tff.FederatedType((), tff.SERVER),
                value=tff.FederatedType(_STRUCT, tff.CLIENTS)),
            tff.templates.MeasuredProcessOutput(
                state=tff.FederatedType((), tff.SERVER),
                result=tff.FederatedType(_STRUCT, tff.SERVER),
                measurements=tff.FederatedType(measurements, tff.SERVER))))

  @parameterized.named_parameters(('decode_on_arrival', False),
                                  ('recorded_messages', True))
  def test_only_integer_messages_cross_to_the_server(self, record_messages):
    process = dp_rec.DpRecSumFactory(
        noise_stddev=0.1, l2_clip=1.0, bits=6,
        record_messages=record_messages).create(_STRUCT)
    moved = support.clients_to_server_value_types(process.next)
    self.assertLen(moved, 1)
    uri, value_type = moved[0]
    self.assertEqual(uri, 'federated_aggregate')
    self.assertEqual(value_type.placement, tff.CLIENTS)
    self.assertEqual(support.tensor_dtypes(value_type.member),
                     [np.dtype(np.int64), np.dtype(np.int32)])

  @parameterized.named_parameters(('decode_on_arrival', False),
                                  ('recorded_messages', True))
  def test_mean_factory_moves_only_integers(self, record_messages):
    process = learning.dp_rec_aggregator(
        0.1, 1.0, bits=6, record_messages=record_messages).create(_STRUCT)
    moved = support.clients_to_server_value_types(process.next)
    self.assertNotEmpty(moved)
    for _, value_type in moved:
      for dtype in support.tensor_dtypes(value_type.member):
        self.assertTrue(np.issubdtype(dtype, np.integer), msg=str(value_type))

  def test_message_type_is_what_crosses_to_the_server(self):
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0)
    process = factory.create(_STRUCT)
    (_, moved), = support.clients_to_server_value_types(process.next)
    num_groups = factory.num_groups(_STRUCT)
    tff.test.assert_types_equivalent(moved.member,
                                     dp_rec.message_type(num_groups))
    self.assertTrue(dp_rec.is_message_type(moved.member))

  @parameterized.named_parameters(
      ('one_group', dp_rec.message_type(1), True),
      ('many_groups', dp_rec.message_type(1000), True),
      ('no_group', dp_rec.message_type(0), False),
      ('unknown_groups', tff.to_type(collections.OrderedDict(
          seed=np.int64, indices=tff.TensorType(np.int32, [None]))), False),
      ('int64_indices', tff.to_type(collections.OrderedDict(
          seed=np.int64, indices=tff.TensorType(np.int64, [2]))), False),
      ('int32_seed', tff.to_type(collections.OrderedDict(
          seed=np.int32, indices=tff.TensorType(np.int32, [2]))), False),
      ('reordered', tff.to_type(collections.OrderedDict(
          indices=tff.TensorType(np.int32, [2]), seed=np.int64)), False),
      ('unnamed', tff.to_type([np.int64, tff.TensorType(np.int32, [2])]),
       False),
      ('extra_field', tff.to_type(collections.OrderedDict(
          seed=np.int64, indices=tff.TensorType(np.int32, [2]),
          norm=np.float32)), False),
      ('float_update', tff.TensorType(np.float32, [3]), False),
      ('federated', tff.FederatedType(dp_rec.message_type(2), tff.CLIENTS),
       False))
  def test_is_message_type(self, type_spec, expected):
    self.assertEqual(dp_rec.is_message_type(type_spec), expected)

  def test_message_size_and_dp_event(self):
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.05, l2_clip=0.06, bits=8,
                                     grouping=10**6)
    model = tff.to_type([tff.TensorType(np.float32, [10000, 500]),
                         tff.TensorType(np.float32, [500])])
    self.assertEqual(factory.num_groups(model), 6)
    self.assertEqual(factory.message_bits(model), 64 + 48)
    event = factory.dp_event(model)
    self.assertEqual(event, accounting.DpRecEvent(clip_ratio=1.2, bits=8,
                                                  num_groups=6))
    self.assertEqual(event.total_bits, 48)

  def test_clip_is_required_naming_the_argument_and_its_value(self):
    with self.assertRaisesRegex(
        TypeError, r'^l2_clip must be a positive number, found None: '
        r'DpRecSumFactory is private only with a clip\. .*'
        r'RecCompressionSumFactory'):
      dp_rec.DpRecSumFactory(noise_stddev=0.05, l2_clip=None)
    with self.assertRaisesRegex(TypeError, 'required.*l2_clip'):
      dp_rec.DpRecSumFactory(noise_stddev=0.05)  # pylint: disable=no-value-for-parameter
    with self.assertRaisesRegex(
        ValueError, r'^l2_clip must be positive, found -0\.5\.$'):
      dp_rec.DpRecSumFactory(noise_stddev=0.05, l2_clip=-0.5)

  def test_is_not_the_compression_only_factory(self):
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.05, l2_clip=0.1)
    self.assertNotIsInstance(factory, rec_compression.RecCompressionSumFactory)
    self.assertAlmostEqual(factory.clip_ratio, 2.0)
    self.assertEqual(factory.l2_clip, 0.1)


class ClientEncoderTest(tf.test.TestCase):

  def _messages(self, num_clients):
    encoder = dp_rec.DpRecSumFactory(noise_stddev=1.0, l2_clip=1.0,
                                     bits=10)._client_encoder(_VECTOR)

    @tff.federated_computation(tff.FederatedType(_VECTOR, tff.CLIENTS))
    def encode_all(values):
      return tff.federated_map(encoder, values)

    update = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    return (encode_all([update] * num_clients) +
            encode_all([update] * num_clients))

  def _assert_fresh(self, messages):
    seeds = {int(m['seed']) for m in messages}
    # 64-bit seeds: any collision among 12 has probability ~2^-57.
    self.assertLen(seeds, len(messages))
    indices = [int(m['indices'][0]) for m in messages]
    # c = 1 over 1024 candidates: the index is spread over hundreds of
    # values; fewer than 6 distinct in 12 draws is practically impossible.
    self.assertGreater(len(set(indices)), 6)

  def test_identical_updates_give_different_seeds_and_indices(self):
    # Two calls of 6 clients with the same update, in one federated map.
    self._assert_fresh(self._messages(6))

  def test_fresh_even_with_a_global_tf_seed(self):
    # A seed set by the script (the server side) must not fix client seeds.
    tf.random.set_seed(1)
    try:
      self._assert_fresh(self._messages(6))
    finally:
      tf.random.set_seed(None)

  def test_encoder_takes_only_the_update(self):
    encoder = dp_rec.DpRecSumFactory(noise_stddev=1.0,
                                     l2_clip=1.0)._client_encoder(_STRUCT)
    tff.test.assert_types_equivalent(encoder.type_signature.parameter,
                                     _STRUCT)

  def test_decoded_message_lays_groups_out_in_flattening_order(self):
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.2, l2_clip=1.0, bits=5)
    message = factory._client_encoder(_STRUCT)(
        collections.OrderedDict(a=np.ones(3, np.float32),
                                b=np.zeros((2, 2), np.float32)))
    decoded = message_lib.decode_message(
        message['seed'], message['indices'], factory.layout(_STRUCT),
        noise_stddev=0.2)
    seed = message_lib.codec_seed(tf.constant(message['seed'], tf.int64))
    expected_a = rec.decode(message['indices'][0], prior_stddev=0.2, bits=5,
                            dim=3, seed=seed, group=0)
    expected_b = rec.decode(message['indices'][1], prior_stddev=0.2, bits=5,
                            dim=4, seed=seed, group=1)
    self.assertAllEqual(decoded['a'], expected_a)
    self.assertAllEqual(decoded['b'], tf.reshape(expected_b, [2, 2]))


class MessageAggregatorTest(tf.test.TestCase):

  def test_malformed_indices_are_rejected_and_counted(self):
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.3, l2_clip=1.0, bits=5)
    aggregate = factory._message_aggregator(_STRUCT)
    good = collections.OrderedDict(seed=np.int64(123),
                                   indices=np.array([3, 31], np.int32))
    messages = [
        good,
        collections.OrderedDict(seed=np.int64(5),
                                indices=np.array([32, 0], np.int32)),
        collections.OrderedDict(seed=np.int64(6),
                                indices=np.array([0, -1], np.int32)),
        collections.OrderedDict(seed=np.int64(7),
                                indices=np.array([2**31 - 1, 2], np.int32)),
    ]
    total, measurements = aggregate(messages)
    self.assertEqual(measurements['num_messages'], 4)
    self.assertEqual(measurements['rejected_messages'], 3)
    self.assertEqual(measurements['upload_bits'], 4 * (64 + 2 * 5))
    expected = message_lib.decode_message(123, [3, 31],
                                          factory.layout(_STRUCT),
                                          noise_stddev=0.3)
    self.assertAllClose(total['a'], expected['a'])
    self.assertAllClose(total['b'], expected['b'])

  def test_wrong_shape_is_refused_by_the_type_system(self):
    aggregate = dp_rec.DpRecSumFactory(
        noise_stddev=0.3, l2_clip=1.0, bits=5)._message_aggregator(_STRUCT)
    with self.assertRaises(TypeError):
      aggregate([collections.OrderedDict(
          seed=np.int64(1), indices=np.array([1, 2, 3], np.int32))])


class ExecutionTest(tf.test.TestCase):

  def test_measurements(self):
    process = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0,
                                     bits=6).create(_STRUCT)
    values = [
        collections.OrderedDict(a=np.ones(3, np.float32) * i,
                                b=np.ones((2, 2), np.float32))
        for i in range(3)
    ]
    output = process.next(process.initialize(), values)
    self.assertEqual(
        output.measurements,
        collections.OrderedDict(upload_bits=3 * (64 + 2 * 6), num_messages=3,
                                rejected_messages=0))
    self.assertEqual(output.result['b'].shape, (2, 2))

  def test_mean_over_rounds_approaches_mean_of_clipped_updates(self):
    s, clip, rounds = 0.5, 1.0, 40
    process = learning.dp_rec_aggregator(s, clip, bits=8,
                                       grouping='network').create(_VECTOR)
    values = [
        np.array([3.0, 0.0, 0.0, 0.0], np.float32),  # clipped to [1, 0, 0, 0]
        np.array([0.0, 0.6, 0.0, 0.0], np.float32),
        np.array([0.0, 0.0, -0.8, 0.0], np.float32),
        np.array([0.0, 0.0, 0.0, 0.0], np.float32),
    ]
    expected = np.mean([v * min(1.0, clip / max(np.linalg.norm(v), 1e-12))
                        for v in values], axis=0)
    state = process.initialize()
    results = []
    for _ in range(rounds):
      output = process.next(state, values)
      state = output.state
      results.append(output.result)
    mean = np.mean(results, axis=0)
    # Each decoded update ~ N(clipped, s^2) (c = 2, KL = 2 nats << 8 bits), so
    # the mean of 160 samples has standard error s/sqrt(160) ~ 0.04. Five
    # standard errors: by chance ~1e-6 per coordinate, plus a 0.05 allowance
    # for the importance-sampling bias at K = 256.
    tol = 5 * s / math.sqrt(rounds * len(values)) + 0.05
    self.assertAllClose(mean, expected, atol=tol)
    # The unclipped mean would put 0.75 in the first coordinate.
    self.assertLess(mean[0], 0.75 - tol)

  def test_non_finite_update_is_encoded_as_zero(self):
    s = 0.05
    process = dp_rec.DpRecSumFactory(noise_stddev=s, l2_clip=1.0,
                                     bits=6).create(_VECTOR)
    bad = [np.array([np.nan, 1.0, 1.0, 1.0], np.float32),
           np.array([np.inf, 0.0, 0.0, 0.0], np.float32),
           np.array([1e38, 1e38, 1e38, 1e38], np.float32)]
    total = process.next(process.initialize(), bad).result
    self.assertTrue(np.all(np.isfinite(total)))
    # The NaN and Inf clients contribute zero-mean candidates (|x| < 6 s each
    # with probability 1 - 2e-9); the huge client is clipped to norm 1.
    self.assertLess(np.linalg.norm(total), 1.0 + 3 * 6 * s * 2)


class InsecureTestModeTest(tf.test.TestCase):
  """The opt-in deterministic mode reproduces messages; the default never."""

  def _messages(self, factory, values):
    encode = factory._client_encoder(_STRUCT)
    return [encode(v) for v in values]

  def test_deterministic_per_update_and_seed(self):
    value = collections.OrderedDict(a=np.array([0.3, -0.1, 0.2], np.float32),
                                    b=np.full([2, 2], 0.05, np.float32))
    other = collections.OrderedDict(a=np.array([0.3, -0.1, 0.25], np.float32),
                                    b=np.full([2, 2], 0.05, np.float32))
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0, bits=10,
                                     insecure_test_seed=7)
    first, second, changed = self._messages(factory, [value, value, other])
    self.assertEqual(first['seed'], second['seed'])
    self.assertAllEqual(first['indices'], second['indices'])
    self.assertNotEqual(first['seed'], changed['seed'])
    again = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0, bits=10,
                                   insecure_test_seed=8)
    self.assertNotEqual(self._messages(again, [value])[0]['seed'],
                        first['seed'])
    private = dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0, bits=10)
    self.assertIsNone(private.insecure_test_seed)
    a, b = self._messages(private, [value, value])
    self.assertNotEqual(a['seed'], b['seed'])

  def test_bad_test_seed(self):
    for bad in ('1', 1.0, True):
      with self.assertRaisesRegex(TypeError, 'insecure_test_seed'):
        dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0,
                               insecure_test_seed=bad)


if __name__ == '__main__':
  tf.test.main()
