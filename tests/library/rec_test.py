"""Tests for tff_dprec.rec (the REC codec, plain TensorFlow)."""

import json
import math
import os

from absl.testing import parameterized
import numpy as np
from scipy import stats
import tensorflow as tf

from tff_dprec import rec

_GOLDEN = os.path.join(os.path.dirname(__file__), 'golden', 'rec_v1.json')


def _encode_many(value, *, prior_stddev, bits, num, seed_offset=0,
                 fixed_shared_seed=None):
  """Encodes `value` `num` times with distinct seeds; returns (seeds, idx)."""
  value = tf.constant(value, tf.float32)

  @tf.function
  def one(seed, selection_seed):
    return rec.encode(value, prior_stddev=prior_stddev, bits=bits, seed=seed,
                      selection_seed=selection_seed)

  seeds, indices = [], []
  for i in range(num):
    if fixed_shared_seed is None:
      seed = np.array([i + seed_offset, 17], np.int64)
    else:
      seed = np.array(fixed_shared_seed, np.int64)
    indices.append(int(one(seed, np.array([i + seed_offset, 99], np.int64))))
    seeds.append(seed)
  return seeds, np.array(indices)


def _decode_many(seeds, indices, *, prior_stddev, bits, dim):
  """The decoded candidates of (seed, index) pairs, stacked (one trace)."""

  @tf.function
  def one(index, seed):
    return rec.decode(index, prior_stddev=prior_stddev, bits=bits, dim=dim,
                      seed=seed)

  return np.stack([
      one(tf.constant(int(i), tf.int64), tf.constant(seed)).numpy()
      for seed, i in zip(seeds, indices)])


class GoldenVectorsTest(tf.test.TestCase):

  def test_decode_matches_golden_vectors(self):
    with open(_GOLDEN) as f:
      golden = json.load(f)
    self.assertEqual(golden['codec_version'], rec.CODEC_VERSION)
    for case in golden['decode']:
      x = rec.decode(case['index'], prior_stddev=case['prior_stddev'],
                     bits=case['bits'], dim=case['dim'],
                     seed=np.array(case['seed'], np.int64),
                     group=case['group'])
      # Bit-exact: a changed random stream must fail loudly.
      np.testing.assert_array_equal(
          x.numpy(), np.array(case['values'], np.float32), err_msg=str(case))

  def test_encode_matches_golden_vectors(self):
    with open(_GOLDEN) as f:
      golden = json.load(f)
    for case in golden['encode']:
      index = rec.encode(np.array(case['value'], np.float32),
                         prior_stddev=case['prior_stddev'], bits=case['bits'],
                         seed=np.array(case['seed'], np.int64),
                         selection_seed=np.array(case['selection_seed'],
                                                 np.int64))
      self.assertEqual(int(index), case['index'])


class GroupKeyTest(tf.test.TestCase):

  def test_equals_tensorflows_fold_in_and_philox_draw(self):
    # The wire format's definition (rec's docstring), through TensorFlow's
    # public API, against the leaner ops `_group_key` builds; extreme and
    # random seeds, in eager mode and traced.
    def reference(seed, group):
      group_seed = tf.random.experimental.stateless_fold_in(
          seed, tf.cast(group, tf.int32), alg='philox')
      words = tf.random.stateless_uniform(
          [2], seed=group_seed, minval=None, maxval=None, dtype=tf.int64,
          alg='philox')
      return tf.bitcast(words[:1], tf.uint64), words[1]

    both = tf.function(lambda seed, group: (reference(seed, group),
                                            rec._group_key(seed, group)))
    rng = np.random.default_rng(5)
    seeds = rng.integers(-2**63, 2**63 - 1, size=(40, 2), dtype=np.int64)
    seeds[:3] = [[0, 0], [-1, -1], [2**63 - 1, -2**63]]
    for i, seed in enumerate(seeds):
      group = [0, 1, 2**31 - 1][i % 3] if i < 6 else int(rng.integers(2**20))
      seed = tf.constant(seed)
      for (want_key, want_hi), (key, hi) in (
          (reference(seed, group), rec._group_key(seed, group)),
          both(seed, tf.constant(group, tf.int32))):
        self.assertEqual(key.dtype, tf.uint64)
        self.assertAllEqual(key, want_key)
        self.assertEqual(int(hi), int(want_hi))


class CodecTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(1, 3, 4, 5, 8, 1001)
  def test_decode_equals_candidate_block_rows(self, dim):
    seed = tf.constant([3, 7], tf.int64)
    block = rec.candidate_block(seed, 2, tf.constant(0, tf.int64), 64, dim)
    for k in (0, 1, 31, 63):
      x = rec.decode(k, prior_stddev=0.25, bits=6, dim=dim, seed=seed, group=2)
      np.testing.assert_array_equal(x.numpy(), block.numpy()[k, :dim] * 0.25)

  def test_decode_is_deterministic(self):
    seed = tf.constant([5, 6], tf.int64)
    a = rec.decode(9, prior_stddev=1.0, bits=4, dim=10, seed=seed)
    b = tf.function(lambda: rec.decode(9, prior_stddev=1.0, bits=4, dim=10,
                                       seed=seed))()
    np.testing.assert_array_equal(a.numpy(), b.numpy())

  def test_groups_and_seeds_give_different_candidates(self):
    base = rec.decode(3, prior_stddev=1.0, bits=4, dim=8, seed=[1, 1])
    other_group = rec.decode(3, prior_stddev=1.0, bits=4, dim=8, seed=[1, 1],
                             group=1)
    other_seed = rec.decode(3, prior_stddev=1.0, bits=4, dim=8, seed=[2, 1])
    self.assertFalse(np.allclose(base, other_group))
    self.assertFalse(np.allclose(base, other_seed))

  @parameterized.parameters(64, 10**9)
  def test_encoder_picks_the_candidate_it_weighed(self, chunk_elements):
    # A value aligned with candidate j gives it log-weight 60 s = 30; the
    # others get N(0, (60 s)^2 / dim) = N(0, 1.5^2): Gumbel-max picks j except
    # with probability ~e^-20. Small chunks put j in a later block, so block
    # indexing must match decode's random access.
    seed = tf.constant([42, 43], tf.int64)
    dim, bits, s = 400, 8, 0.5
    for j in (0, 37, 255):
      target = rec.decode(j, prior_stddev=s, bits=bits, dim=dim, seed=seed)
      value = 60.0 * s * target / tf.reduce_sum(tf.square(target / s))
      index = rec.encode(value, prior_stddev=s, bits=bits, seed=seed,
                         selection_seed=[j, 1], chunk_elements=chunk_elements)
      self.assertEqual(int(index), j)

  def test_chunking_does_not_change_the_index(self):
    value = tf.constant(np.linspace(-0.5, 0.5, 13), tf.float32)
    indices = {
        int(rec.encode(value, prior_stddev=0.3, bits=9, seed=[1, 2],
                       selection_seed=[3, 4], chunk_elements=c))
        for c in (16, 100, 1000, 10**7)
    }
    self.assertLen(indices, 1)

  def test_encode_is_deterministic_given_selection_seed(self):
    value = tf.constant([0.1, -0.3, 0.2], tf.float32)
    a = rec.encode(value, prior_stddev=0.5, bits=7, seed=[1, 2],
                   selection_seed=[5, 5])
    b = rec.encode(value, prior_stddev=0.5, bits=7, seed=[1, 2],
                   selection_seed=[5, 5])
    self.assertEqual(int(a), int(b))

  def test_selection_seeds_change_the_index_for_one_shared_seed(self):
    # With value = 0 the index is uniform over 128: 20 equal draws happen with
    # probability 128^-19.
    _, indices = _encode_many(np.zeros(4), prior_stddev=1.0, bits=7, num=20,
                              fixed_shared_seed=[1, 2])
    self.assertGreater(len(set(indices.tolist())), 1)

  def test_fresh_selection_randomness_without_selection_seed(self):
    value = tf.zeros([4], tf.float32)
    indices = {
        int(rec.encode(value, prior_stddev=1.0, bits=10, seed=[1, 2]))
        for _ in range(10)
    }
    # All 10 equal has probability 1024^-9.
    self.assertGreater(len(indices), 1)

  def test_zero_value_gives_uniform_indices(self):
    bits, num = 4, 3200
    _, indices = _encode_many(np.zeros(3), prior_stddev=1.0, bits=bits,
                              num=num)
    counts = np.bincount(indices, minlength=2**bits)
    chi2 = stats.chisquare(counts).statistic
    # Fails by chance with probability 1e-6.
    self.assertLess(chi2, stats.chi2.ppf(1 - 1e-6, df=2**bits - 1))

  def test_zero_value_decoded_variance_is_prior_variance(self):
    s, num, dim = 0.7, 2000, 3
    seeds, indices = _encode_many(np.zeros(dim), prior_stddev=s, bits=6,
                                  num=num)
    samples = _decode_many(seeds, indices, prior_stddev=s, bits=6, dim=dim)
    var = samples.var(axis=0, ddof=1)
    # Sample variance of n normals has standard error s^2 sqrt(2/(n-1));
    # 5 standard errors: fails by chance with probability ~1e-6 per coord.
    tol = 5 * s**2 * math.sqrt(2.0 / (num - 1))
    np.testing.assert_allclose(var, np.full(dim, s**2), atol=tol)
    np.testing.assert_allclose(samples.mean(axis=0), np.zeros(dim),
                               atol=5 * s / math.sqrt(num))

  def test_decoded_sample_mean_within_importance_sampling_bias(self):
    # Paper eq. (5): |E_q~[zeta] - E_q[zeta]| <= 12/K exp(D_2(q||p)) for
    # |zeta| < 1, with D_2 = ||v||^2 / s^2. zeta_j(x) = tanh(x_j / s).
    s, bits, num = 1.0, 8, 3000
    value = np.array([0.4, -0.3, 0.0], np.float32)
    seeds, indices = _encode_many(value, prior_stddev=s, bits=bits, num=num,
                                  seed_offset=10**6)
    samples = _decode_many(seeds, indices, prior_stddev=s, bits=bits, dim=3)
    zeta = np.tanh(samples / s)
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    expected = np.array([
        np.sum(weights * np.tanh((v + s * nodes) / s)) / np.sqrt(2 * np.pi)
        for v in value
    ])
    bias_bound = 12.0 / 2**bits * math.exp(np.sum(value**2) / s**2)
    standard_error = zeta.std(axis=0, ddof=1) / math.sqrt(num)
    # Bias bound plus 5 standard errors: by chance ~1e-6 per coordinate.
    np.testing.assert_array_less(
        np.abs(zeta.mean(axis=0) - expected), bias_bound + 5 * standard_error)
    # And the decoded mean is clearly pulled towards the value (not 0).
    self.assertGreater(samples.mean(axis=0)[0], 0.2)
    self.assertLess(samples.mean(axis=0)[1], -0.1)

  def test_runs_inside_tf_function_with_symbolic_seed(self):

    @tf.function(input_signature=[tf.TensorSpec([2], tf.int64)])
    def roundtrip(seed):
      value = tf.constant([0.2, 0.1], tf.float32)
      i = rec.encode(value, prior_stddev=0.5, bits=5, seed=seed)
      return i, rec.decode(i, prior_stddev=0.5, bits=5, dim=2, seed=seed)

    i, x = roundtrip(tf.constant([1, 2], tf.int64))
    self.assertBetween(int(i), 0, 31)
    self.assertEqual(x.shape, (2,))

  def test_index_in_range(self):
    self.assertAllEqual(
        rec.index_in_range(tf.constant([-1, 0, 127, 128]), 7),
        [False, True, True, False])


class PlanGroupsTest(tf.test.TestCase, parameterized.TestCase):

  def test_tensor_grouping(self):
    self.assertEqual(rec.split_groups([6, 0, 4], 'tensor'), [(0, 6), (6, 10)])

  def test_network_grouping(self):
    self.assertEqual(rec.split_groups([6, 0, 4], 'network'), [(0, 10)])

  def test_stackoverflow_lr_grouping(self):
    groups = rec.split_groups([10000 * 500, 500], 10**6)
    self.assertLen(groups, 6)
    self.assertEqual([e - s for s, e in groups], [10**6] * 5 + [500])

  def test_int_grouping_covers_everything_with_bounded_groups(self):
    groups = rec.split_groups([7, 10, 1], 3)
    self.assertEqual(groups[0][0], 0)
    self.assertEqual(groups[-1][1], 18)
    for (_, end), (start, _) in zip(groups[:-1], groups[1:]):
      self.assertEqual(end, start)
    self.assertTrue(all(0 < e - s <= 3 for s, e in groups))

  @parameterized.parameters(('layer', ValueError), (0, ValueError),
                            (-3, ValueError), (True, TypeError),
                            (1.5, TypeError), (None, TypeError))
  def test_bad_grouping(self, grouping, error):
    with self.assertRaisesRegex(error, 'grouping'):
      rec.split_groups([3], grouping)


class ArgumentErrorsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ('bits_zero', dict(bits=0), ValueError, 'bits'),
      ('bits_too_large', dict(bits=25), ValueError, 'bits'),
      ('bits_bool', dict(bits=True), TypeError, 'bits'),
      ('bits_float', dict(bits=7.0), TypeError, 'bits'),
      ('stddev_zero', dict(prior_stddev=0.0), ValueError, 'prior_stddev'),
      ('stddev_nan', dict(prior_stddev=float('nan')), ValueError,
       'prior_stddev'),
      ('stddev_str', dict(prior_stddev='1'), TypeError, 'prior_stddev'),
      ('chunk_zero', dict(chunk_elements=0), ValueError, 'chunk_elements'),
  )
  def test_encode_rejects(self, override, error, name):
    kwargs = dict(prior_stddev=1.0, bits=4, seed=[1, 2])
    kwargs.update(override)
    with self.assertRaisesRegex(error, name):
      rec.encode(tf.zeros([3]), **kwargs)

  def test_encode_rejects_matrix_value(self):
    with self.assertRaisesRegex(ValueError, 'value must be a vector'):
      rec.encode(tf.zeros([3, 2]), prior_stddev=1.0, bits=4, seed=[1, 2])

  def test_decode_rejects_bad_dim(self):
    with self.assertRaisesRegex(ValueError, 'dim'):
      rec.decode(0, prior_stddev=1.0, bits=4, dim=0, seed=[1, 2])


class GumbelPrecisionTest(tf.test.TestCase):
  """Selection is exact at the largest bit-width (float64 Gumbel noise)."""

  def test_noise_is_float64_without_ties_at_max_bits(self):
    # float32 uniforms have 2^24 values below 1: among 2^24 draws the top
    # value ties with probability ~1/2 and argmax favours low indices. With
    # float64 a tie at the maximum has probability ~2^-29 per draw.
    k = 2**rec.MAX_BITS
    for i in range(3):
      noise = rec.gumbel_noise([k], tf.constant([i, 11], tf.int64))
      self.assertEqual(noise.dtype, tf.float64)
      top = tf.reduce_max(noise)
      self.assertEqual(int(tf.reduce_sum(tf.cast(noise == top, tf.int32))), 1)
    fresh = rec.gumbel_noise([1000])
    self.assertEqual(fresh.dtype, tf.float64)

  def test_uniform_selection_at_max_bits(self):
    # Equal weights: P(index < K/2) = 1/2. 40 draws: se = 0.079; float32
    # noise gave 0.76 (3.3 se away). Bound |p - 1/2| < 0.25 fails by chance
    # with probability < 0.2% at the right distribution.
    k = 2**rec.MAX_BITS
    log_weights = tf.zeros([k])
    select = tf.function(lambda s: rec.gumbel_max(log_weights, s))
    low = [int(select(tf.constant([i, 5], tf.int64))) < k // 2
           for i in range(40)]
    self.assertLess(abs(np.mean(low) - 0.5), 0.25)


if __name__ == '__main__':
  tf.test.main()
