"""Tests for tff_dprec.accounting.loss_pmf: dp_accounting's PLD arithmetic.

Each operation is compared with dp_accounting 0.4.3's own (through its
public functions and methods) on the same profiles: epsilons must agree to
float64 round-off, since at delta ~ 1e-6 a composition's FFT round-off moves
an epsilon by up to 1e-7 relative when the arithmetic differs.
"""

import math

from absl.testing import absltest
from absl.testing import parameterized
from dp_accounting.pld import common
from dp_accounting.pld import pld_pmf
import numpy as np

from tff_dprec.accounting import loss_pmf
from tff_dprec.accounting import profile


def _profile(mu, q, step):
  """(lo, hi, remove, add) of a subsampled Gaussian on a loss grid."""
  base = profile.gaussian_profile(mu, 1e-3, 40.0)
  return profile.subsampled(base, base, q, step, 1e-18)


def _both(step, lo, hi, deltas):
  """The same connect-the-dots PMF, ours and dp_accounting's."""
  hull = profile.convex_upper(np.arange(lo, hi + 1) * step, deltas)
  return (loss_pmf.connect_dots(step, lo, hi, hull),
          pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(
              step, lo, hi, hull))


def _assert_at_or_just_above(test, got, expected):
  """dp_accounting's epsilon, or above it by at most 1e-5 (relative).

  The same sums in the same order, but the FFT's round-off below 0 is
  raised to 0 here and kept there: that adds mass, so epsilon can only
  grow (seen: up to 2.2e-6 relative, after 2,000 draws); exp may also
  differ in its last bit.
  """
  scale = max(1.0, expected)
  test.assertGreaterEqual(got, expected - 1e-12 * scale)
  test.assertLessEqual(got, expected + 1e-5 * scale)


class LossPmfTest(parameterized.TestCase):

  @parameterized.parameters(
      # (sensitivity, q, grid step, counts): a tiny q (SO-LR's), a larger
      # one, and no sampling; counts below and above numpy's switch of
      # complex power (100).
      (2.0, 1e-4, 1e-4, (1, 40, 99, 100, 2000)),
      # Most of the transform's power underflows at 5,000 draws.
      (1.0, 0.05, 1e-3, (3, 250, 5000)),
      (0.5, 1.0, 1e-3, (1, 10, 150)),
  )
  def test_self_composition_epsilons_match_dp_accounting(self, mu, q, step,
                                                         counts):
    lo, hi, remove, add = _profile(mu, q, step)
    for deltas in (remove, add):
      ours, theirs = _both(step, lo, hi, deltas)
      for count in counts:
        for delta in (1e-7, 1e-5, 1e-2):
          expected = theirs.self_compose(count).get_epsilon_for_delta(delta)
          composed = ours.self_compose(count)
          self.assertGreaterEqual(np.min(composed.probs), 0.0)
          _assert_at_or_just_above(self, composed.epsilon_for_delta(delta),
                                   expected)

  def test_connect_dots_matches_dp_accounting(self):
    lo, hi, remove, _ = _profile(1.5, 0.01, 1e-3)
    ours, theirs = _both(1e-3, lo, hi, remove)
    eps = np.linspace(-0.5, 4.0, 31)
    np.testing.assert_allclose(ours.delta_for_epsilon(eps),
                               theirs.get_delta_for_epsilon(eps),
                               rtol=1e-12, atol=1e-300)
    hull = profile.convex_upper(np.arange(lo, hi + 1) * 1e-3, remove)
    self.assertEqual(ours.infinity_mass, hull[-1])  # The last bound.
    self.assertGreaterEqual(np.min(ours.probs), 0.0)
    # The probabilities and the mass at infinity sum to 1, or a little more
    # (negative round-off clipped to 0 adds mass: pessimistic).
    self.assertBetween(np.sum(ours.probs) + ours.infinity_mass, 1.0 - 1e-12,
                       1.0 + 1e-8)

  def test_compose_matches_dp_accounting(self):
    lo, hi, remove, add = _profile(1.0, 0.02, 1e-3)
    a_ours, a_theirs = _both(1e-3, lo, hi, remove)
    b_ours, b_theirs = _both(1e-3, lo, hi, add)
    ours = a_ours.self_compose(7).compose(b_ours.self_compose(3))
    theirs = a_theirs.self_compose(7).compose(b_theirs.self_compose(3),
                                              tail_mass_truncation=1e-15)
    self.assertGreaterEqual(np.min(ours.probs), 0.0)
    for delta in (1e-6, 1e-3):
      _assert_at_or_just_above(self, ours.epsilon_for_delta(delta),
                               theirs.get_epsilon_for_delta(delta))

  def test_windows_are_dp_accountings(self):
    # From close moment generating functions where they decide, from
    # dp_accounting's own where they might not: its window every time.
    for mu, q, step in ((2.0, 1e-4, 1e-4), (1.0, 0.05, 1e-3)):
      lo, hi, remove, add = _profile(mu, q, step)
      for deltas in (remove, add):
        pmf, _ = _both(step, lo, hi, deltas)
        composer = loss_pmf.SelfComposer(pmf)
        for count in (1, 2, 7, 99, 100, 2000, 163600):
          self.assertEqual(
              composer.window(count),
              common.compute_self_convolve_bounds(pmf.probs, count, 1e-15))

  def test_a_kept_transform_gives_the_fresh_values(self):
    lo, hi, remove, _ = _profile(2.0, 1e-3, 1e-4)
    pmf = loss_pmf.connect_dots(1e-4, lo, hi, profile.convex_upper(
        np.arange(lo, hi + 1) * 1e-4, remove))
    composer = loss_pmf.SelfComposer(pmf)
    for count in (5, 120, 121, 400, 60):
      kept = composer.compose(count)
      fresh = pmf.self_compose(count)
      self.assertEqual(kept.lower, fresh.lower)
      np.testing.assert_array_equal(kept.probs, fresh.probs)
      self.assertEqual(kept.infinity_mass, fresh.infinity_mass)

  def test_epsilon_edges(self):
    pmf = loss_pmf.LossPmf(0.1, -2, np.array([0.2, 0.3, 0.3, 0.1]), 0.1)
    self.assertEqual(pmf.epsilon_for_delta(0.05), math.inf)  # inf mass
    self.assertEqual(pmf.epsilon_for_delta(0.99), 0.0)
    # Between the mass at infinity and the divergence at 0 (0.1095): the
    # epsilon whose divergence is delta, up to round-off.
    eps = pmf.epsilon_for_delta(0.105)
    self.assertBetween(eps, 0.0, 0.1)
    self.assertAlmostEqual(float(pmf.delta_for_epsilon(eps)[0]), 0.105,
                           places=12)
    # At or above every finite loss, and at +infinity: the mass at
    # +infinity (not exp(eps) * 0).
    np.testing.assert_array_equal(
        pmf.delta_for_epsilon([0.1, 800.0, math.inf]), [0.1, 0.1, 0.1])

  def test_zero_mass_at_losses_whose_exponential_overflows(self):
    # Losses down to -1000 with zero probability below -1 (as a
    # composition's support): the walk past them adds nothing, no nan.
    probs = np.zeros(10001)
    probs[-21:] = 1.0 / 21  # Losses -1.0 to 1.0.
    pmf = loss_pmf.LossPmf(0.1, -9990, probs, 0.0)
    with np.errstate(invalid='raise', over='ignore'):
      self.assertEqual(pmf.epsilon_for_delta(0.99), 0.0)
      eps = pmf.epsilon_for_delta(0.1)
    self.assertBetween(eps, 0.0, 1.0)
    self.assertAlmostEqual(float(pmf.delta_for_epsilon(eps)[0]), 0.1,
                           places=12)

  def test_pair_takes_the_larger_direction(self):
    lo, hi, remove, add = _profile(1.0, 0.02, 1e-3)
    pair = profile.pessimistic_pld(1e-3, lo, hi, remove, add)
    self.assertEqual(pair.get_epsilon_for_delta(1e-5),
                     max(pair.remove.epsilon_for_delta(1e-5),
                         pair.add.epsilon_for_delta(1e-5)))

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, 'hi > lo'):
      loss_pmf.connect_dots(0.1, 3, 3, [0.5])
    with self.assertRaisesRegex(ValueError, 'non-increasing'):
      loss_pmf.connect_dots(0.1, 0, 2, [0.5, 0.6, 0.1])
    with self.assertRaisesRegex(ValueError, r'\[0, 1\]'):
      loss_pmf.connect_dots(0.1, 0, 1, [1.5, 0.1])
    a = loss_pmf.LossPmf(0.1, 0, np.array([1.0]), 0.0)
    b = loss_pmf.LossPmf(0.2, 0, np.array([1.0]), 0.0)
    with self.assertRaisesRegex(ValueError, 'one loss grid'):
      a.compose(b)
    with self.assertRaisesRegex(ValueError, 'count'):
      a.self_compose(0)


if __name__ == '__main__':
  absltest.main()
