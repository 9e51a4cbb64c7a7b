"""Relative entropy coding (REC) of Gaussian samples with shared randomness.

The codec of DP-REC (Triastcyn et al., "DP-REC: Private & Communication-
Efficient Federated Learning", Algorithms 1-4). A sender holding the mean `v`
of q = N(v, s^2 I) and a shared seed R draws K = 2**bits candidates from the
prior p = N(0, s^2 I), weighs candidate k by q(x_k) / p(x_k), i.e. by the
log-weight <x_k, v> / s^2 (the terms that do not depend on k cancel), and sends
the index of one candidate drawn from those weights. The receiver regenerates
candidate k from (R, k) alone.

Wire format (codec version 1). Candidate generation is part of the wire format;
the golden vectors in `tests/library/golden/rec_v1.json` pin it:

*   The shared seed is a shape-[2] int64 tensor. Group `g` of a message uses
    the seed `fold_in(seed, g)` (Philox), from which one Philox draw of two
    int64 words gives the Philox key (word 0) and the high counter word
    (word 1).
*   Candidate `k` of a group of `d` elements is the first `d` values of the
    standard normals that `StatelessRandomNormalV2` (Philox) produces for that
    key with counter `(k * ceil(d / 4), high word)`, scaled by the prior
    standard deviation. Philox yields four normals per counter value, so a
    block of consecutive candidates is one call over `[C, 4 * ceil(d / 4)]`
    and a single candidate is one call over `[4 * ceil(d / 4)]` at its own
    counter: decoding costs the same for every index, whatever K is.

The index is drawn with the Gumbel-max trick from randomness independent of
the shared seed: fresh, unseeded randomness unless a `selection_seed` is given
(tests only: a sender that reuses selection seeds loses the privacy argument).

Compression by parts (Theorem 3 of the paper): `split_groups` splits a list of
tensor sizes into contiguous groups of the concatenated flat vector, each
encoded with its own index under the same seed.
"""

import math
from typing import Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tff_dprec import sizes as wire_sizes
from tff_dprec import validation

CODEC_VERSION = 1
# The largest supported bit-width per group. 2**24 candidates already take
# minutes to encode for d ~ 1e6; larger K also overflows int32 indices soon.
MAX_BITS = wire_sizes.MAX_BITS
# Default number of candidate elements (K x d) generated at once by `encode`:
# 2**22 float32 values (16 MiB) per block.
DEFAULT_CHUNK_ELEMENTS = 2**22
# Philox yields four 32-bit words, i.e. four normals, per counter increment.
_PHILOX_OUTPUTS_PER_COUNTER = 4
_PHILOX_ALG_ID = 1  # `tf.random.Algorithm.PHILOX.value`.
# The Philox key that scrambles a seed into a key and counter
# (tensorflow/core/kernels/stateless_random_ops.cc).
_PHILOX_SCRAMBLE_KEY = 0x02461E293EC8F720
# Clip ratios at or above this are outside the privacy idealisation of the
# implemented selection (`sizes.IDEALISED_CLIP_RATIO_LIMIT`).
IDEALISED_CLIP_RATIO_LIMIT = wire_sizes.IDEALISED_CLIP_RATIO_LIMIT

GROUPING_TENSOR = 'tensor'
GROUPING_NETWORK = 'network'
Grouping = Union[str, int]


def padded_dim(dim: int) -> int:
  """Returns `dim` rounded up to a multiple of Philox's output block."""
  return (_PHILOX_OUTPUTS_PER_COUNTER
          * _ceil_div(dim, _PHILOX_OUTPUTS_PER_COUNTER))


def candidate_block(
    seed: tf.Tensor, group: Union[int, tf.Tensor], start: tf.Tensor,
    count: int, dim: int) -> tf.Tensor:
  """Returns standard-normal candidates `start .. start + count - 1`.

  Args:
    seed: The shared seed, a shape-[2] int64 tensor.
    group: The group index (int32 scalar or Python int).
    start: The first candidate index (int64 scalar).
    count: The number of candidates (Python int).
    dim: The number of elements per candidate (Python int).

  Returns:
    A float32 tensor of shape `[count, padded_dim(dim)]`; the first `dim`
    columns of row `i` are candidate `start + i` divided by the prior
    standard deviation.
  """
  key, counter_hi = _group_key(seed, group)
  return _candidate_block(key, counter_hi, start, count, dim)


def _candidate_block(key, counter_hi, start, count, dim):
  """`candidate_block` for an already derived group key."""
  stride = padded_dim(dim) // _PHILOX_OUTPUTS_PER_COUNTER
  counter_lo = tf.cast(start, tf.int64) * stride
  counter = tf.bitcast(tf.stack([counter_lo, counter_hi]), tf.uint64)
  return tf.raw_ops.StatelessRandomNormalV2(
      shape=tf.constant([count, padded_dim(dim)], tf.int32),
      key=key,
      counter=counter,
      alg=tf.constant(_PHILOX_ALG_ID, tf.int32),
      dtype=tf.float32)


def encode(value: tf.Tensor,
           *,
           prior_stddev: float,
           bits: int,
           seed: tf.Tensor,
           selection_seed: Optional[tf.Tensor] = None,
           group: Union[int, tf.Tensor] = 0,
           chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> tf.Tensor:
  """Encodes a sample of N(value, prior_stddev^2 I) as a candidate index.

  Memory is O(chunk_elements + 2**bits): candidates are generated in blocks of
  at most `max(chunk_elements, padded_dim)` elements, never as a K x d matrix.

  Args:
    value: A float32 vector of static length d, the mean of q (already
      clipped by the caller).
    prior_stddev: The standard deviation s of the prior and of q; positive.
    bits: Index bit-width b; K = 2**b candidates. 1 <= b <= `MAX_BITS`.
    seed: The shared seed, shape [2] int64. The caller must draw it from
      randomness independent of `value`.
    selection_seed: Optional shape-[2] int64 seed for the Gumbel noise that
      selects the index. `None` (the default, and the only private choice)
      draws fresh randomness on every call.
    group: The group index of this vector inside a message.
    chunk_elements: Approximate number of candidate elements per block.

  Returns:
    An int32 scalar in [0, 2**bits).

  Raises:
    ValueError: For invalid `bits`, `prior_stddev`, `chunk_elements` or a
      `value` without static length.
  """
  check_bits(bits)
  validation.check_positive_number(prior_stddev, 'prior_stddev')
  validation.check_positive_int(chunk_elements, 'chunk_elements')
  value = tf.convert_to_tensor(value, tf.float32)
  if value.shape.rank != 1 or value.shape[0] is None:
    raise ValueError(
        f'value must be a vector of static length, found shape {value.shape}.')
  log_weights = _log_weights(value, prior_stddev, 2**bits, seed, group,
                             chunk_elements)
  return gumbel_max(log_weights, selection_seed)


def _log_weights(value: tf.Tensor, prior_stddev: float, num_candidates: int,
                 seed: tf.Tensor, group: Union[int, tf.Tensor],
                 chunk_elements: int) -> tf.Tensor:
  """log q(x_k)/p(x_k) up to a constant for the group's K candidates.

  `encode` checks the arguments; candidates come in blocks (see `encode`).
  """
  dim = int(value.shape[0])
  pdim = padded_dim(dim)
  block = _block_size(num_candidates, pdim, chunk_elements)
  num_blocks = num_candidates // block
  # log q(x)/p(x) = <x, v>/s^2 + const; with x = s * z: <z, v>/s.
  scaled_value = tf.pad(value / prior_stddev, [[0, pdim - dim]])
  scaled_value = tf.reshape(scaled_value, [pdim, 1])
  # The group's Philox key is derived once, outside the block loop.
  key, counter_hi = _group_key(tf.convert_to_tensor(seed, tf.int64), group)

  def block_log_weights(i):
    start = tf.cast(i, tf.int64) * block
    z = _candidate_block(key, counter_hi, start, block, dim)
    return tf.reshape(tf.matmul(z, scaled_value), [block])

  if num_blocks == 1:
    log_weights = block_log_weights(0)
  else:
    log_weights = tf.map_fn(
        block_log_weights,
        tf.range(num_blocks),
        fn_output_signature=tf.TensorSpec([block], tf.float32),
        parallel_iterations=1)
    log_weights = tf.reshape(log_weights, [num_candidates])
  return log_weights


def decode(index: tf.Tensor,
           *,
           prior_stddev: float,
           bits: int,
           dim: int,
           seed: tf.Tensor,
           group: Union[int, tf.Tensor] = 0) -> tf.Tensor:
  """Returns candidate `index` of the shared seed as a float32 vector.

  Bit-identical to the candidate that `encode` weighed for the same seed and
  group; costs one candidate's generation whatever `bits` is.

  Args:
    index: Integer scalar in [0, 2**bits). Not range-checked here (see
      `index_in_range`).
    prior_stddev: The prior standard deviation used by the encoder.
    bits: The index bit-width used by the encoder.
    dim: The vector length (Python int).
    seed: The shared seed, shape [2] int64.
    group: The group index.

  Returns:
    A float32 tensor of shape [dim].
  """
  check_bits(bits)
  validation.check_positive_number(prior_stddev, 'prior_stddev')
  validation.check_positive_int(dim, 'dim')
  z = candidate_block(
      tf.convert_to_tensor(seed, tf.int64), group,
      tf.cast(index, tf.int64), 1, dim)
  return tf.reshape(z, [-1])[:dim] * prior_stddev


def gumbel_max(log_weights: tf.Tensor,
               selection_seed: Optional[tf.Tensor] = None) -> tf.Tensor:
  """Samples an index with probability softmax(log_weights) (Gumbel-max).

  The Gumbel noise is float64: with float32 uniforms (24-bit resolution) the
  largest of 2^24 uniforms ties with probability about 1/2, and argmax breaks
  ties towards low indices (at bits=24 and equal weights, P(index < K/2) was
  0.76). With 53-bit uniforms ties have probability about K * 2^-53 <= 2^-29.
  """
  gumbel = gumbel_noise(tf.shape(log_weights), selection_seed)
  return tf.cast(
      tf.argmax(tf.cast(log_weights, tf.float64) + gumbel), tf.int32)


def gumbel_noise(shape, selection_seed: Optional[tf.Tensor] = None
                 ) -> tf.Tensor:
  """Standard Gumbel float64 noise, from OS entropy or `selection_seed`."""
  minval = np.finfo(np.float64).tiny
  if selection_seed is None:
    u = tf.maximum(fresh_uniform(shape, tf.float64), minval)
  else:
    u = tf.random.stateless_uniform(
        shape, seed=tf.convert_to_tensor(selection_seed, tf.int64),
        minval=minval, maxval=1.0, dtype=tf.float64, alg='philox')
  return -tf.math.log(-tf.math.log(u))


def fresh_uniform(shape, dtype=tf.float32) -> tf.Tensor:
  """Uniform [0, 1) floats from runtime OS entropy.

  `seed=seed2=0` makes the kernel seed itself non-deterministically when it is
  created, whatever `tf.random.set_seed` says: a seed baked into the graph
  would be known to whoever built the computation (in TFF, the server).
  """
  return tf.raw_ops.RandomUniform(
      shape=tf.convert_to_tensor(shape, tf.int32), dtype=dtype, seed=0,
      seed2=0)


def fresh_normal(shape, dtype=tf.float32) -> tf.Tensor:
  """Standard normals from runtime OS entropy (see `fresh_uniform`)."""
  return tf.raw_ops.RandomStandardNormal(
      shape=tf.convert_to_tensor(shape, tf.int32), dtype=dtype, seed=0,
      seed2=0)


def fresh_int64(shape) -> tf.Tensor:
  """Uniform int64 over [int64 min, int64 max) from runtime OS entropy."""
  return tf.raw_ops.RandomUniformInt(
      shape=tf.convert_to_tensor(shape, tf.int32),
      minval=tf.constant(tf.int64.min, tf.int64),
      maxval=tf.constant(tf.int64.max, tf.int64), seed=0, seed2=0)


def index_in_range(index: tf.Tensor, bits: int) -> tf.Tensor:
  """Returns a bool tensor: whether each index is in [0, 2**bits)."""
  index = tf.convert_to_tensor(index)
  return tf.logical_and(
      index >= 0, tf.cast(index, tf.int64) < tf.constant(2**bits, tf.int64))


def split_groups(sizes: Sequence[int],
                 grouping: Grouping) -> list[tuple[int, int]]:
  """Splits a flat vector made of tensors of `sizes` into groups.

  Args:
    sizes: Number of elements of each tensor, in flattening order.
    grouping: `'tensor'` (one group per non-empty tensor), `'network'` (one
      group for everything) or a positive int G (each tensor split into
      `ceil(n / G)` contiguous groups of nearly equal size, none larger than
      G; the paper's SO-LR setting is G = 10**6).

  Returns:
    A list of `(start, end)` ranges of the concatenated flat vector.

  Raises:
    TypeError: If `grouping` is neither a str nor an int.
    ValueError: If `grouping` is an unknown string or a non-positive int.
  """
  check_grouping(grouping)
  groups = []
  offset = 0
  total = int(sum(sizes))
  if grouping == GROUPING_NETWORK:
    return [(0, total)] if total > 0 else []
  for size in sizes:
    size = int(size)
    if size == 0:
      continue
    if grouping == GROUPING_TENSOR:
      parts = 1
    else:
      parts = _ceil_div(size, grouping)
    bounds = [offset + (size * j) // parts for j in range(parts + 1)]
    groups.extend(zip(bounds[:-1], bounds[1:]))
    offset += size
  return groups


def check_grouping(grouping: Grouping) -> None:
  """Raises TypeError / ValueError if `grouping` is not a valid grouping."""
  if isinstance(grouping, bool) or not isinstance(
      grouping, (str, int, np.integer)):
    raise TypeError(
        "grouping must be 'tensor', 'network' or a positive int, found "
        f'{grouping!r}.')
  if isinstance(grouping, str):
    if grouping not in (GROUPING_TENSOR, GROUPING_NETWORK):
      raise ValueError(
          "grouping must be 'tensor', 'network' or a positive int, found "
          f'{grouping!r}.')
  elif grouping <= 0:
    raise ValueError(f'grouping must be a positive int, found {grouping!r}.')


def _group_key(seed, group):
  """Group `group`'s Philox key and high counter word (the wire format).

  The values of `tf.random.experimental.stateless_fold_in(seed, group,
  alg='philox')`, then `tf.random.stateless_uniform([2], seed=that,
  dtype=tf.int64, minval=None, maxval=None, alg='philox')` (word 0 as the
  key), from the same kernels in a fraction of TensorFlow's ops: graphs
  trace one group key per group, so the ops are most of a trace's cost.
  """
  seed_word = _philox_full_int(seed, tf.int32, [])  # fold_in's seed1.
  group_seed = tf.stack([seed_word, tf.cast(group, tf.int32)])
  key, counter_hi = tf.unstack(_philox_full_int(group_seed, tf.int64, [2]))
  return tf.bitcast(tf.expand_dims(key, 0), tf.uint64), counter_hi


def _philox_full_int(seed, dtype, shape):
  """`tf.random.stateless_uniform(shape, seed, dtype=dtype, minval=None,
  maxval=None, alg='philox')`: the seed scrambled into a key and counter as
  `random_ops_util._philox_scramble_seed` (and TF's kernels) do it."""
  mix = tf.raw_ops.StatelessRandomUniformFullIntV2(
      shape=tf.constant([4], tf.int32),
      key=tf.constant([_PHILOX_SCRAMBLE_KEY], tf.uint64),
      counter=tf.cast(seed, tf.uint64), alg=_PHILOX_ALG_ID, dtype=tf.uint32)
  low, high = tf.unstack(tf.cast(tf.reshape(mix, [2, 2]), tf.uint64), axis=1)
  key, counter_hi = tf.unstack(tf.bitwise.bitwise_or(
      low, tf.bitwise.left_shift(high, tf.constant(32, tf.uint64))))
  return tf.raw_ops.StatelessRandomUniformFullIntV2(
      shape=tf.constant(shape, tf.int32), key=tf.expand_dims(key, 0),
      counter=tf.stack([tf.constant(0, tf.uint64), counter_hi]),
      alg=_PHILOX_ALG_ID, dtype=dtype)


def _block_size(num_candidates: int, pdim: int, chunk_elements: int) -> int:
  per_block = max(1, chunk_elements // pdim)
  # Largest power of two <= per_block, so that it divides K = 2**bits.
  block = 2**int(math.floor(math.log2(per_block)))
  return min(block, num_candidates)


def _ceil_div(a: int, b: int) -> int:
  return -(-a // b)


def check_bits(bits):
  """Raises TypeError / ValueError unless `bits` is an int in [1, MAX_BITS]."""
  validation.check_int_in_range(bits, 'bits', 1, MAX_BITS)
