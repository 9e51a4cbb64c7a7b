"""Tests for tff_dprec.message."""

import collections

from absl.testing import parameterized
import attrs
import numpy as np
import tensorflow as tf

from tff_dprec import message
from tff_dprec import rec

_STRUCT = collections.OrderedDict(
    a=tf.TensorSpec([3], tf.float32),
    b=tf.TensorSpec([2, 5], tf.float32))


def _layout(value_type=_STRUCT, bits=5, grouping=rec.GROUPING_TENSOR):
  return message.MessageLayout.from_value_type(value_type, bits=bits,
                                               grouping=grouping)


class LayoutTest(tf.test.TestCase, parameterized.TestCase):
  """Construction only: nothing is encoded."""

  @parameterized.named_parameters(
      ('tensor', rec.GROUPING_TENSOR, ((0, 3), (3, 13))),
      ('network', rec.GROUPING_NETWORK, ((0, 13),)),
      # Each tensor apart: 3 -> one group; 10 -> ceil(10 / 4) = 3 groups.
      ('int', 4, ((0, 3), (3, 6), (6, 9), (9, 13))),
  )
  def test_groups(self, grouping, groups):
    layout = _layout(grouping=grouping)
    self.assertEqual(layout.groups, groups)
    self.assertEqual(layout.num_groups, len(groups))
    self.assertEqual(layout.num_elements, 13)
    self.assertEqual(layout.message_bits, 64 + 5 * len(groups))

  def test_paper_stackoverflow_lr_layout(self):
    # 10000 x 500 weights and 500 biases in groups of at most 10**6: 5 + 1.
    layout = _layout([tf.TensorSpec([10000, 500], tf.float32),
                      tf.TensorSpec([500], tf.float32)], bits=7,
                     grouping=10**6)
    self.assertEqual(layout.num_groups, 6)
    self.assertEqual(layout.message_bits, 64 + 42)

  def test_single_tensor_and_empty_tensors(self):
    self.assertEqual(_layout(tf.TensorSpec([4], tf.float64)).groups,
                     ((0, 4),))
    layout = _layout([tf.TensorSpec([0], tf.float32),
                      tf.TensorSpec([2], tf.float32)])
    self.assertEqual(layout.groups, ((0, 2),))
    self.assertEqual(_layout([]).num_groups, 0)
    self.assertEqual(_layout([]).message_bits, 64)

  def test_frozen(self):
    layout = _layout()
    with self.assertRaises(attrs.exceptions.FrozenInstanceError):
      layout.bits = 3  # pytype: disable=attribute-error

  def test_equal_layouts_compare_equal(self):
    self.assertEqual(_layout(), _layout())
    self.assertNotEqual(_layout(), _layout(bits=6))

  def test_group_over_memory_budget(self):
    big = tf.TensorSpec([message.MAX_GROUP_ELEMENTS + 1], tf.float32)
    with self.assertRaisesRegex(ValueError, r'value_type.*grouping=\'network'
                                r'\'.*memory budget'):
      _layout([big], grouping=rec.GROUPING_NETWORK)
    with self.assertRaisesRegex(ValueError, 'grouping=<int>'):
      _layout(big, grouping=rec.GROUPING_TENSOR)
    # Split into groups within the budget, it is fine (nothing allocated).
    self.assertEqual(
        _layout(big, grouping=message.MAX_GROUP_ELEMENTS).num_groups, 2)

  @parameterized.named_parameters(
      ('bits_zero', dict(bits=0), ValueError, 'bits'),
      ('bits_float', dict(bits=7.0), TypeError, 'bits'),
      ('grouping_unknown', dict(grouping='layer'), ValueError, 'grouping'),
      ('grouping_over_budget', dict(grouping=2**28), ValueError,
       'grouping=268435456 exceeds the memory budget'),
      ('int_dtype', dict(value_type=tf.TensorSpec([3], tf.int32)), TypeError,
       'value_type has dtype int32'),
      ('unknown_shape', dict(value_type=tf.TensorSpec([None], tf.float32)),
       TypeError, 'value_type has shape'),
      ('not_a_spec', dict(value_type=[np.zeros(3)]), TypeError,
       'value_type must be a tf.TensorSpec'),
  )
  def test_rejects(self, override, error, regex):
    kwargs = dict(value_type=_STRUCT, bits=5, grouping=rec.GROUPING_TENSOR)
    kwargs.update(override)
    with self.assertRaisesRegex(error, regex):
      message.MessageLayout.from_value_type(**kwargs)


class EncodingTest(tf.test.TestCase):
  """Execution: encode, decode, sum."""

  def _update(self, scale=1.0):
    return collections.OrderedDict(
        a=np.array([0.1, -0.2, 0.3], np.float32) * scale,
        b=np.linspace(-0.5, 0.5, 10).reshape(2, 5).astype(np.float32) * scale)

  def test_flatten_unflatten_round_trip(self):
    layout = _layout()
    value = self._update()
    flat = layout.flatten(value)
    self.assertEqual(flat.shape, [13])
    back = layout.unflatten(flat)
    self.assertAllEqual(back['a'], value['a'])
    self.assertAllEqual(back['b'], value['b'])

  def test_message_shape_and_range(self):
    layout = _layout(grouping=4)
    msg = message.encode_update(self._update(), layout, noise_stddev=0.2,
                                l2_clip=1.0)
    self.assertEqual(msg['seed'].dtype, tf.int64)
    self.assertEqual(msg['indices'].dtype, tf.int32)
    self.assertEqual(msg['indices'].shape, [4])
    self.assertTrue(message.indices_valid(msg['indices'], layout))

  def test_decode_lays_groups_out_in_flattening_order(self):
    layout = _layout()
    msg = message.encode_update(self._update(), layout, noise_stddev=0.2,
                                l2_clip=1.0)
    decoded = message.decode_message(msg['seed'], msg['indices'], layout,
                                     noise_stddev=0.2)
    seed = message.codec_seed(msg['seed'])
    expected_a = rec.decode(msg['indices'][0], prior_stddev=0.2, bits=5,
                            dim=3, seed=seed, group=0)
    expected_b = rec.decode(msg['indices'][1], prior_stddev=0.2, bits=5,
                            dim=10, seed=seed, group=1)
    self.assertAllEqual(decoded['a'], expected_a)
    self.assertAllEqual(decoded['b'], tf.reshape(expected_b, [2, 5]))

  def test_insecure_test_seed_is_deterministic_and_clips_first(self):
    layout = _layout()
    encode = lambda value: message.encode_update(  # pylint: disable=g-long-lambda
        value, layout, noise_stddev=0.2, l2_clip=0.5, insecure_test_seed=9)
    first, second = encode(self._update()), encode(self._update())
    self.assertEqual(int(first['seed']), int(second['seed']))
    self.assertAllEqual(first['indices'], second['indices'])
    # Updates that clip to the same vector give the same message.
    big, bigger = encode(self._update(100.0)), encode(self._update(200.0))
    self.assertEqual(int(big['seed']), int(bigger['seed']))

  def test_non_finite_update_encodes_like_zero(self):
    layout = _layout()
    zero = collections.OrderedDict(a=np.zeros(3, np.float32),
                                   b=np.zeros((2, 5), np.float32))
    bad = collections.OrderedDict(a=np.array([np.nan, 0, 0], np.float32),
                                  b=np.zeros((2, 5), np.float32))
    encode = lambda value: message.encode_update(  # pylint: disable=g-long-lambda
        value, layout, noise_stddev=0.2, l2_clip=1.0, insecure_test_seed=3)
    self.assertEqual(int(encode(zero)['seed']), int(encode(bad)['seed']))

  def test_sum_messages_in_order_and_rejects_bad_rows(self):
    layout = _layout(grouping=4)
    rows = []
    for scale in (1.0, -1.0, 0.5):
      msg = message.encode_update(self._update(scale), layout,
                                  noise_stddev=0.3, l2_clip=1.0)
      rows.append([int(msg['seed'])] + [int(i) for i in msg['indices']])
    bad = [[7, 0, 0, 32, 0], [8, -1, 0, 0, 0]]  # Out of [0, 32).
    matrix = np.array(rows[:1] + bad + rows[1:], np.int64)
    total, rejected = message.sum_messages(matrix, layout, noise_stddev=0.3)
    self.assertEqual(int(rejected), 2)
    expected = tf.zeros([13])
    for row in rows:
      expected += layout.flatten(message.decode_message(
          row[0], row[1:], layout, noise_stddev=0.3))
    self.assertAllClose(layout.flatten(total), expected, rtol=1e-6,
                        atol=1e-6)
    # Traced in a caller's tf.function, it computes the same bits.
    traced, _ = tf.function(
        lambda m: message.sum_messages(m, layout, noise_stddev=0.3))(matrix)
    self.assertAllEqual(layout.flatten(traced), layout.flatten(total))

  def test_encode_rejects_bad_arguments(self):
    layout = _layout()
    with self.assertRaisesRegex(ValueError, 'noise_stddev'):
      message.encode_update(self._update(), layout, noise_stddev=0.0,
                            l2_clip=1.0)
    with self.assertRaisesRegex(TypeError, 'insecure_test_seed'):
      message.encode_update(self._update(), layout, noise_stddev=0.1,
                            l2_clip=1.0, insecure_test_seed='1')


if __name__ == '__main__':
  tf.test.main()
