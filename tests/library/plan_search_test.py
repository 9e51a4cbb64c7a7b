"""Tests for tff_dprec.plan.search: bits from c and the break-even search."""

import math

from absl.testing import absltest
from absl.testing import parameterized

from tff_dprec import accounting
from tff_dprec import plan as plan_lib
from tff_dprec.plan import search as plan_search


# A federation small enough to calibrate in seconds.
_SMALL = dict(population=2000, clients_per_round=10, rounds=5,
              target_epsilon=2.0, dimension=1000)


class AutoBitsTest(parameterized.TestCase):

  @parameterized.parameters(None, 1, 3, 5, 8, 12)
  def test_a_start_gives_the_scan_answer(self, start):
    def falling(bits):  # c falls with bits, as calibrations do.
      return 3.3 - 0.15 * bits

    self.assertEqual(plan_search.auto_bits(falling, start=start),
                     plan_search.auto_bits(falling))

  def test_a_good_start_asks_fewer_calibrations(self):
    asked = []

    def falling(bits):
      asked.append(bits)
      return 1.7 - 0.01 * bits

    bits, _, met = plan_search.auto_bits(falling)
    scanned = len(asked)
    asked.clear()
    self.assertEqual(plan_search.auto_bits(
        falling, start=plan_search.bits_for_clip_ratio(1.7))[0], bits)
    self.assertTrue(met)
    self.assertLess(len(asked), scanned)
    self.assertEqual(sorted(asked), [bits - 1, bits])

  def test_the_cap_and_refusals(self):
    self.assertEqual(plan_search.auto_bits(lambda b: 10.0, start=4),
                     (plan_search.MAX_AUTO_BITS, 10.0, False))

    def refuses_few_bits(bits):
      if bits < 6:
        raise ValueError(f'unreachable at {bits} bits')
      return 1.0

    self.assertEqual(plan_search.auto_bits(refuses_few_bits, start=3),
                     (6, 1.0, True))


  @parameterized.parameters(None, 3, 6)
  def test_settled_widths_are_not_calibrated(self, start):
    asked = []

    def falling(bits):
      asked.append(bits)
      return 3.3 - 0.15 * bits

    def misses(bits):  # Exact here; the planner's is one epsilon.
      return not plan_search.margin_met(bits, 3.3 - 0.15 * bits)

    expected = plan_search.auto_bits(falling, start=start)
    asked.clear()
    self.assertEqual(plan_search.auto_bits(falling, start=start,
                                           misses_margin=misses), expected)
    self.assertEqual(asked, [expected[0]])  # Only the answer's c.
    # Nothing meets the margin: the cap's c, calibrated once.
    asked.clear()
    self.assertEqual(plan_search.auto_bits(
        lambda b: asked.append(b) or 10.0, misses_margin=lambda b: True),
                     (plan_search.MAX_AUTO_BITS, 10.0, False))
    self.assertEqual(asked, [plan_search.MAX_AUTO_BITS])

  def test_the_margin_clip_ratio(self):
    for bits in range(3, 9):
      c = plan_search.margin_clip_ratio(bits)
      self.assertTrue(plan_search.margin_met(bits, c * (1 - 1e-12)))
      self.assertFalse(plan_search.margin_met(bits, c * (1 + 1e-9)))
    self.assertEqual(plan_search.margin_clip_ratio(2), 0.0)

  def test_calibrations_settle_only_missed_widths(self):
    fed = plan_lib.federation(**_SMALL)
    cal = plan_lib.Calibrations(fed)
    settled = 0
    for bits in range(3, 8):
      if cal.dp_rec_misses_margin(fed.clients_per_round, bits, 1):
        settled += 1
        self.assertFalse(plan_search.margin_met(
            bits, cal.dp_rec_clip_ratio(fed.clients_per_round, bits, 1)))
    self.assertGreater(settled, 0)  # Not vacuous: 3 bits at least.


class BreakEvenTest(parameterized.TestCase):

  def _brute_force(self, target, population, c_of):
    for b in range(1, population + 1):
      if plan_search.dp_rec_relative_noise(c_of(b), b) <= target:
        return b
    return None

  @parameterized.parameters(
      # (clients_per_round, target): DP-REC behind at B, and ahead at B.
      (40, 0.0116), (40, 0.5), (5, 0.03), (300, 0.0116))
  def test_equals_a_brute_force_search(self, clients, target):
    population = 20000

    def c_of(b):  # Falls slowly with B, as calibrated clip ratios do.
      return 1.8 - 0.08 * math.log10(b)

    asked = []

    def clip_ratio_at(b, previous):
      del previous
      asked.append(b)
      return c_of(b), 5

    found = plan_search.break_even(target, population, clip_ratio_at, clients)
    expected = self._brute_force(target, population, c_of)
    self.assertEqual(found[0], expected)
    self.assertAlmostEqual(found[1], c_of(expected))
    self.assertLess(len(asked), 12)  # Not a scan.

  def test_flat_noise_takes_few_calibrations(self):
    # Where c^2 ~ log(1 + A / B) (weak amplification), 1 / (c sqrt(B))
    # flattens and f moves slowly: the doubling jump keeps the search short.
    population, target = 10**6, 0.0116

    def c_of(b):
      return math.sqrt(math.log1p(10000.0 / b))

    asked = []

    def clip_ratio_at(b, previous):
      del previous
      asked.append(b)
      return c_of(b), 5

    found = plan_search.break_even(target, population, clip_ratio_at, 40)
    self.assertEqual(found[0], self._brute_force(target, population, c_of))
    self.assertLess(len(asked), 60)

  def test_bits_that_drop_with_b_do_not_overshoot(self):
    # Bits chosen from c drop as B grows, so c jumps up there (fewer bits
    # allow a larger c): c is not monotone, the noise still falls.
    population, target = 20000, 0.0116

    def c_of(b):
      bits = 5 if b < 2500 else 4
      return (1.9 if bits == 4 else 1.7) - 0.05 * math.log10(b)

    found = plan_search.break_even(target, population,
                                lambda b, _: (c_of(b), 5), 40)
    self.assertEqual(found[0], self._brute_force(target, population, c_of))

  def test_arguments_are_checked(self):
    for args, message in (((0.0, 10, None, 5), 'target_noise'),
                          ((0.1, 10, None, 11), 'exceeds population')):
      with self.assertRaisesRegex(ValueError, message):
        plan_search.break_even(*args)

  def test_none_when_out_of_reach(self):
    self.assertIsNone(plan_search.break_even(
        1e-4, 1000, lambda b, _: (1.5, 5), 10))

    def unreachable(b, _):
      if b > 50:
        raise accounting.TargetUnreachableError('no c')
      return 1.5, 5

    self.assertIsNone(plan_search.break_even(0.01, 10**6, unreachable, 10))

if __name__ == '__main__':
  absltest.main()
