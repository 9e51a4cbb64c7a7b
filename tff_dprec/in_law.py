"""DP-REC's decoded update drawn exactly in law (simulation only), plain TF.

SIMULATION ONLY, NOT A PROTOCOL: these functions return what the server of
DP-REC decodes, drawn without candidates, seeds or messages; a client that
used them would send floats. They exist so that studies can train with
DP-REC's decoded updates at a cost close to DP-FedAvg's.

The law. Fix a group with clipped update v, prior standard deviation s and
K = 2**bits candidates z_1..z_K ~ N(0, I_d) (the codec's candidates over s).
Write u = v / |v| and z_k = xi_k u + eta_k with xi_k = <z_k, u> and
eta_k = (I - u u^T) z_k. Then xi_1..xi_K are i.i.d. N(0, 1), the eta_k are
i.i.d. N(0, I - u u^T) and independent of the xi's (jointly Gaussian,
uncorrelated). The codec's log-weight of candidate k is <z_k, v> / s =
(|v| / s) xi_k, so its index k* is a function of the xi's and of the
client's Gumbel noise alone, and the decoded candidate is

  s z_{k*} = s (xi_{k*} u + eta_{k*}),

where, given k* and the xi's, eta_{k*} ~ N(0, I - u u^T). Hence the decoded
candidate has exactly the law of

  s (xi_{k*} u + g - <g, u> u),   g ~ N(0, I_d) independent of the rest,

with k* drawn by Gumbel-max on (|v| / s) xi_k in float64, as the codec draws
it. The selection (|v|, the xi's, the Gumbel noise) is computed in float64;
g and the vector arithmetic in float32, the precision of the codec's
candidates and of its decoded update. At v = 0 the index is uniform and the
law is that of s g. This costs K + d normals per group instead of the
codec's K * d. Groups are drawn independently given the clipped update, as
the codec's are (their candidates come from disjoint Philox streams).
docs/PRIVACY.md, section 10, gives the argument in full;
`tests/library/in_law_test.py` compares the two laws.

The equality is with the idealised codec, whose candidates are i.i.d.
normals: the model that the accountant (and every proof in docs/PRIVACY.md)
also makes of Philox. The codec computes its log-weights in float32; this
module computes them in float64.

Randomness is fresh OS entropy on every call (`rec.fresh_normal`,
`rec.gumbel_noise`) unless a test passes a `seed`.
"""

from typing import Optional

import tensorflow as tf

from tff_dprec import message
from tff_dprec import rec
from tff_dprec import validation

# Stream tags that split a test seed into the draws of one group.
_XI, _GUMBEL, _ORTHOGONAL = 1, 2, 3


def sample_group(value: tf.Tensor, *, prior_stddev: float, bits: int,
                 seed: Optional[tf.Tensor] = None) -> tf.Tensor:
  """Draws `rec.decode(rec.encode(value, ...), ...)` in law.

  Args:
    value: A float32 vector of static length d, the (clipped) mean of q.
    prior_stddev: The prior standard deviation s; positive.
    bits: Index bit-width b of the simulated codec; K = 2**b.
    seed: `None` (the default: fresh OS entropy) or, in tests only, a
      shape-[2] int64 seed from which every draw of the call derives.

  Returns:
    A float32 vector of length d.

  Raises:
    TypeError, ValueError: For invalid `bits` or `prior_stddev`, or a
      `value` without static length.
  """
  rec.check_bits(bits)
  validation.check_positive_number(prior_stddev, 'prior_stddev')
  value = tf.convert_to_tensor(value, tf.float32)
  if value.shape.rank != 1 or value.shape[0] is None:
    raise ValueError(
        f'value must be a vector of static length, found shape {value.shape}.')
  norm = tf.norm(tf.cast(value, tf.float64))
  xi = _normal([2**bits], tf.float64, _fold(seed, _XI))
  log_weights = norm / prior_stddev * xi
  index = tf.argmax(log_weights + rec.gumbel_noise(
      tf.shape(log_weights), _fold(seed, _GUMBEL)))
  # s (xi_k* u + g - <g, u> u) = s g + s (xi_k* - <g, u>) u, with u = v / |v|
  # (u = 0 at v = 0): one scalar coefficient, then one pass over d.
  inverse_norm = tf.cast(tf.math.divide_no_nan(
      tf.constant(1.0, tf.float64), norm), tf.float32)
  g = _normal(tf.shape(value), tf.float32, _fold(seed, _ORTHOGONAL))
  along_u = (tf.cast(tf.gather(xi, index), tf.float32)
             - tf.tensordot(g, value, 1) * inverse_norm)
  return prior_stddev * g + (prior_stddev * along_u * inverse_norm) * value


def sample_update(value, layout: message.MessageLayout, *,
                  noise_stddev: float, l2_clip: Optional[float],
                  insecure_test_seed: Optional[int] = None):
  """Draws a client's decoded DP-REC update in law (the server's view).

  The update is prepared as `message.encode_update` prepares it (a
  non-finite update becomes zero, then the whole update is clipped to
  `l2_clip`), and each group of `layout` is drawn with `sample_group`.

  Args:
    value: The update, a structure of tensors matching `layout.value_specs`.
    layout: The layout of the simulated messages (groups and bits).
    noise_stddev: The prior standard deviation s; positive.
    l2_clip: The L2 norm to clip the whole update to, or `None`.
    insecure_test_seed: TESTS ONLY, NOT PRIVATE: an int (or an int64 scalar
      tensor) makes the draws functions of this value and the clipped
      update, as `message.encode_update` does.

  Returns:
    A structure of tensors matching `layout.value_specs`.

  Raises:
    TypeError, ValueError: For an invalid `noise_stddev`, `l2_clip` or
      `insecure_test_seed`.
  """
  validation.check_positive_number(noise_stddev, 'noise_stddev')
  if l2_clip is not None:
    validation.check_positive_number(l2_clip, 'l2_clip')
  insecure_test_seed = message.checked_test_seed(insecure_test_seed)
  flat = message.prepared_update(value, layout, l2_clip)
  if insecure_test_seed is None:
    seeds = [None] * layout.num_groups
  else:
    _, seeds = message.insecure_test_seeds(flat, insecure_test_seed,
                                           layout.num_groups)
  parts = [
      sample_group(flat[start:end], prior_stddev=noise_stddev,
                   bits=layout.bits, seed=seeds[g])
      for g, (start, end) in enumerate(layout.groups)]
  if not parts:
    return layout.unflatten(tf.zeros([layout.num_elements], tf.float32))
  return layout.unflatten(tf.concat(parts, axis=0))


def _fold(seed, tag):
  if seed is None:
    return None
  return tf.cast(tf.random.experimental.stateless_fold_in(
      tf.convert_to_tensor(seed, tf.int64), tag, alg='philox'), tf.int64)


def _normal(shape, dtype, seed):
  """Standard normals: fresh OS entropy, or from a test seed."""
  if seed is None:
    return rec.fresh_normal(shape, dtype)
  return tf.random.stateless_normal(shape, seed=seed, dtype=dtype,
                                    alg='philox')
