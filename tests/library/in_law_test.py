"""Tests for tff_dprec.in_law and aggregators.dp_rec_in_law.

The in-law draws are compared with the real codec's decoded candidates in
law: the projection on u = v / |v| (two-sample Kolmogorov-Smirnov and
means), the orthogonal part (mean and covariance against I - u u^T) and the
mean of the decoded update, each with a tolerance from its standard error.
Every sample comes from fixed seeds, so each test is deterministic; the
tolerances are chosen so that a correct sampler would fail them by chance
with probability below about 1e-6 per check.
"""

import collections
import math
from unittest import mock

from absl.testing import parameterized
import numpy as np
from scipy import stats
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import in_law
from tff_dprec import learning
from tff_dprec import message as message_lib
from tff_dprec import rec
from tff_dprec import simulation
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import dp_rec_in_law
from tff_dprec.aggregators import dp_rec_mean

_DRAWS = 3000
# Two-sided normal quantile at 1e-6, and the Kolmogorov-Smirnov constant at
# the same level: c(alpha) = sqrt(-ln(alpha / 2) / 2).
_Z = 4.9
_KS_C = math.sqrt(-math.log(1e-6 / 2) / 2)
# Bonferroni over up to 64 coordinates, or 64^2 covariance entries.
_Z_COORDS = 5.6
_Z_ENTRIES = 6.3
# Seed streams: the codec's candidates and selections, and the simulation's,
# never share a seed.
_CODEC, _LAW, _SELECTION_STREAM = 11, 500, 10**6


def _direction(dim, seed):
  u = np.random.default_rng(seed).normal(size=dim)
  return (u / np.linalg.norm(u)).astype(np.float32)


@tf.function(reduce_retracing=True)
def _codec_draws(value, prior_stddev, bits, n, stream):
  """n decoded candidates of the real codec (encode, then decode)."""
  dim = value.shape[0]

  def body(i, out):
    seed = tf.stack([tf.cast(i, tf.int64), stream])
    # The selection noise from a stream of its own.
    selection = tf.stack([tf.cast(i, tf.int64), stream + _SELECTION_STREAM])
    index = rec.encode(value, prior_stddev=prior_stddev, bits=bits,
                       seed=seed, selection_seed=selection)
    return i + 1, out.write(i, rec.decode(
        index, prior_stddev=prior_stddev, bits=bits, dim=dim, seed=seed))

  return tf.while_loop(lambda i, _: i < n, body,
                       (0, tf.TensorArray(tf.float32, n)))[1].stack()


@tf.function(reduce_retracing=True)
def _law_draws(value, prior_stddev, bits, n, stream):
  """n draws of `in_law.sample_group`."""
  def body(i, out):
    seed = tf.stack([tf.cast(i, tf.int64), stream])
    return i + 1, out.write(i, in_law.sample_group(
        value, prior_stddev=prior_stddev, bits=bits, seed=seed))

  return tf.while_loop(lambda i, _: i < n, body,
                       (0, tf.TensorArray(tf.float32, n)))[1].stack()


def _draws(sampler, value, s, bits, n=_DRAWS, stream=_CODEC):
  return sampler(tf.constant(value), s, bits, n,
                 tf.constant(stream, tf.int64)).numpy().astype(np.float64)


def _selected_xi(clip_ratio, candidates, draws, seed=0):
  """xi_k* of the selection law, by NumPy (exact draws of the index)."""
  rng = np.random.default_rng(seed)
  out = []
  for start in range(0, draws, 20000):
    n = min(20000, draws - start)
    xi = rng.standard_normal((n, candidates))
    gumbel = rng.gumbel(size=(n, candidates))
    out.append(xi[np.arange(n), np.argmax(clip_ratio * xi + gumbel, axis=1)])
  return np.concatenate(out)


def _ks_limit(n, m):
  return _KS_C * math.sqrt((n + m) / (n * m))


class LawChecks:
  """Assertions comparing two samples of decoded candidates in law."""

  def assert_projection_law(self, a, b, u, s):
    pa, pb = a @ u / s, b @ u / s
    ks = stats.ks_2samp(pa, pb).statistic
    self.assertLess(ks, _ks_limit(len(pa), len(pb)))
    se = math.sqrt(pa.var() / len(pa) + pb.var() / len(pb))
    self.assertLess(abs(pa.mean() - pb.mean()), _Z * se)

  def assert_orthogonal_law(self, x, u, s):
    """The part orthogonal to u is N(0, I - u u^T) (mean and covariance)."""
    n, dim = x.shape
    w = x / s - np.outer(x @ u / s, u)
    projector = np.eye(dim) - np.outer(u, u)
    mean_se = np.sqrt(np.diag(projector) / n)
    self.assertLess(np.max(np.abs(w.mean(axis=0)) / mean_se), _Z_COORDS)
    cov = np.cov(w, rowvar=False)
    diag = np.diag(projector)
    cov_se = np.sqrt((np.outer(diag, diag) + projector**2) / n)
    self.assertLess(np.max(np.abs(cov - projector) / cov_se), _Z_ENTRIES)

  def assert_same_mean(self, a, b):
    se = np.sqrt(a.var(axis=0) / len(a) + b.var(axis=0) / len(b))
    self.assertLess(np.max(np.abs(a.mean(axis=0) - b.mean(axis=0)) / se),
                    _Z_COORDS)


class SampleGroupTest(tf.test.TestCase, parameterized.TestCase, LawChecks):

  @parameterized.named_parameters(
      ('d8_c0.5_1bit', 8, 0.5, 1),
      ('d8_c2_4bits', 8, 2.0, 4),
      ('d8_c3_7bits', 8, 3.0, 7),
      ('d64_c1_2bits', 64, 1.0, 2),
      ('d64_c2.5_5bits', 64, 2.5, 5),
      ('d64_c3.5_6bits', 64, 3.5, 6),
      ('d64_c2_3bits', 64, 2.0, 3),
  )
  def test_equal_in_law_to_the_codec(self, dim, clip_ratio, bits):
    s = 0.3
    u = _direction(dim, seed=dim + bits)
    value = clip_ratio * s * u
    real = _draws(_codec_draws, value, s, bits)
    law = _draws(_law_draws, value, s, bits, stream=_LAW)
    self.assert_projection_law(real, law, u, s)
    self.assert_orthogonal_law(real, u, s)
    self.assert_orthogonal_law(law, u, s)
    self.assert_same_mean(real, law)

  def test_the_checks_can_fail(self):
    """A log-weight scale 30% off, noise left along u, or orthogonal noise
    25% too large in variance, is rejected."""
    s, bits, u = 0.3, 4, _direction(8, seed=3)
    value = 2.0 * s * u
    real = _draws(_codec_draws, value, s, bits)
    scaled = _draws(_law_draws, 1.3 * value, s, bits, stream=_LAW)
    with self.assertRaises(AssertionError):
      self.assert_projection_law(real, scaled, u, s)
    law = _draws(_law_draws, value, s, bits, stream=_LAW)
    unprojected = law + s * np.outer(
        np.random.default_rng(0).normal(size=len(law)), u)
    with self.assertRaises(AssertionError):
      self.assert_projection_law(real, unprojected, u, s)
    with self.assertRaises(AssertionError):
      self.assert_orthogonal_law(law + s * np.random.default_rng(1).normal(
          size=law.shape) * 0.5, u, s)

  @parameterized.named_parameters(('c1_2bits', 1.0, 2), ('c3_7bits', 3.0, 7))
  def test_selected_projection_moments(self, clip_ratio, bits):
    """E[xi_k*] and E[xi_k*^2] against a NumPy Monte Carlo of the selection
    law (softmax of c xi over K normals): detects a log-weight scale about
    10% off (several standard errors here)."""
    n, s = 12000, 0.5
    u = _direction(2, seed=1)
    law = _draws(_law_draws, clip_ratio * s * u, s, bits, n=n, stream=_LAW)
    projection = law @ u / s
    reference = _selected_xi(clip_ratio, 2**bits, draws=2 * 10**5)
    for power in (1, 2):
      got, want = projection**power, reference**power
      se = math.sqrt(got.var() / len(got) + want.var() / len(want))
      self.assertLess(abs(got.mean() - want.mean()), _Z * se)

  def test_unseeded_draws_follow_the_same_law(self):
    """The production path (no seed): fresh normals and Gumbel noise,
    here replaced by seeded generators of the same laws, give the codec's
    law."""
    counter = iter(range(10**6))

    def seeded_normal(shape, dtype=tf.float32):
      return tf.random.stateless_normal(shape, seed=[next(counter), 77],
                                        dtype=dtype)

    def seeded_uniform(shape, dtype=tf.float32):
      return tf.random.stateless_uniform(shape, seed=[next(counter), 78],
                                         dtype=dtype)

    s, bits, u = 0.3, 4, _direction(8, seed=5)
    value = tf.constant(2.0 * s * u)
    with mock.patch.object(rec, 'fresh_normal', seeded_normal), \
        mock.patch.object(rec, 'fresh_uniform', seeded_uniform):
      law = np.array([in_law.sample_group(value, prior_stddev=s, bits=bits)
                      for _ in range(600)], np.float64)
    real = _draws(_codec_draws, value.numpy(), s, bits, n=600)
    self.assert_projection_law(real, law, u, s)
    self.assert_orthogonal_law(law, u, s)

  def test_zero_value_is_the_prior(self):
    s, dim = 0.7, 8
    law = _draws(_law_draws, np.zeros(dim, np.float32), s, 5)
    self.assertLess(np.max(np.abs(law.mean(axis=0)) /
                           (s / math.sqrt(_DRAWS))), _Z_COORDS)
    cov_se = s**2 * np.sqrt((1 + np.eye(dim)) / _DRAWS)
    self.assertLess(np.max(np.abs(np.cov(law, rowvar=False) -
                                  s**2 * np.eye(dim)) / cov_se), _Z_ENTRIES)

  def test_seeded_draws_repeat_and_fresh_ones_differ(self):
    value = tf.constant([0.1, -0.2, 0.3])
    seed = tf.constant([5, 6], tf.int64)
    first = in_law.sample_group(value, prior_stddev=0.2, bits=3, seed=seed)
    again = in_law.sample_group(value, prior_stddev=0.2, bits=3, seed=seed)
    self.assertAllEqual(first, again)
    fresh = [in_law.sample_group(value, prior_stddev=0.2, bits=3)
             for _ in range(2)]
    self.assertNotAllEqual(fresh[0], fresh[1])

  @parameterized.named_parameters(
      ('bits', dict(bits=0), ValueError, 'bits'),
      ('stddev', dict(prior_stddev=-1.0), ValueError, 'prior_stddev'),
      ('stddev_type', dict(prior_stddev='1'), TypeError, 'prior_stddev'),
  )
  def test_rejects(self, override, error, name):
    kwargs = dict(prior_stddev=0.1, bits=3)
    kwargs.update(override)
    with self.assertRaisesRegex(error, name):
      in_law.sample_group(tf.zeros([4]), **kwargs)

  def test_rejects_value_without_static_length(self):
    with self.assertRaisesRegex(ValueError, 'static length'):
      in_law.sample_group(tf.zeros([2, 2]), prior_stddev=0.1, bits=3)


_SPECS = collections.OrderedDict(
    a=tf.TensorSpec([3], tf.float32), b=tf.TensorSpec([2, 3], tf.float32))


def _layout(grouping, bits=3):
  return message_lib.MessageLayout.from_value_type(_SPECS, bits=bits,
                                                   grouping=grouping)


@tf.function(reduce_retracing=True)
def _update_draws(sampler, flat_value, n):
  def body(i, out):
    return i + 1, out.write(i, sampler(flat_value, tf.cast(i, tf.int64)))
  return tf.while_loop(lambda i, _: i < n, body,
                       (0, tf.TensorArray(tf.float32, n)))[1].stack()


def _update_samplers(layout, s, clip):
  """(real, in law): flat value, test seed -> flat decoded update."""
  def real(flat, seed):
    value = layout.unflatten(flat)
    sent = message_lib.encode_update(value, layout, noise_stddev=s,
                                     l2_clip=clip, insecure_test_seed=seed)
    return layout.flatten(message_lib.decode_message(
        sent['seed'], sent['indices'], layout, noise_stddev=s))

  def law(flat, seed):
    return layout.flatten(in_law.sample_update(
        layout.unflatten(flat), layout, noise_stddev=s, l2_clip=clip,
        insecure_test_seed=seed + 2**40))

  return real, law


class SampleUpdateTest(tf.test.TestCase, parameterized.TestCase, LawChecks):

  @parameterized.named_parameters(
      ('tensor', 'tensor'), ('network', 'network'), ('chunks', 4))
  def test_equal_in_law_to_the_codec(self, grouping):
    layout = _layout(grouping)
    s, clip = 0.5, 1.0  # c = 2; the update's norm is 2: clipping halves it.
    flat = np.concatenate([_direction(3, 1), _direction(6, 2)]).astype(
        np.float32) * math.sqrt(2)
    real_fn, law_fn = _update_samplers(layout, s, clip)
    real = _update_draws(real_fn, flat, _DRAWS).numpy().astype(np.float64)
    law = _update_draws(law_fn, flat, _DRAWS).numpy().astype(np.float64)
    clipped = flat.astype(np.float64) / 2
    parts = {'real': [], 'law': []}
    for start, end in layout.groups:
      part = clipped[start:end]
      u = part / np.linalg.norm(part)
      self.assert_projection_law(real[:, start:end], law[:, start:end], u, s)
      for name, x in (('real', real[:, start:end]), ('law', law[:, start:end])):
        self.assert_orthogonal_law(x, u, s)
        parts[name].append(x / s)
    self.assert_same_mean(real, law)
    # Groups are independent given the clipped update, in both: every
    # cross-covariance between two groups' coordinates is 0 (each has
    # variance at most 1, so SE at most 1 / sqrt(n)).
    for name, groups in parts.items():
      for a, b in zip(groups, groups[1:]):
        cross = (a - a.mean(axis=0)).T @ (b - b.mean(axis=0)) / len(a)
        self.assertLess(np.max(np.abs(cross)) * math.sqrt(len(a)),
                        _Z_ENTRIES, name)

  def test_non_finite_update_is_the_zero_update(self):
    layout = _layout('tensor')
    zeros = collections.OrderedDict(a=tf.zeros([3]), b=tf.zeros([2, 3]))
    for bad in (float('nan'), float('inf')):
      broken = collections.OrderedDict(
          a=tf.constant([1.0, bad, 0.0]), b=tf.ones([2, 3]))
      draws = [in_law.sample_update(v, layout, noise_stddev=0.3, l2_clip=1.0,
                                    insecure_test_seed=7)
               for v in (broken, zeros)]
      tf.nest.map_structure(self.assertAllEqual, draws[0], draws[1])

  def test_no_groups(self):
    layout = message_lib.MessageLayout.from_value_type(
        [tf.TensorSpec([0], tf.float32)], bits=2)
    out = in_law.sample_update([tf.zeros([0])], layout, noise_stddev=0.1,
                               l2_clip=1.0)
    self.assertEqual(out[0].shape, [0])


_STRUCT = tff.to_type(collections.OrderedDict(
    a=tff.TensorType(np.float32, [3]), b=tff.TensorType(np.float32, [2, 3])))


class FactoryTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ('stddev', dict(noise_stddev=0.0), ValueError, 'noise_stddev'),
      ('clip', dict(l2_clip=-1.0), ValueError, 'l2_clip'),
      ('clip_none', dict(l2_clip=None), TypeError,
       'l2_clip must be a positive number, found None: '
       'DpRecInLawSumFactory'),
      ('bits', dict(bits=25), ValueError, 'bits'),
      ('grouping', dict(grouping='layer'), ValueError, 'grouping'),
      ('test_seed', dict(insecure_test_seed=1.5), TypeError,
       'insecure_test_seed'),
  )
  def test_rejects(self, override, error, name):
    kwargs = dict(noise_stddev=0.1, l2_clip=1.0)
    kwargs.update(override)
    with self.assertRaisesRegex(error, name):
      dp_rec_in_law.DpRecInLawSumFactory(**kwargs)

  def test_same_settings_and_accounting_as_the_protocol(self):
    factory = dp_rec_in_law.DpRecInLawSumFactory(
        noise_stddev=0.25, l2_clip=0.5, bits=5, grouping='tensor')
    real = dp_rec.DpRecSumFactory(noise_stddev=0.25, l2_clip=0.5, bits=5)
    self.assertEqual(factory.dp_event(_STRUCT), real.dp_event(_STRUCT))
    self.assertEqual(factory.layout(_STRUCT), real.layout(_STRUCT))
    self.assertEqual(factory.clip_ratio, 2.0)
    self.assertFalse(factory.record_messages)
    self.assertEqual(
        repr(factory), "DpRecInLawSumFactory(noise_stddev=0.25, l2_clip=0.5, "
        "bits=5, grouping='tensor')")

  def test_type_signature_and_measurements_match_the_protocol(self):
    in_law_process = dp_rec_in_law.DpRecInLawSumFactory(
        noise_stddev=0.1, l2_clip=1.0, bits=6).create(_STRUCT)
    real_process = dp_rec.DpRecSumFactory(
        noise_stddev=0.1, l2_clip=1.0, bits=6).create(_STRUCT)
    tff.test.assert_types_equivalent(in_law_process.next.type_signature,
                                     real_process.next.type_signature)

  def test_multi_tensor_sum_has_the_codec_law(self):
    """Through TFF, a round of 100 clients with updates along one direction,
    clipped (norm 0.6 to 0.3, s = 0.1: c = 3): the in-law sum and the
    codec's have the same projection on that direction, far from the
    unclipped or the noise-free sums."""
    clients, s, clip = 100, 0.1, 0.3
    rng = np.random.default_rng(4)
    u = _direction(9, seed=6).astype(np.float64)
    values = []
    for _ in range(clients):  # Distinct values: distinct test seeds.
      v = u * 0.6 + rng.normal(size=9) * 1e-3
      values.append(collections.OrderedDict(
          a=v[:3].astype(np.float32), b=v[3:].reshape(2, 3).astype(
              np.float32)))
    settings = dict(noise_stddev=s, l2_clip=clip, bits=4,
                    insecure_test_seed=3)
    projections = {}
    for name, cls in (('law', dp_rec_in_law.DpRecInLawSumFactory),
                      ('real', dp_rec.DpRecSumFactory)):
      process = cls(**settings, grouping='network').create(_STRUCT)
      output = process.next(process.initialize(), values)
      total = np.concatenate([np.ravel(output.result[k]) for k in ('a', 'b')])
      projections[name] = total @ u
      if name == 'law':
        layout = cls(**settings, grouping='network').layout(_STRUCT)
        self.assertEqual(output.measurements, collections.OrderedDict(
            upload_bits=clients * layout.message_bits, num_messages=clients,
            rejected_messages=0))
    # Per client <decoded, u> = s xi_k* (variance at most s^2); the sums
    # differ by at most _Z_COORDS SEs of a difference of two such sums.
    reference = _selected_xi(clip / s, 16, draws=2 * 10**5)
    expected = clients * s * reference.mean()
    se = s * math.sqrt(2 * clients * reference.var())
    self.assertLess(abs(projections['law'] - projections['real']),
                    _Z_COORDS * se)
    for name in ('law', 'real'):
      self.assertLess(abs(projections[name] - expected), _Z_COORDS * se / 1.4)
    # Far from what a sum of the clipped updates without noise (clients *
    # clip) or a sum of zeros would give.
    self.assertGreater(abs(clients * clip - expected), 2 * _Z_COORDS * se)
    self.assertGreater(expected, 2 * _Z_COORDS * se)

  def test_weighted_call_is_refused(self):
    # As build_fed_sgd calls its model aggregator.
    mean = simulation.dp_rec_in_law_aggregator(0.1, 1.0)
    for factory in (mean, mean.sum_factory):
      with self.assertRaisesRegex(TypeError, 'weight type'):
        factory.create(_STRUCT, tff.TensorType(np.float32))


class LearningTest(tf.test.TestCase):

  def test_mean_epsilon_is_dp_rec_epsilon(self):
    simulated = simulation.dp_rec_in_law_aggregator(0.1, 0.2, bits=5)
    real = learning.dp_rec_aggregator(0.1, 0.2, bits=5)
    kwargs = dict(population=10**5, clients_per_round=100, rounds=5,
                  delta=1e-6)
    self.assertEqual(simulated.epsilon(_STRUCT, **kwargs),
                     real.epsilon(_STRUCT, **kwargs))
    self.assertIsInstance(simulated.sum_factory,
                          dp_rec_in_law.DpRecInLawSumFactory)

  def test_history_is_refused(self):
    aggregator = simulation.dp_rec_in_law_aggregator(0.1, 0.2, bits=5)
    with self.assertRaisesRegex(ValueError, 'in law'):
      learning.start_history(None, aggregator=aggregator, model_fn=None,
                             initial_seed=1)

  def test_mean_rejects_other_sums(self):
    with self.assertRaisesRegex(TypeError, 'DpRecInLawSumFactory'):
      dp_rec_in_law.DpRecInLawMeanFactory(
          dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=0.2))
    with self.assertRaisesRegex(TypeError, 'DpRecSumFactory'):
      dp_rec_mean.DpRecMeanFactory(
          dp_rec_in_law.DpRecInLawSumFactory(noise_stddev=0.1, l2_clip=0.2))


if __name__ == '__main__':
  tf.test.main()
