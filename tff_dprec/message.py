"""DP-REC messages: their layout, and whole-update encoding, in plain TF.

A client's update (a structure of float tensors) is flattened in `tf.nest`
order into one float32 vector and split into groups (`rec.split_groups`). A
message is `(seed, indices)`: a 64-bit seed word R drawn by the client and
one index of `bits` bits per group, `64 + num_groups * bits` bits in all.
`MessageLayout` holds what both sides must agree on (the value's specs, the
groups, the bits); `encode_update`, `decode_message` and `sum_messages` are
the client's encoder, the decoder and the server's ordered sum of a message
matrix. No TFF here: `tff_dprec.aggregators.dp_rec` wires these into TFF.

Wire format: the codec seed of a message is `[R, _SEED_DOMAIN]`, group g uses
`rec`'s group g of that seed (see `rec`; the golden vectors pin both).
"""

import collections
from typing import Any, Optional

import attrs
import numpy as np
import tensorflow as tf

from tff_dprec import rec
from tff_dprec import sizes
from tff_dprec import validation

# A message carries a 64-bit seed word; the codec seed is (word, domain tag).
SEED_BITS = sizes.SEED_BITS
_SEED_DOMAIN = 0x44505245430001  # "DPREC" + codec version 1.
# Refuse groups larger than this many elements (memory budget: the client
# holds a group, the server decodes one, the encoder a block of candidates).
MAX_GROUP_ELEMENTS = 2**27


@attrs.frozen
class MessageLayout:
  """Where each index of a DP-REC message sits in a client's update.

  Build it with `MessageLayout.from_value_type`, which checks everything.

  Attributes:
    value_specs: The update's structure of `tf.TensorSpec`s (float dtypes,
      static shapes).
    bits: Index bits per group; K = 2**bits candidates.
    grouping: `'tensor'`, `'network'` or a positive int G (see
      `rec.split_groups`).
    groups: `(start, end)` ranges of the flattened update, one per index,
      none larger than `MAX_GROUP_ELEMENTS`.
  """
  value_specs: Any
  bits: int
  grouping: rec.Grouping
  groups: tuple[tuple[int, int], ...]

  @classmethod
  def from_value_type(cls, value_type, *, bits: int,
                      grouping: rec.Grouping = rec.GROUPING_TENSOR
                      ) -> 'MessageLayout':
    """Returns the layout of messages for updates of `value_type`.

    Args:
      value_type: A `tf.TensorSpec` or a structure of them (what
        `tff.types.type_to_tf_tensor_specs` returns for a TFF type), with
        float dtypes and static shapes.
      bits: Index bits per group, in [1, `rec.MAX_BITS`].
      grouping: `'tensor'` (one index per non-empty tensor, default),
        `'network'` (one index for the whole update) or a positive int G
        (each tensor split into groups of at most G elements).

    Raises:
      TypeError: If `value_type` has a leaf that is not a float
        `tf.TensorSpec` of static shape, or `bits` or `grouping` has the
        wrong type.
      ValueError: If `bits` or `grouping` is invalid, or a group would
        exceed `MAX_GROUP_ELEMENTS` (the memory budget).
    """
    rec.check_bits(bits)
    check_grouping(grouping)
    sizes = []
    for spec in tf.nest.flatten(value_type):
      _check_spec(spec, value_type)
      sizes.append(int(np.prod(spec.shape.as_list(), dtype=np.int64)))
    groups = tuple(rec.split_groups(sizes, grouping))
    for start, end in groups:
      if end - start > MAX_GROUP_ELEMENTS:
        raise ValueError(
            f'value_type has a group of {end - start} elements with '
            f'grouping={grouping!r}, over the memory budget of '
            f'{MAX_GROUP_ELEMENTS} elements per group; use grouping=<int> '
            f'no larger than {MAX_GROUP_ELEMENTS}.')
    return cls(value_specs=value_type, bits=int(bits), grouping=grouping,
               groups=groups)

  @property
  def flat_specs(self) -> tuple[tf.TensorSpec, ...]:
    """The update's tensor specs in flattening order."""
    return tuple(tf.nest.flatten(self.value_specs))

  @property
  def num_elements(self) -> int:
    """The number of elements of the flattened update."""
    return sum(_num_elements(s) for s in self.flat_specs)

  @property
  def num_groups(self) -> int:
    """The number of indices per message, M."""
    return len(self.groups)

  @property
  def message_bits(self) -> int:
    """The size of one message: `SEED_BITS + num_groups * bits`."""
    return SEED_BITS + self.num_groups * self.bits

  def flatten(self, value) -> tf.Tensor:
    """The update as one float32 vector, in `tf.nest` order."""
    parts = [tf.reshape(tf.cast(t, tf.float32), [-1])
             for t in tf.nest.flatten(value)]
    if not parts:
      return tf.zeros([0], tf.float32)
    return tf.concat(parts, axis=0)

  def unflatten(self, flat: tf.Tensor):
    """The inverse of `flatten`: tensors of the specs' shapes and dtypes."""
    tensors = []
    offset = 0
    for spec in self.flat_specs:
      size = _num_elements(spec)
      tensors.append(tf.cast(tf.reshape(flat[offset:offset + size],
                                        spec.shape), spec.dtype))
      offset += size
    return tf.nest.pack_sequence_as(self.value_specs, tensors)


def check_grouping(grouping: rec.Grouping) -> None:
  """`rec.check_grouping`, and an int grouping within the memory budget."""
  rec.check_grouping(grouping)
  if not isinstance(grouping, str) and grouping > MAX_GROUP_ELEMENTS:
    raise ValueError(
        f'grouping={grouping!r} exceeds the memory budget of '
        f'{MAX_GROUP_ELEMENTS} elements per group.')


def codec_seed(seed_word) -> tf.Tensor:
  """The codec seed `[R, domain]` of a message with seed word R."""
  return tf.stack([tf.cast(seed_word, tf.int64),
                   tf.constant(_SEED_DOMAIN, tf.int64)])


def encode_update(value, layout: MessageLayout, *, noise_stddev: float,
                  l2_clip: Optional[float],
                  chunk_elements: int = rec.DEFAULT_CHUNK_ELEMENTS,
                  insecure_test_seed: Optional[int] = None):
  """Encodes a client's update as a DP-REC message (the client's side).

  Replaces a non-finite update by zeros, clips the flattened update to
  `l2_clip` in L2 norm (norm in float64), draws the seed word R from fresh OS
  entropy and encodes each group of the layout with `rec.encode` under the
  codec seed of R, with fresh Gumbel selection noise.

  Args:
    value: The update, a structure of tensors matching `layout.value_specs`.
    layout: The message layout.
    noise_stddev: The prior standard deviation s; positive.
    l2_clip: The L2 norm to clip the whole update to, or `None` for no
      clipping (compression only, not private).
    chunk_elements: Candidate elements generated at once (client memory).
    insecure_test_seed: TESTS ONLY, NOT PRIVATE: an int (or an int64
      scalar tensor, for statistical tests that loop in a graph) makes R and the
      selection noise functions of this value and the clipped update.

  Returns:
    An `OrderedDict(seed=<int64 scalar>, indices=<int32 [num_groups]>)`.

  Raises:
    TypeError, ValueError: For invalid arguments.
  """
  validation.check_positive_number(noise_stddev, 'noise_stddev')
  if l2_clip is not None:
    validation.check_positive_number(l2_clip, 'l2_clip')
  insecure_test_seed = checked_test_seed(insecure_test_seed)
  flat = prepared_update(value, layout, l2_clip)
  if insecure_test_seed is None:
    # Fresh OS entropy drawn on the client, independent of its update and of
    # anything in the graph the server built.
    seed_word = rec.fresh_int64([])
    selection_seeds = [None] * layout.num_groups
  else:
    seed_word, selection_seeds = insecure_test_seeds(
        flat, insecure_test_seed, layout.num_groups)
  seed = codec_seed(seed_word)
  indices = [
      rec.encode(flat[start:end], prior_stddev=noise_stddev,
                 bits=layout.bits, seed=seed,
                 selection_seed=selection_seeds[g], group=g,
                 chunk_elements=chunk_elements)
      for g, (start, end) in enumerate(layout.groups)
  ]
  if not indices:
    indices_tensor = tf.zeros([0], tf.int32)
  else:
    indices_tensor = tf.stack(indices)
  return collections.OrderedDict(seed=seed_word, indices=indices_tensor)


def prepared_update(value, layout: MessageLayout,
                    l2_clip: Optional[float]) -> tf.Tensor:
  """The flat float32 update a client encodes: zero if any element is not
  finite, then clipped to `l2_clip` in L2 norm (norm in float64) unless
  `l2_clip` is None."""
  flat = _zero_if_not_finite(layout.flatten(value))
  if l2_clip is not None:
    flat = _clip_l2(flat, l2_clip)
  return flat


def indices_valid(indices, layout: MessageLayout) -> tf.Tensor:
  """A bool scalar: whether every index is in [0, 2**bits)."""
  return tf.reduce_all(rec.index_in_range(indices, layout.bits))


def decode_message(seed_word, indices, layout: MessageLayout, *,
                   noise_stddev: float):
  """Decodes one message: the candidates its indices name, as an update.

  Indices are not range-checked (see `indices_valid`).

  Args:
    seed_word: The message's int64 seed word R.
    indices: The message's indices, one per group (int32).
    layout: The message layout.
    noise_stddev: The prior standard deviation of the encoder.

  Returns:
    A structure of tensors matching `layout.value_specs`.
  """
  flat = _decode_flat(codec_seed(_as_tensor(seed_word, tf.int64)),
                      _as_tensor(indices, tf.int32), layout, noise_stddev)
  return layout.unflatten(flat)


@tf.autograph.experimental.do_not_convert
def sum_messages(messages, layout: MessageLayout, *, noise_stddev: float):
  """Decodes the rows of a message matrix in order and adds them up.

  The server's decoder with `record_messages=True`, and the one that
  `tff_dprec.history` replays, so both compute the same sum bit for bit.
  Plain graph code (explicit `while_loop` and `cond`): nothing for AutoGraph
  to convert when a caller's `tf.function` traces it.

  Args:
    messages: An int64 matrix, one row `[seed, index_1, ..., index_M]` per
      message.
    layout: The message layout.
    noise_stddev: The prior standard deviation of the encoder.

  Returns:
    `(total, rejected)`: the float32 sum, as a structure matching
    `layout.value_specs`, and the int32 number of rows skipped for an index
    outside [0, 2**bits).
  """
  num_groups, total_size = layout.num_groups, layout.num_elements
  messages = tf.convert_to_tensor(messages, tf.int64)
  messages = tf.ensure_shape(messages, [None, 1 + num_groups])

  def body(i, acc, rejected):
    row = messages[i]
    indices = row[1:]
    valid = indices_valid(indices, layout)
    seed = codec_seed(row[0])
    acc = tf.cond(
        valid,
        lambda: acc + _decode_flat(seed, tf.cast(indices, tf.int32), layout,
                                   noise_stddev),
        lambda: acc)
    return i + 1, acc, rejected + tf.cast(tf.logical_not(valid), tf.int32)

  _, acc, rejected = tf.while_loop(
      lambda i, acc, rejected: i < tf.shape(messages)[0], body,
      (tf.constant(0), tf.zeros([total_size], tf.float32),
       tf.constant(0, tf.int32)))
  return layout.unflatten(acc), rejected


def _decode_flat(seed, indices, layout, noise_stddev):
  parts = [
      rec.decode(indices[g], prior_stddev=noise_stddev, bits=layout.bits,
                 dim=end - start, seed=seed, group=g)
      for g, (start, end) in enumerate(layout.groups)
  ]
  if not parts:
    return tf.zeros([layout.num_elements], tf.float32)
  return tf.concat(parts, axis=0)


def checked_test_seed(test_seed):
  """A test seed as `insecure_test_seeds` takes it: None, an int (reduced
  mod 2**63) or an int64 scalar tensor (a statistical test's graph loop)."""
  if test_seed is None or tf.is_tensor(test_seed):
    return test_seed
  validation.check_int(test_seed, 'insecure_test_seed')
  return int(test_seed) % 2**63


def insecure_test_seeds(flat, test_seed, num_groups: int):
  """TESTS ONLY: a seed word and one seed per group from `test_seed` and
  the prepared update `flat` (deterministic, so not private)."""
  fingerprint = tf.fingerprint(
      tf.reshape(tf.bitcast(flat, tf.uint8), [1, -1]))
  word = tf.bitcast(tf.reshape(fingerprint, [8]), tf.int64)
  key = tf.stack([tf.cast(test_seed, tf.int64), word])
  seed_word = tf.random.stateless_uniform(
      [], seed=key, minval=None, maxval=None, dtype=tf.int64, alg='philox')
  selection_seeds = [
      tf.cast(tf.random.experimental.stateless_fold_in(key, g + 1,
                                                       alg='philox'),
              tf.int64)
      for g in range(num_groups)]
  return seed_word, selection_seeds


def _zero_if_not_finite(flat):
  finite = tf.reduce_all(tf.math.is_finite(flat))
  return tf.where(finite, flat, tf.zeros_like(flat))


def _clip_l2(flat, l2_clip):
  # Norm in float64: float32 squares overflow for enormous updates.
  norm = tf.norm(tf.cast(flat, tf.float64))
  factor = tf.minimum(tf.constant(1.0, tf.float64),
                      l2_clip / tf.maximum(norm, 1e-300))
  return tf.cast(tf.cast(flat, tf.float64) * factor, tf.float32)


def _as_tensor(value, dtype):
  if isinstance(value, (tf.Tensor, tf.Variable)):
    return tf.cast(value, dtype)
  return tf.constant(value, dtype)


def _num_elements(spec) -> int:
  return int(np.prod(spec.shape.as_list(), dtype=np.int64))


def _check_spec(spec, value_type):
  if not isinstance(spec, tf.TensorSpec):
    raise TypeError(
        'value_type must be a tf.TensorSpec or a structure of them, found '
        f'{spec!r} in {value_type!r}.')
  if not spec.dtype.is_floating:
    raise TypeError(
        'DP-REC encodes float tensors only; value_type has dtype '
        f'{spec.dtype.name} in {value_type!r}.')
  if not spec.shape.is_fully_defined():
    raise TypeError(
        f'DP-REC needs static shapes; value_type has shape {spec.shape} in '
        f'{value_type!r}.')
