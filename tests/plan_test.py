"""Tests for `tff_dprec.plan`, its markdown and its command line."""

from contextlib import redirect_stderr
from contextlib import redirect_stdout
import io
import itertools
import json
import math
import os
import subprocess
import sys

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from experiments.studies import communication
from tff_dprec import accounting
from tff_dprec import plan as plan_lib
from tff_dprec.plan import __main__ as plan_cli
from tff_dprec.plan import markdown
from tests import support
from tff_dprec.plan import planner as plan_planner
from tff_dprec.plan import search as plan_search

# A federation small enough to calibrate in seconds.
_SMALL = dict(population=2000, clients_per_round=10, rounds=5,
              target_epsilon=2.0, dimension=1000)


def _run_cli(argv):
  out = io.StringIO()
  with redirect_stdout(out):
    plan_cli.main(argv)
  return out.getvalue()


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
    self.assertIn('| DP-FedAvg | pld |', text)


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


def _hand_made_plan(**dp_rec):
  """A plan built from its records (no calibration), DP-REC's overridden."""
  fed = plan_lib.Federation(2000, 10, 5, 2.0, 2000**-1.1, 1000)
  rec = dict(parameter=1.5, relative_noise=1 / (1.5 * math.sqrt(10)),
             upload_bits=69, download_bits=1234.5, num_groups=1,
             bits_from_c=True, full_bits=32000, bits=5, bits_margin_met=True,
             outside_idealisation=False, local_epsilon=3.0)
  rec.update(dp_rec)
  return plan_lib.Plan(
      fed, plan_lib.DpRecPlan(**rec),
      plan_lib.DpFedAvgPlan(parameter=0.5, relative_noise=0.05,
                            upload_bits=32000, download_bits=32000,
                            rdp_noise_multiplier=0.6),
      plan_lib.DdgaussPlan(parameter=0.8191790560783655,
                           relative_noise=0.08191790560783655,
                           upload_bits=16000, download_bits=32000, bits=16,
                           l2_clip=1.0))


_BREAK_EVEN = plan_lib.BreakEven(
    clients_per_round=3272, clip_ratio=1.5103, bits=5, bits_margin_met=False,
    outside_idealisation=True, relative_noise=0.0116,
    upload_bits_per_round=3272 * 69, download_bits_per_round=4.66e9)


class MarkdownTest(absltest.TestCase):

  def test_every_parameter_has_six_digits(self):
    p = _hand_made_plan()
    text = '\n'.join(markdown.format_plan(p))
    self.assertIn('| DP-REC | pld | c=1.5 |', text)
    self.assertIn('| DP-FedAvg | pld | z=0.5 |', text)
    self.assertIn('| DDGauss16 | rdp | z=0.819179 |', text)
    self.assertEqual(p.to_json()['ddgauss']['parameter'], 0.8191790560783655)

  def test_warnings_and_the_break_even(self):
    p = _hand_made_plan(bits_margin_met=False, outside_idealisation=True,
                        break_even_searched=True, break_even=_BREAK_EVEN)
    lines = markdown.format_plan(p)
    warnings = [l for l in lines if l.startswith('WARNING')]
    self.assertLen(warnings, 4)
    self.assertLen([w for w in warnings if 'at the break-even' in w], 2)
    self.assertIn("DP-REC break-even: B'=3,272 clients per round (c=1.5103, "
                  '5 bits)', lines[-1])
    out = p.to_json()['dp_rec']
    self.assertEqual(out['break_even_clients_per_round'], 3272)
    self.assertIs(out['break_even_bits_margin_met'], False)

  def test_no_break_even(self):
    searched = _hand_made_plan(break_even_searched=True)
    self.assertIn('DP-REC break-even: none up to N=2,000',
                  markdown.format_plan(searched)[-1])
    self.assertIsNone(
        searched.to_json()['dp_rec']['break_even_clients_per_round'])
    not_searched = _hand_made_plan()
    self.assertNotIn('break-even', '\n'.join(
        markdown.format_plan(not_searched)))
    self.assertNotIn('break_even_clients_per_round',
                     not_searched.to_json()['dp_rec'])

  def test_out_of_reach(self):
    p = _hand_made_plan(parameter=None, relative_noise=None,
                        download_bits=None, bits=None, bits_margin_met=None,
                        outside_idealisation=None, local_epsilon=None,
                        error='no c meets it')
    lines = markdown.format_plan(p)
    self.assertIn('| DP-REC | pld | out of reach | - | - | 69 | - |', lines)
    self.assertEqual(lines[-1], 'DP-REC: no c meets it')
    self.assertEqual(set(p.to_json()['dp_rec']), {
        'parameter_name', 'parameter', 'accountant', 'relative_noise',
        'upload_bits', 'download_bits', 'num_groups', 'error'})


class CliTest(parameterized.TestCase):

  def test_json(self):
    # The output's shape, not its values: the RDP stand-in is enough.
    patcher = support.dp_rec_rdp_for_pld()
    patcher.start()
    self.addCleanup(patcher.stop)
    argv = [f'--{k}={v}' for k, v in _SMALL.items()] + [
        '--nobreak_even', '--server_optimizer=adam', '--json']
    out = json.loads(_run_cli(argv))
    self.assertEqual(set(out), {'dp_rec', 'dp_fedavg', 'ddgauss',
                                'federation'})
    self.assertNotIn('break_even_clients_per_round', out['dp_rec'])
    self.assertEqual(out['dp_rec']['full_bits'], 3 * 32 * 1000)
    self.assertEqual(out['federation']['population'], 2000)

  @parameterized.parameters(
      ('--clients_per_round=0', 'clients_per_round must be positive, found 0'),
      ('--clients_per_round=3000', 'clients_per_round=3000 exceeds '
       'population=2000'),
      ('--dimension=-5', 'dimension must be positive, found -5'),
      ('--target_epsilon=0', 'target_epsilon must be positive'),
      ('--delta=2', 'delta must be in (0, 1), found 2.0'),
      ('--num_groups=0', 'num_groups must be positive, found 0'),
      ('--bits=0', 'bits must be in [1, 24], found 0'),
      ('--bits=25', 'bits must be in [1, 24], found 25'),
      ('--population=abc', "flag --population=abc: invalid literal for int() "
       "with base 10: 'abc'"),
      ('--server_optimizer=foo', 'flag --server_optimizer=foo: value should '
       'be one of <adam|sgd|sgdm>'),
      ('--full_bits', 'Missing value for flag --full_bits'),
      ('extra', "Unexpected arguments: ['extra']"))
  def test_bad_input_exits_2_naming_it(self, flag, message):
    argv = [f'--{k}={v}' for k, v in _SMALL.items()] + [flag]
    err = io.StringIO()
    with self.assertRaises(SystemExit) as raised:
      with redirect_stderr(err):
        _run_cli(argv)
    self.assertEqual(raised.exception.code, 2)
    self.assertIn(message, err.getvalue())
    self.assertEqual(err.getvalue().count('\n'), 1)
    self.assertTrue(err.getvalue().startswith('error: '), err.getvalue())

  def test_a_missing_flag_is_named(self):
    argv = [f'--{k}={v}' for k, v in _SMALL.items() if k != 'rounds']
    err = io.StringIO()
    with self.assertRaises(SystemExit) as raised:
      with redirect_stderr(err):
        _run_cli(argv)
    self.assertEqual(raised.exception.code, 2)
    self.assertEqual(err.getvalue(), 'error: flag --rounds=None: Flag '
                     '--rounds must have a value other than None.\n')

  def test_the_program_exit_codes(self):
    """`python -m tff_dprec.plan` itself: 2 and one line for a bad value,
    0 for --help."""
    def program(*argv):
      return subprocess.run(
          [sys.executable, '-m', 'tff_dprec.plan', *argv], cwd=support.REPO,
          env=dict(os.environ, PYTHONPATH=support.REPO), capture_output=True,
          text=True, timeout=120)

    bad = program(*[f'--{k}={v}' for k, v in _SMALL.items()],
                  '--dimension=abc')
    self.assertEqual(bad.returncode, 2, bad.stderr)
    self.assertEqual(bad.stderr, "error: flag --dimension=abc: invalid "
                     "literal for int() with base 10: 'abc'\n")
    refused = program(*[f'--{k}={v}' for k, v in _SMALL.items()],
                      '--clients_per_round=0')
    self.assertEqual(refused.returncode, 2, refused.stderr)
    self.assertEqual(refused.stderr, 'error: clients_per_round must be '
                     'positive, found 0.\n')
    shown = program('--help')
    self.assertEqual(shown.returncode, 0, shown.stderr)
    self.assertIn('--[no]break_even', shown.stdout)
    self.assertIn('--server_optimizer: <adam|sgd|sgdm>', shown.stdout)


if __name__ == '__main__':
  absltest.main()
