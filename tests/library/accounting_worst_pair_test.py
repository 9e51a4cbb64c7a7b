"""Tests of the worst pair's certified profile (accounting/worst_pair.py).

Each numerical step must round towards more privacy loss: the sum law
below and above the exact one, quantile reads, cells, the hockey stick
over sorted cells, the clip-ratio lattice. The whole is never below a Monte
Carlo of the antipodal pair, and above it by at most the stated
discretisation. Monte Carlo tolerances are 4 standard errors (fixed
seeds).
"""

import math

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
from scipy import special

from tff_dprec.accounting import message_profile
from tff_dprec.accounting import worst_pair

# A coarse discretisation: fast, and still an upper bound.
COARSE = worst_pair.Discretisation(log_step=8e-3, x_step=5e-2, w_cells=128)
EPSILONS = np.array([0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0])


def antipodal_monte_carlo(clip_ratio, bits, epsilons, samples, seed):
  """(mean, SE) of sum_k (softmax(c xi)_k - gamma softmax(-c xi)_k)_+."""
  rng = np.random.default_rng(seed)
  x = clip_ratio * rng.standard_normal((samples, 2**bits))
  p = special.softmax(x, axis=1)
  q = special.softmax(-x, axis=1)
  h = np.stack([np.maximum(p - math.exp(e) * q, 0.0).sum(axis=1)
                for e in epsilons], axis=1)
  return h.mean(axis=0), h.std(axis=0) / math.sqrt(samples)


def pair_monte_carlo(v, y, bits, epsilons, samples, seed):
  """(mean, SE) of H(P_v || P_y) for one group, by Lemma 11.2."""
  rng = np.random.default_rng(seed)
  z = rng.standard_normal((samples, 2**bits, v.size))
  p = special.softmax(z @ v, axis=1)
  q = special.softmax(z @ y, axis=1)
  h = np.stack([np.maximum(p - math.exp(e) * q, 0.0).sum(axis=1)
                for e in epsilons], axis=1)
  return h.mean(axis=0), h.std(axis=0) / math.sqrt(samples)


def profile_at(clip_ratio, bits, grids=COARSE):
  return worst_pair.antipodal_profile(
      clip_ratio=clip_ratio, bits=bits, step=1e-3, max_epsilon=8.0,
      discretisation=grids).value(EPSILONS)


class SumLawTest(parameterized.TestCase):

  @parameterized.parameters((0.7, 1), (1.5, 3), (2.0, 7))
  def test_masses_sum_to_one(self, c, terms):
    law = worst_pair.sum_law(c, terms, 8e-3)
    self.assertAlmostEqual(law.masses.sum() + law.zero + law.top, 1.0,
                           delta=1e-12)
    self.assertTrue(np.all(law.masses >= 0.0))

  def test_one_term_rounds_down(self):
    # P(S- <= x) >= P(S <= x) at every grid point: exact for one term.
    c = 1.3
    law = worst_pair.sum_law(c, 1, 8e-3)
    grid_logs = law.low + law.step * np.arange(law.masses.size)
    below = law.zero + np.cumsum(law.masses)
    exact = special.ndtr(grid_logs / c)
    self.assertTrue(np.all(below >= exact - 1e-15))
    self.assertGreater(np.max(below - exact), 1e-4)  # It does round.

  @parameterized.parameters((1.0, 3), (1.8, 7))
  def test_sum_law_brackets_the_exact_sum(self, c, terms):
    # S- <= S <= e^(D h) S- + terms e^low in law: empirical CDFs of the
    # exact sum at S-'s grid points, with 4 SE.
    law = worst_pair.sum_law(c, terms, 8e-3)
    rng = np.random.default_rng(7)
    n = 200000
    s = np.exp(c * rng.standard_normal((n, terms))).sum(axis=1)
    grid = law.values()
    idx = np.searchsorted(grid, np.quantile(s, np.linspace(0.02, 0.98, 25)))
    lower_cdf = law.zero + np.cumsum(law.masses)        # P(S- <= g)
    upper = math.exp(law.depth * law.step) * grid + terms * math.exp(
        law.low)                                         # S+ at each atom
    for i in idx:
      empirical = np.mean(s <= grid[i])
      se = math.sqrt(empirical * (1 - empirical) / n)
      self.assertLessEqual(empirical, lower_cdf[i] + 4 * se)
      self.assertGreaterEqual(np.mean(s <= upper[i]) + 4 * se, lower_cdf[i])
    mean_minus = float((law.masses * grid).sum())
    exact_mean = terms * math.exp(c * c / 2)
    self.assertLess(mean_minus, exact_mean)
    self.assertGreater(math.exp(law.depth * law.step) * mean_minus +
                       terms * math.exp(law.low), exact_mean)

  def test_bad_arguments_are_named(self):
    with self.assertRaisesRegex(ValueError, 'terms'):
      worst_pair.sum_law(1.0, 0, 1e-3)
    with self.assertRaisesRegex(ValueError, 'log_step'):
      worst_pair.sum_law(1.0, 3, -1.0)


class HockeyStickTest(absltest.TestCase):

  def test_matches_the_sum_and_never_below(self):
    rng = np.random.default_rng(3)
    a = rng.exponential(size=300) / 300
    b = rng.exponential(size=300) / 300
    b[:5] = 0.0  # Likelihood ratio infinity.
    a[5:10] = 0.0
    gammas = np.exp(np.linspace(-1.0, 4.0, 50))
    exact = np.array([np.maximum(a - g * b, 0.0).sum() for g in gammas])
    got = worst_pair.sorted_pair(a, b).hockey_stick(gammas)
    self.assertTrue(np.all(got >= exact))
    np.testing.assert_allclose(got, exact, rtol=1e-8, atol=1e-15)


class AntipodalProfileTest(parameterized.TestCase):

  @parameterized.parameters((3, 0.8), (3, 1.8), (5, 1.5))
  def test_never_below_monte_carlo(self, bits, c):
    mean, se = antipodal_monte_carlo(c, bits, EPSILONS, 40000, seed=bits)
    for grids in (COARSE, worst_pair.DEFAULT_DISCRETISATION):
      bound = profile_at(c, bits, grids)
      self.assertTrue(np.all(bound >= mean - 4 * se),
                      msg=f'{grids}: {bound} against {mean} +- {se}')

  def test_above_monte_carlo_by_at_most_the_stated_discretisation(self):
    # Stated in docs/PRIVACY.md Section 11.4: at most 10% above the
    # antipodal pair at epsilon <= 3 and 30% at epsilon <= 6 (5 bits).
    bits, c = 5, 1.5
    mean, se = antipodal_monte_carlo(c, bits, EPSILONS, 40000, seed=11)
    bound = profile_at(c, bits, worst_pair.DEFAULT_DISCRETISATION)
    limit = np.where(EPSILONS <= 3.0, 1.10, 1.30)
    self.assertTrue(np.all(bound <= limit * (mean + 4 * se)),
                    msg=f'{bound / mean}')

  def test_refined_grids_give_smaller_bounds(self):
    # Halving x_step nests the cells of xi_1; doubling w_cells nests W's.
    base = profile_at(1.4, 4)
    finer_x = profile_at(1.4, 4, COARSE._replace(x_step=COARSE.x_step / 2))
    finer_w = profile_at(1.4, 4, COARSE._replace(w_cells=2 * COARSE.w_cells))
    self.assertTrue(np.all(finer_x <= base * (1 + 1e-12)))
    self.assertTrue(np.all(finer_w <= base * (1 + 1e-12)))
    self.assertLess(finer_x[0], base[0])
    self.assertLess(finer_w[0], base[0])

  def test_not_decreasing_in_the_clip_ratio(self):
    values = [profile_at(c, 3) for c in (0.5, 1.0, 1.5, 2.0)]
    for smaller, larger in zip(values, values[1:]):
      self.assertTrue(np.all(smaller <= larger))

  @parameterized.parameters(1e-3, 0.7, 1.0, 3.3, 24.9)
  def test_lattice_ceiling(self, c):
    up = worst_pair.lattice_ceiling(c)
    self.assertGreaterEqual(up, c)
    self.assertLess(up, c * (1 + worst_pair.C_LATTICE) * (1 + 1e-12))

  def test_large_clip_ratio_has_no_nan(self):
    values = worst_pair.antipodal_profile(
        clip_ratio=90.0, bits=1, step=1e-2, max_epsilon=4.0,
        discretisation=COARSE).values
    self.assertFalse(np.any(np.isnan(values)))
    self.assertTrue(np.all(values > 0.0))

  def test_bad_arguments_are_named(self):
    for kwargs, name in ((dict(clip_ratio=0.0), 'clip_ratio'),
                         (dict(bits=25), 'bits'),
                         (dict(step=0.0), 'step'),
                         (dict(max_epsilon=-1.0), 'max_epsilon')):
      args = dict(clip_ratio=1.0, bits=3, step=1e-2, max_epsilon=1.0)
      args.update(kwargs)
      with self.assertRaisesRegex(ValueError, name):
        worst_pair.antipodal_profile(**args)
    with self.assertRaisesRegex(TypeError, 'discretisation'):
      worst_pair.antipodal_profile(clip_ratio=1.0, bits=3, step=1e-2,
                                   max_epsilon=1.0, discretisation=(1, 2, 3))


class TheoremTest(parameterized.TestCase):
  """Theorem 11.1 by Monte Carlo: no pair beats the antipodal one."""

  @parameterized.parameters(
      (np.array([1.2, 0.0, 0.0]), np.array([0.0, 1.2, 0.0])),    # 90 deg
      (np.array([1.2, 0.0, 0.0]), np.array([-0.6, 0.0, 0.0])),   # half norm
      (np.array([0.9, 0.7, 0.3]), np.array([-0.8, 0.5, -0.6])),  # 1 > |.|
      (np.array([1.2, 0.0, 0.0]), np.zeros(3)))                  # forward
  def test_antipodal_pair_dominates(self, v, y):
    bits, c = 3, 1.2
    self.assertLessEqual(max(np.linalg.norm(v), np.linalg.norm(y)),
                         c + 1e-12)
    mean, se = pair_monte_carlo(v, y, bits, EPSILONS, 40000, seed=5)
    worst, worst_se = antipodal_monte_carlo(c, bits, EPSILONS, 40000,
                                            seed=6)
    self.assertTrue(np.all(mean <= worst + 4 * np.hypot(se, worst_se)))
    self.assertTrue(np.all(mean <= profile_at(c, bits)))


class MessageProfileTest(absltest.TestCase):

  def test_one_group_takes_the_antipodal_bound(self):
    _, _, substitution = message_profile.message_profiles(
        clip_ratio=1.5, bits=5, num_groups=1, max_epsilon=8.0)
    antipodal = worst_pair.antipodal_profile(
        clip_ratio=1.5 * message_profile._FLOAT32_SLACK, bits=5,
        step=substitution.step, max_epsilon=8.0)
    eps = substitution.epsilons()
    self.assertTrue(np.all(substitution.values <= antipodal.value(eps)))
    # It is the smallest bound in the middle of the range.
    self.assertEqual(substitution.value(4.0), antipodal.value(4.0))

  def test_two_groups_do_not(self):
    _, _, two = message_profile.message_profiles(
        clip_ratio=1.5, bits=5, num_groups=2, max_epsilon=8.0)
    antipodal = worst_pair.antipodal_profile(
        clip_ratio=1.5, bits=5, step=two.step, max_epsilon=8.0)
    self.assertGreater(two.value(4.0), antipodal.value(4.0))


if __name__ == '__main__':
  absltest.main()
