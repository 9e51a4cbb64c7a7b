"""Tests for tff_dprec.plan.planner: the plan, its break-even, downloads."""

import itertools
import json
import math

from absl.testing import absltest
import numpy as np

from experiments.studies import communication
from tff_dprec import accounting
from tff_dprec import plan as plan_lib
from tff_dprec.plan import markdown
from tests import support
from tff_dprec.plan import planner as plan_planner
from tff_dprec.plan import search as plan_search


# A federation small enough to calibrate in seconds.
_SMALL = dict(population=2000, clients_per_round=10, rounds=5,
              target_epsilon=2.0, dimension=1000)


class DownloadTest(absltest.TestCase):

  def test_expectation_matches_simulated_draws(self):
    # Small enough that histories and full states both occur.
    n, b, t, message, full = 60, 6, 30, 69, 3000
    formula = plan_planner.expected_history_download_bits(
        population=n, clients_per_round=b, rounds=t, message_bits=message,
        full_bits=full)
    protocol = communication.library_protocol(message, message - 64)
    rng = np.random.default_rng(7)
    per_draw = []
    for _ in range(400):
      draws = rng.integers(n, size=(t, b))
      traffic = communication.size_only_traffic(draws, protocol, full)
      per_draw.append(traffic.download_bits / draws.size)
      self.assertEqual(traffic.upload_bits, draws.size * message)
    mean = np.mean(per_draw)
    se = np.std(per_draw, ddof=1) / np.sqrt(len(per_draw))
    # 4.5 standard errors: fails by chance about once in 150,000 runs.
    self.assertLess(abs(formula - mean), 4.5 * se)
    self.assertGreater(formula, 64)
    self.assertLess(formula, full)

  def test_equals_the_exact_expectation_over_every_draw(self):
    # Every sequence of draws of a tiny federation, each run through
    # HistoryServer itself: the mean is the exact expectation.
    for n, b, t, full in ((3, 2, 3, 10**6), (3, 2, 3, 300), (2, 3, 3, 250),
                          (4, 1, 4, 200)):
      total, count = 0.0, 0
      for flat in itertools.product(range(n), repeat=b * t):
        draws = np.array(flat).reshape(t, b)
        traffic = communication.history_server_traffic(
            draws, message_bits=69, full_bits=full)
        total += traffic.download_bits / draws.size
        count += 1
      self.assertAlmostEqual(
          plan_planner.expected_history_download_bits(
              population=n, clients_per_round=b, rounds=t, message_bits=69,
              full_bits=full), total / count, places=6, msg=(n, b, t, full))

  def test_limits(self):
    # Everyone new every round with a huge population: histories of all
    # rounds before, sum_t (t R + 64) / T.
    n, b, t, message = 10**9, 4, 5, 69
    per_round = 32 + b * message
    expected = np.mean([r * per_round + 64 for r in range(t)])
    self.assertAlmostEqual(plan_planner.expected_history_download_bits(
        population=n, clients_per_round=b, rounds=t, message_bits=message,
        full_bits=10**9), expected, delta=1e-3 * expected)
    # A full state smaller than any history: always the full state.
    self.assertAlmostEqual(plan_planner.expected_history_download_bits(
        population=n, clients_per_round=b, rounds=t, message_bits=message,
        full_bits=10), 10.0, places=3)


class PlanTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # Bits from c, no break-even, with the default accountants.
    cls.plan = plan_lib.plan(**_SMALL, with_break_even=False)

  def test_the_plan(self):
    # One test of subtests: pytest-xdist's worksteal may split a class
    # between its workers, and each would plan again.
    for check in (
        self._check_parameters_are_the_accountants_calibrations,
        self._check_noise_and_traffic,
        self._check_json_and_text,
    ):
      with self.subTest(check.__name__[len('_check_'):]):
        check()

  def _check_parameters_are_the_accountants_calibrations(self):
    p, common = self.plan, dict(population=2000, clients_per_round=10,
                                rounds=5, delta=2000**-1.1)
    r = p.dp_rec
    bits, groups = r.bits, r.num_groups
    c = r.parameter
    eps = lambda c: accounting.dp_rec_epsilon(  # pylint: disable=g-long-lambda
        clip_ratio=c, bits=bits, num_groups=groups, **common)
    self.assertLessEqual(eps(c), 2.0)
    self.assertGreater(eps(c * 1.0001), 2.0)  # The largest, not a copy.
    self.assertGreaterEqual(bits * math.log(2),
                            c * c / 2 + plan_search.REC_MARGIN_NATS)
    z = p.dp_fedavg.parameter
    self.assertLessEqual(accounting.dp_fedavg_epsilon(
        noise_multiplier=z, **common), 2.0)
    self.assertGreater(accounting.dp_fedavg_epsilon(
        noise_multiplier=z * 0.9999, **common), 2.0)
    z_rdp = p.dp_fedavg.rdp_noise_multiplier
    self.assertGreater(z_rdp, z)  # RDP is looser than the PLD.
    self.assertLessEqual(accounting.dp_fedavg_epsilon(
        noise_multiplier=z_rdp, accounting='rdp', **common), 2.0)
    g = p.ddgauss
    self.assertLessEqual(accounting.ddgauss_epsilon(
        noise_multiplier=g.parameter, l2_clip=1.0, bits=16, dimension=1000,
        **common), 2.0)
    self.assertAlmostEqual(r.local_epsilon,
                           accounting.dp_rec_local_epsilon(
                               clip_ratio=c, delta=2000**-1.1, bits=bits,
                               num_groups=groups))

  def _check_noise_and_traffic(self):
    p = self.plan
    self.assertAlmostEqual(p.dp_rec.relative_noise,
                           1 / (p.dp_rec.parameter * math.sqrt(10)))
    self.assertAlmostEqual(p.dp_fedavg.relative_noise,
                           p.dp_fedavg.parameter / 10)
    self.assertAlmostEqual(p.ddgauss.relative_noise,
                           p.ddgauss.parameter / 10)
    self.assertEqual(p.dp_rec.upload_bits, 64 + p.dp_rec.bits)
    self.assertEqual(p.dp_fedavg.upload_bits, 32 * 1000)
    self.assertEqual(p.ddgauss.upload_bits, 16 * 1000)
    self.assertEqual(p.dp_fedavg.download_bits, 32 * 1000)
    self.assertEqual(p.dp_rec.full_bits, 32 * 1000)  # SGD.
    self.assertAlmostEqual(
        p.dp_rec.download_bits, plan_planner.expected_history_download_bits(
            population=2000, clients_per_round=10, rounds=5,
            message_bits=p.dp_rec.upload_bits, full_bits=32 * 1000))

  def _check_json_and_text(self):
    out = self.plan.to_json()
    for name in ('dp_rec', 'dp_fedavg', 'ddgauss'):
      for field in ('parameter', 'relative_noise', 'upload_bits',
                    'download_bits'):
        self.assertIn(field, out[name])
    for field in ('bits', 'num_groups', 'local_epsilon'):
      self.assertIn(field, out['dp_rec'])
    self.assertNotIn('break_even_clients_per_round', out['dp_rec'])
    self.assertIn('rdp_parameter', out['dp_fedavg'])
    json.dumps(out)
    text = '\n'.join(markdown.format_plan(self.plan))
    self.assertIn('| DP-FedAvg | min_pld_rdp |', text)


class BreakEvenPlanTest(absltest.TestCase):
  """The break-even search through `plan`, at fixed bits (each B' one
  calibration). What is under test (the smallest B' whose relative noise
  meets DP-FedAvg's, its fields and text) does not depend on DP-REC's
  accountant: its RDP bound stands in for its PLD, about 100 times faster.
  PlanTest's `_check_parameters_are_the_accountants_calibrations` checks
  the planner's values against the default accountants."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    patcher = support.dp_rec_rdp_for_pld()
    patcher.start()
    cls.addClassCleanup(patcher.stop)
    cls.fixed = plan_lib.plan(**_SMALL, bits=4)

  def test_the_plan_with_its_break_even(self):
    # One test of subtests: pytest-xdist's worksteal may split a class
    # between its workers, and each would plan again.
    for check in (
        self._check_break_even_is_the_smallest,
        self._check_json_and_text,
    ):
      with self.subTest(check.__name__[len('_check_'):]):
        check()

  def _check_break_even_is_the_smallest(self):
    p = self.fixed
    target = p.dp_fedavg.relative_noise
    self.assertTrue(p.dp_rec.break_even_searched)
    found = p.dp_rec.break_even.clients_per_round
    self.assertGreater(found, 10)
    self.assertEqual(p.dp_rec.break_even.bits, 4)
    self.assertLessEqual(p.dp_rec.break_even.relative_noise, target)
    # One client fewer, calibrated afresh, misses.
    c = plan_lib.Calibrations(p.federation).dp_rec_clip_ratio(found - 1, 4, 1)
    self.assertGreater(plan_search.dp_rec_relative_noise(c, found - 1), target)
    self.assertEqual(p.dp_rec.break_even.upload_bits_per_round,
                     found * (64 + 4))
    self.assertFalse(p.dp_rec.bits_from_c)
    self.assertIsNone(p.dp_rec.bits_margin_met)
    self.assertIsNone(p.dp_rec.break_even.bits_margin_met)

  def _check_json_and_text(self):
    out = self.fixed.to_json()
    self.assertIn('break_even_clients_per_round', out['dp_rec'])
    json.dumps(out)
    text = '\n'.join(markdown.format_plan(self.fixed))
    self.assertIn(f"B'={out['dp_rec']['break_even_clients_per_round']:,}",
                  text)

if __name__ == '__main__':
  absltest.main()
