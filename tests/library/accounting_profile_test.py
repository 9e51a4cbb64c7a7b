"""Tests for tff_dprec.accounting.profile: bounds stay above, PLDs dominate."""

import math

from absl.testing import parameterized
from dp_accounting.pld import privacy_loss_distribution
import numpy as np

from tff_dprec.accounting import profile


def _gaussian_pld(sensitivity, q, discretization=1e-4):
  return privacy_loss_distribution.from_gaussian_mechanism(
      1.0 / sensitivity, sampling_prob=q,
      value_discretization_interval=discretization)


class ProfileTest(parameterized.TestCase):

  def test_value_reads_the_grid_point_below(self):
    p = profile.Profile(0.5, [1.0, 0.5, 0.2, 0.1])
    np.testing.assert_array_equal(
        p.value([0.0, 0.49, 0.5, 0.99, 1.0, 1.4, 7.0, -1.0]),
        [1.0, 1.0, 1.0, 0.5, 0.5, 0.2, 0.1, 1.0])

  def test_values_made_non_increasing_and_at_most_one(self):
    p = profile.Profile(1.0, [1.5, 0.3, 0.4, 0.0])
    np.testing.assert_array_equal(p.values, [1.0, 0.3, 0.3, 0.0])

  @parameterized.parameters(-1.0, 0.0, float('nan'))
  def test_bad_step(self, step):
    with self.assertRaisesRegex(ValueError, 'step'):
      profile.Profile(step, [1.0])

  def test_bad_values(self):
    with self.assertRaisesRegex(ValueError, 'values'):
      profile.Profile(1.0, [0.5, -0.1])

  @parameterized.parameters(0.5, 1.0, 2.5)
  def test_rdp_conversion_above_the_exact_gaussian_profile(self, mu):
    orders = np.arange(2, 65)
    converted = profile.from_rdp(orders, orders * mu**2 / 2, 1e-3, 20.0)
    exact = profile.gaussian_profile(mu, 1e-3, 20.0)
    # Every grid point: the conversion is an upper bound (CKS Prop. 12).
    self.assertTrue(np.all(converted.values >= exact.values * (1 - 1e-6)))

  def test_triangle_above_the_gaussian_through_the_midpoint(self):
    # H(N(2 mu) || N(0)) via R = N(mu): both legs are N(mu) vs N(0).
    mu = 0.8
    leg = profile.gaussian_profile(mu, 1e-3, 15.0)
    bound = profile.triangle(leg, leg)
    exact = profile.gaussian_profile(2 * mu, 1e-3, 15.0)
    self.assertTrue(np.all(bound.values >= exact.values * (1 - 1e-6)))
    # And a useful bound: below 1 somewhere past the start.
    self.assertLess(bound.value(3.0), 0.5)

  def test_triangle_cap_zeroes_the_first_leg(self):
    first = profile.Profile(0.1, [1.0, 0.5, 0.2, 0.1, 0.05])
    second = profile.Profile(0.1, [1.0, 0.4, 0.1, 0.0, 0.0])
    capped = profile.triangle(first, second, first_cap=0.2)
    uncapped = profile.triangle(first, second)
    # At eps = 0.4 (grid index 4): e^0.2 * second(0.2) = 0.122 with the
    # cap, against first(0.2) + e^0.2 * second(0.2) = 0.32 without.
    self.assertAlmostEqual(capped.values[4], math.exp(0.2) * 0.1 * (1 + 1e-9),
                           places=9)
    self.assertGreater(uncapped.values[4], 0.3)

  def test_minimum_pads_shorter_profiles_with_their_last_value(self):
    a = profile.Profile(1.0, [1.0, 0.5])
    b = profile.Profile(1.0, [1.0, 0.8, 0.6, 0.1])
    np.testing.assert_array_equal(profile.minimum(a, b).values,
                                  [1.0, 0.5, 0.5, 0.1])


class ConvexUpperTest(parameterized.TestCase):

  def test_above_every_convex_profile_below_the_bounds(self):
    eps = np.arange(-200, 201) * 1e-2
    exact = profile.gaussian_profile(1.0, 1e-2, 2.0)
    # Both signs of eps: H_gamma(P||Q) = 1 - gamma + gamma H_{1/gamma}(Q||P)
    # (symmetric Gaussian).
    g = np.exp(eps)
    truth = np.where(eps >= 0, exact.value(np.abs(eps)),
                     1 - g + g * exact.value(np.abs(eps)))
    rng = np.random.default_rng(0)
    bumped = truth * (1 + 0.05 * rng.random(truth.size))  # Not convex.
    bumped = np.minimum(np.minimum.accumulate(bumped), 1.0)
    hull = profile.convex_upper(eps, bumped)
    self.assertTrue(np.all(hull >= truth * (1 - 1e-9)))
    self.assertTrue(np.all(hull <= bumped * (1 + 1e-11)))
    # Convex in gamma: the connect-the-dots probabilities are >= 0.
    slopes = np.diff(np.concatenate([[1.0], hull])) / np.diff(
        np.concatenate([[0.0], g]))
    self.assertTrue(np.all(np.diff(slopes) >= -1e-6))


class PessimisticPldTest(parameterized.TestCase):

  @parameterized.named_parameters(
      # The main job's proxy: sensitivity 2c, c = 1.128, q = 1/4000, 400 draws.
      ('main_job_proxy', 2 * 1.128, 1 / 4000, 400, 4000**-1.1),
      ('q_0.05', 1.0, 0.05, 50, 1e-5),
      ('no_sampling', 0.5, 1.0, 10, 1e-5),
  )
  def test_gaussian_profile_reproduces_dp_accounting(self, mu, q, count,
                                                     delta):
    base = profile.gaussian_profile(mu, 1e-3, 60.0)
    lo, hi, remove, add = profile.subsampled(base, base, q, 1e-4, 1e-18)
    ours = profile.pessimistic_pld(1e-4, lo, hi, remove, add).self_compose(
        count).get_epsilon_for_delta(delta)
    exact = _gaussian_pld(mu, q).self_compose(count).get_epsilon_for_delta(
        delta)
    # Never below (up to dp_accounting's own pessimistic 1e-4 grid, within
    # 1e-4 of exact here), and within 10%.
    self.assertGreaterEqual(ours, exact * (1 - 1e-3))
    self.assertLess(ours, exact * 1.10)

  def test_pld_profile_at_least_the_hull_of_the_bounds(self):
    # The base is read at the grid point below (a step function), so the
    # bounds are not convex in gamma; the PLD follows their convex hull,
    # which is above every true (convex) profile below the bounds.
    base = profile.gaussian_profile(1.5, 1e-3, 40.0)
    lo, hi, remove, add = profile.subsampled(base, base, 0.1, 1e-3, 1e-15)
    pld = profile.pessimistic_pld(1e-3, lo, hi, remove, add)
    eps = np.arange(lo, hi + 1) * 1e-3
    hull = np.maximum(profile.convex_upper(eps, remove),
                      profile.convex_upper(eps, add))[-hi - 1:]
    got = np.asarray(pld.get_delta_for_epsilon(eps[-hi - 1:]))
    self.assertTrue(np.all(got >= hull * (1 - 1e-9)))
    # The true subsampled Gaussian (dp_accounting, fine grid) is below.
    truth = np.asarray(_gaussian_pld(1.5, 0.1).get_delta_for_epsilon(
        eps[-hi - 1::50]))
    self.assertTrue(np.all(got[::50] >= truth * (1 - 1e-3) - 1e-12))

  def test_subsampled_forms(self):
    base = profile.gaussian_profile(1.0, 1e-3, 40.0)
    q = 0.1
    lo, hi, remove, add = profile.subsampled(base, base, q, 1e-2, 1e-12)
    eps = np.arange(lo, hi + 1) * 1e-2
    i = int(np.argmin(np.abs(eps - 0.5)))
    # gamma >= 1, removal: q H_{1 + (gamma - 1)/q}.
    self.assertAlmostEqual(
        remove[i], q * float(base.value(math.log1p(math.expm1(0.5) / q))) *
        (1 + 1e-9), places=12)
    # Both directions vanish past the grid's end, and addition is 0 above
    # gamma = 1/(1 - q).
    self.assertLessEqual(max(remove[-1], add[-1]), 1e-12)
    self.assertEqual(add[eps > -math.log1p(-q) + 1e-9].max(), 0.0)

  def test_bad_q(self):
    base = profile.gaussian_profile(1.0, 1e-2, 5.0)
    with self.assertRaisesRegex(ValueError, 'q must be'):
      profile.subsampled(base, base, 0.0, 1e-2, 1e-12)


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
