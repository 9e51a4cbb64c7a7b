"""Tests for tff_dprec.accounting.lattice_search: a path-free answer."""

import math

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from tff_dprec.accounting import calibration
from tff_dprec.accounting import lattice_search

_LO, _HI, _TOL = 1e-3, 25.0, 1e-6


def _epsilon(boundary, slope, curve):
  """Increasing on [lo, hi], equal to 1 at `boundary`."""
  def epsilon(x):
    u = math.log(x / boundary)
    return math.exp(slope * u + curve * u * u)
  return epsilon


class LargestMeetingTest(parameterized.TestCase):

  def test_below_any_search_within_tol_and_close_to_the_boundary(self):
    rng = np.random.default_rng(0)
    for _ in range(200):
      boundary = math.exp(rng.uniform(math.log(0.01), math.log(20.0)))
      slope = rng.uniform(0.5, 8.0)
      epsilon = _epsilon(boundary, slope, rng.uniform(-1, 1) * slope / 25)
      guess = boundary * math.exp(rng.normal() * rng.choice([1e-5, 0.3, 2]))
      calls = []

      def counted(x, epsilon=epsilon):
        calls.append(x)
        return epsilon(x)

      found = lattice_search.largest_meeting(
          counted, 1.0, _LO, _HI, _TOL, guess=min(max(guess, _LO), _HI))
      self.assertIn(found.x, calls)  # Evaluated,
      self.assertLessEqual(epsilon(found.x), 1.0)  # meets the target,
      # never above what the bracketing search returns (any value within
      # tol below the boundary),
      self.assertLessEqual(found.x, calibration.search(
          epsilon, 1.0, _LO, _HI, _TOL, 'x', largest=True))
      self.assertLessEqual(found.x, boundary / (1 + _TOL))
      # and within two lattice steps of the boundary.
      self.assertGreater(found.x, boundary / (1 + _TOL)**2 * (1 - 1e-12))
      self.assertEqual(found.evaluations, len(set(calls)))
      self.assertLessEqual(found.evaluations, 12)

  def test_the_answer_does_not_depend_on_the_guess(self):
    epsilon = _epsilon(1.7, 6.0, 0.2)
    answers = {lattice_search.largest_meeting(
        epsilon, 1.0, _LO, _HI, _TOL, guess=g).x
               for g in (1e-3, 0.5, 1.0, 1.7, 1.7000001, 2.0, 25.0)}
    self.assertLen(answers, 1)

  def test_a_close_guess_and_slope_take_few_evaluations(self):
    for boundary in (0.4, 1.0, 1.7, 3.3):
      found = lattice_search.largest_meeting(
          _epsilon(boundary, 6.0, 0.2), 1.0, _LO, _HI, _TOL,
          guess=boundary * (1 + 1e-4), slope=6.2)
      self.assertLessEqual(found.evaluations, 5)
      self.assertAlmostEqual(found.slope, 6.0, delta=0.1)

  def test_breaks_change_the_path_not_the_answer(self):
    # Part step function, as DP-REC's epsilon with the worst pair's profile
    # computed at c rounded up to a coarse lattice: the smooth curve at the
    # cell's end, plus a small smooth part at x itself.
    cell = math.log1p(2.0**-10)

    def cell_of(x):
      k = math.ceil(math.log(x) / cell)
      return math.exp((k - 1) * cell), math.exp(k * cell)

    rng = np.random.default_rng(1)
    for _ in range(40):
      boundary = math.exp(rng.uniform(math.log(0.3), math.log(5.0)))
      smooth = _epsilon(boundary, rng.uniform(3.0, 8.0), 0.1)
      epsilon = lambda x, s=smooth: s(cell_of(x)[1]) + 1e-9 * s(x)
      found = {}
      for breaks in (None, cell_of):
        found[breaks] = lattice_search.largest_meeting(
            epsilon, 1.0, _LO, _HI, _TOL, guess=boundary * 1.05,
            breaks=breaks)
      self.assertEqual(found[None].x, found[cell_of].x)
      self.assertLessEqual(epsilon(found[cell_of].x), 1.0)
      self.assertLessEqual(found[cell_of].evaluations,
                           found[None].evaluations)
      self.assertLessEqual(found[cell_of].evaluations, 10)

  def test_upper_bounds_settle_points(self):
    # A cheaper bound meets the target below 1.5: those points are settled
    # by it, and the answer is unchanged.
    exact = _epsilon(2.0, 4.0, 0.0)

    def with_bounds(x):
      bound = exact(x) * 1.5
      return lattice_search.UpperBound(bound) if bound <= 1.0 else exact(x)

    self.assertEqual(
        lattice_search.largest_meeting(with_bounds, 1.0, _LO, _HI, _TOL).x,
        lattice_search.largest_meeting(exact, 1.0, _LO, _HI, _TOL).x)

  def test_the_ends(self):
    self.assertEqual(lattice_search.largest_meeting(
        lambda x: 0.5, 1.0, _LO, _HI, _TOL).x, _HI)
    with self.assertRaises(lattice_search.Unreachable):
      lattice_search.largest_meeting(lambda x: 2.0, 1.0, _LO, _HI, _TOL)
    # The boundary within a lattice step of lo: lo itself.
    self.assertEqual(lattice_search.largest_meeting(
        lambda x: 0.5 if x <= _LO * (1 + 1e-7) else 2.0, 1.0, _LO, _HI,
        _TOL).x, _LO)
    # Unreachable (inf) above a point: handled as missing.
    found = lattice_search.largest_meeting(
        lambda x: x if x < 3.0 else math.inf, 2.0, _LO, _HI, _TOL)
    self.assertBetween(found.x, 2.0 / (1 + _TOL)**2, 2.0 / (1 + _TOL))

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, 'lo'):
      lattice_search.largest_meeting(lambda x: x, 1.0, 2.0, 1.0, _TOL)
    with self.assertRaisesRegex(ValueError, 'tol'):
      lattice_search.largest_meeting(lambda x: x, 1.0, _LO, _HI, 0.0)

  def test_not_monotone_is_an_error(self):
    with self.assertRaisesRegex(ValueError, 'monotone'):
      lattice_search.largest_meeting(
          lambda x: 0.5 if abs(x - 1.0) < 1e-9 or x < 0.5 else 2.0, 1.0,
          _LO, _HI, _TOL, guess=1.0)


class GuessesTest(parameterized.TestCase):

  def _found(self, x, slope=3.0):
    return lattice_search.Found(x, slope, 4)

  def test_interpolates_in_log_count(self):
    guesses = lattice_search.Guesses()
    guesses.remember('k', 5, 100, self._found(2.0))
    guesses.remember('k', 5, 10000, self._found(1.0))
    x, slope = guesses.guess('k', 5, 1000)
    self.assertAlmostEqual(x, math.sqrt(2.0))
    self.assertEqual(slope, 3.0)

  def test_falls_back_to_the_nearest(self):
    guesses = lattice_search.Guesses()
    self.assertEqual(guesses.guess('k', 5, 100), (None, None))
    guesses.remember('k', 5, 100, self._found(2.0))
    self.assertEqual(guesses.guess('k', 5, 300)[0], 2.0)  # Same setting.
    guesses.remember('k', 7, 300, self._found(1.5))
    self.assertEqual(guesses.guess('k', 6, 300)[0], 1.5)  # Same count.
    self.assertEqual(guesses.guess('other', 5, 100), (None, None))

  def test_keeps_at_most_its_size(self):
    guesses = lattice_search.Guesses(size=2)
    for key in 'abc':
      guesses.remember(key, 5, 100, self._found(1.0))
    self.assertEqual(guesses.guess('a', 5, 100), (None, None))
    self.assertEqual(guesses.guess('c', 5, 100)[0], 1.0)


if __name__ == '__main__':
  absltest.main()
