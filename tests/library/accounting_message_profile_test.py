"""Monte Carlo checks of one DP-REC message's profiles against the library.

Conditionally on the candidates, the selection probabilities are known in
closed form, so H_gamma = E_candidates[sum_k (p(k) - gamma p'(k))_+] is
estimated without sampling the index: the estimate's standard error comes
from the candidates alone. Only the projections xi_k ~ N(0, 1) of the
candidates on the update matter (rotation invariance); for the substitution
pair the other update is -v (antipodal, |y| = |v|).
"""

import math

from absl.testing import parameterized
import numpy as np

from tff_dprec.accounting import message_profile

_EPSILONS = (0.0, 0.25, 0.5, 1.0, 2.0, 3.0)
_SAMPLES = 20000
# The estimate is compared at mean + 6 standard errors (two-sided chance of
# a false failure below 1e-8 per comparison for a normal estimate).
_Z = 6.0


def _probs(xi, c):
  log_w = c * xi
  log_w -= log_w.max(axis=-1, keepdims=True)
  w = np.exp(log_w)
  return w / w.sum(axis=-1, keepdims=True)


def _hockey_stick(p, p_other, eps):
  """Mean and standard error of sum_k (p - e^eps p_other)_+ over samples."""
  values = np.maximum(p - math.exp(eps) * p_other, 0.0)
  values = values.reshape(values.shape[0], -1).sum(axis=1)
  return values.mean(), values.std(ddof=1) / math.sqrt(values.size)


def _one_group(rng, c, bits):
  xi = rng.standard_normal((_SAMPLES, 2**bits))
  return _probs(xi, c), _probs(xi, -c)


def _two_groups(rng, c, bits):
  """Two groups with c / sqrt(2) each: the joint index distribution."""
  k = 2**bits
  c_g = c / math.sqrt(2.0)
  xi = rng.standard_normal((_SAMPLES, 2, k))
  p_v = _probs(xi, c_g)
  p_y = _probs(xi, -c_g)
  joint = lambda p: p[:, 0, :, None] * p[:, 1, None, :]
  return joint(p_v), joint(p_y)


class MessageProfileMonteCarloTest(parameterized.TestCase):

  @parameterized.parameters(
      (0.5, 4, 1), (1.0, 4, 1), (1.0, 7, 1), (2.0, 4, 1), (1.5, 6, 1),
      (1.0, 4, 2))
  def test_library_profiles_above_monte_carlo(self, c, bits, groups):
    rng = np.random.default_rng(1234 + bits + 10 * groups)
    if groups == 1:
      p_v, p_y = _one_group(rng, c, bits)
    else:
      p_v, p_y = _two_groups(rng, c, bits)
    uniform = np.full_like(p_v, 1.0 / p_v[0].size)
    forward, reverse, substitution = message_profile.message_profiles(
        clip_ratio=c, bits=bits, num_groups=groups, max_epsilon=8.0)
    for eps in _EPSILONS:
      for name, bound, p, q in (
          ('forward', forward, p_v, uniform),
          ('reverse', reverse, uniform, p_v),
          ('substitution', substitution, p_v, p_y),
          ('substitution, reversed', substitution, p_y, p_v)):
        mean, se = _hockey_stick(p, q, eps)
        with self.subTest(direction=name, eps=eps):
          self.assertLessEqual(mean - _Z * se, float(bound.value(eps)))

  def test_forward_vanishes_at_the_index_bits(self):
    forward, _, _ = message_profile.message_profiles(
        clip_ratio=3.0, bits=4, num_groups=2, max_epsilon=8.0)
    self.assertEqual(float(forward.value(8 * math.log(2) + 1e-3)), 0.0)
    self.assertGreater(float(forward.value(8 * math.log(2) - 0.1)), 0.0)

  def test_bounds_grow_with_the_clip_ratio(self):
    small = message_profile.message_profiles(
        clip_ratio=0.5, bits=7, num_groups=1, max_epsilon=8.0)
    large = message_profile.message_profiles(
        clip_ratio=1.0, bits=7, num_groups=1, max_epsilon=8.0)
    for a, b in zip(small, large):
      self.assertTrue(np.all(a.values <= b.values))

  def test_worst_pair_applies_to_one_group_only(self):
    self.assertTrue(message_profile.uses_worst_pair(
        clip_ratio=1.0, bits=5, num_groups=1))
    for c, bits, groups in ((1.0, 5, 2), (0.0, 5, 1), (1.0, 25, 1)):
      self.assertFalse(message_profile.uses_worst_pair(
          clip_ratio=c, bits=bits, num_groups=groups))
    self.assertNotIn('worst_pair', message_profile.substitution_bounds(
        1.0, 5, 2, max_epsilon=4.0))
    self.assertIn('worst_pair', message_profile.substitution_bounds(
        1.0, 5, 1, max_epsilon=4.0))

  def test_draw_pld_arguments(self):
    with self.assertRaisesRegex(ValueError, 'q must be'):
      message_profile.draw_pld(q=1.5, clip_ratio=1.0, bits=4, num_groups=1)
    with self.assertRaisesRegex(ValueError, 'clip_ratio'):
      message_profile.message_profiles(clip_ratio=-1.0, bits=4,
                                       num_groups=1, max_epsilon=8.0)


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
