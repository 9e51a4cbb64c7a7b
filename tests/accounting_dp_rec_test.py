"""Tests for tff_dprec.accounting.dp_rec: events, accountant, epsilon."""

import math
import warnings

from absl.testing import parameterized
import dp_accounting
import numpy as np
from scipy import optimize

from tff_dprec import accounting
from tff_dprec.accounting import baselines
from tff_dprec.accounting import calibration
from tff_dprec.accounting import channel
from tff_dprec.accounting import dp_rec
from tff_dprec.accounting import message_profile


def _paper_delta(population):
  return population**-1.1


class PaperModeTest(parameterized.TestCase):
  """Appendix C of the DP-REC paper: clip ratios and their epsilons."""

  @parameterized.named_parameters(
      ('mnist_eps3', 0.545, 100, 10, 1000, 3.0),
      ('mnist_eps6', 0.87, 100, 10, 1000, 6.0),
      ('femnist_eps1', 0.77, 3500, 100, 4000, 1.0),
      ('femnist_eps3', 1.41, 3500, 100, 4000, 3.0),
      ('femnist_eps6', 1.745, 3500, 100, 4000, 6.0),
      ('shakespeare_eps3', 1.435, 660, 66, 200, 3.0),
  )
  def test_reproduces_paper(self, c, population, per_round, rounds, expected):
    eps = accounting.dp_rec_epsilon(
        clip_ratio=c, population=population, clients_per_round=per_round,
        rounds=rounds, delta=_paper_delta(population), total_bits=70,
        accounting='paper')
    self.assertAlmostEqual(eps, expected, delta=0.05)

  def test_stackoverflow_42_bits_is_unreachable(self):
    population = 342477
    with self.assertRaisesRegex(accounting.OverheadExceedsDeltaError,
                                r'at least 43 index bits'):
      accounting.dp_rec_epsilon(
          clip_ratio=1.227, population=population, clients_per_round=60,
          rounds=1500, delta=_paper_delta(population), total_bits=42,
          accounting='paper')

  def test_stackoverflow_48_bits(self):
    population = 342477
    eps = accounting.dp_rec_epsilon(
        clip_ratio=1.227, population=population, clients_per_round=60,
        rounds=1500, delta=_paper_delta(population), total_bits=48,
        accounting='paper')
    self.assertAlmostEqual(eps, 0.94, delta=0.02)

  def test_grouped_messages_warn(self):
    kwargs = dict(clip_ratio=1.0, population=1000, clients_per_round=10,
                  rounds=10, delta=1e-5, accounting='paper')
    with self.assertWarns(accounting.UnprovenPaperBound) as caught:
      grouped = accounting.dp_rec_epsilon(bits=8, num_groups=8, **kwargs)
    self.assertEqual(caught.filename, __file__)  # The caller's line.
    with warnings.catch_warnings():
      warnings.simplefilter('error', accounting.UnprovenPaperBound)
      single = accounting.dp_rec_epsilon(total_bits=64, **kwargs)
    self.assertEqual(grouped, single)

  def test_numerical_reverse_divergence_is_tighter_but_close(self):
    kwargs = dict(clip_ratio=1.41, population=3500, clients_per_round=100,
                  rounds=4000, delta=_paper_delta(3500), total_bits=70,
                  accounting='paper')
    paper = accounting.dp_rec_epsilon(**kwargs)
    numerical = accounting.dp_rec_epsilon(
        reverse_divergence='numerical', **kwargs)
    self.assertLess(numerical, paper)
    self.assertGreater(numerical, 0.9 * paper)

  def test_local_epsilon_closed_form(self):
    c, delta, bits, rounds = 0.3, 1e-5, 64, 3
    expected = min(
        rounds * (lam + 1) * c * c -
        math.log(delta - 12 * 2.0**-bits * rounds * math.exp(c * c)) / lam
        for lam in np.asarray(accounting.PAPER_ORDERS) - 1)
    eps = accounting.dp_rec_local_epsilon(clip_ratio=c, delta=delta,
                                          total_bits=bits, rounds=rounds,
                                          accounting='paper')
    self.assertAlmostEqual(eps, expected, places=9)

  def test_overhead_sums_per_event(self):
    accountant = accounting.DpRecAccountant(accounting='paper')
    accountant.compose(accounting.DpRecEvent(1.0, 20), 3)
    accountant.compose(accounting.DpRecEvent(0.5, 30))
    expected = 12 * (3 * math.e * 2.0**-20 + math.exp(0.25) * 2.0**-30)
    self.assertAlmostEqual(accountant.overhead, expected, places=15)


class SoundModeTest(parameterized.TestCase):

  def test_local_epsilon_from_channel(self):
    # One release, no amplification: eps from the message RDP directly (at
    # the clip ratio plus the float32 margin of 2^-20).
    c, bits, groups, delta = 1.0, 7, 4, 1e-5
    forward, reverse = channel.message_rdp(
        clip_ratio=c * (1 + 2.0**-20), bits=bits, num_groups=groups,
        orders=accounting.SOUND_ORDERS)
    from dp_accounting.rdp import rdp_privacy_accountant  # pylint: disable=g-import-not-at-top
    expected = rdp_privacy_accountant.compute_epsilon(
        np.asarray(accounting.SOUND_ORDERS, float),
        np.maximum(forward, reverse), delta)[0]
    eps = accounting.dp_rec_local_epsilon(clip_ratio=c, delta=delta,
                                          bits=bits, num_groups=groups)
    self.assertAlmostEqual(eps, expected, places=12)

  def test_round_uses_zhu_wang_per_draw(self):
    c, bits, groups, n, b, delta = 1.0, 7, 3, 500, 5, 1e-5
    orders = np.asarray(accounting.SOUND_ORDERS)
    per_draw = dp_rec.sound_rdp(1 / n, c, bits, groups, orders)
    accountant = accounting.DpRecAccountant()
    accountant.compose(accounting.dp_rec_round_event(
        clip_ratio=c, bits=bits, num_groups=groups, population=n,
        clients_per_round=b), 7)
    np.testing.assert_allclose(accountant.rdp, 7 * b * per_draw)

  def test_subsampling_amplifies(self):
    common = dict(clip_ratio=0.5, delta=1e-5, bits=8, num_groups=4)
    local = accounting.dp_rec_local_epsilon(rounds=10, **common)
    central = accounting.dp_rec_epsilon(
        population=1000, clients_per_round=1, rounds=10, **common)
    self.assertLess(central, local)

  def test_stackoverflow_at_paper_clip_exceeds_paper_epsilon(self):
    # SO-LR at the paper's c = 1.227 (6 groups x 7 bits): the server sees
    # each message, so sampling compares the target's message with another
    # client's (substitution), not with the prior. The paper's epsilon 1
    # does not hold; it is about the subsampled Gaussian's at sensitivity 2c.
    population = 342477
    kwargs = dict(population=population, clients_per_round=60, rounds=1500,
                  delta=_paper_delta(population))
    eps = accounting.dp_rec_epsilon(clip_ratio=1.227, bits=7, num_groups=6,
                                    accounting='rdp', **kwargs)
    gauss_2c = accounting.dp_fedavg_epsilon(
        noise_multiplier=1 / (2 * 1.227), accounting='rdp',
        **{**kwargs, 'clients_per_round': 1, 'rounds': 60 * 1500})
    self.assertGreater(eps, 2.0)
    self.assertGreater(eps, 0.95 * gauss_2c)
    self.assertLess(eps, 1.3 * gauss_2c)

  @parameterized.parameters((0.5, 1000, 10, 100), (1.0, 3500, 100, 200))
  def test_many_bits_near_gaussian_substitution(self, c, n, b, t):
    # With K = 2^20 the decoded candidate is nearly a sample of N(v, s^2):
    # the release is at least about as revealing as the Gaussian mechanism
    # with sensitivity 2c (substitution), and the bound is not far above.
    kwargs = dict(population=n, rounds=t, delta=n**-1.1)
    eps = accounting.dp_rec_epsilon(clip_ratio=c, bits=20, num_groups=1,
                                    clients_per_round=b, accounting='rdp',
                                    **kwargs)
    gauss_2c = accounting.dp_fedavg_epsilon(
        noise_multiplier=1 / (2 * c), clients_per_round=1, accounting='rdp',
        **{
            **kwargs, 'rounds': b * t})
    self.assertGreater(eps, 0.99 * gauss_2c)
    self.assertLess(eps, 1.3 * gauss_2c)

  @parameterized.named_parameters(
      ('total_bits', dict(total_bits=64), 'paper mode'),
      ('missing_groups', dict(bits=8), 'num_groups'),
      ('missing_bits', dict(num_groups=8), 'bits'),
      ('both', dict(bits=8, num_groups=8, total_bits=64), 'total_bits'),
  )
  def test_bits_arguments(self, bits_kwargs, message):
    kwargs = dict(clip_ratio=1.0, population=100, clients_per_round=10,
                  rounds=10, delta=1e-5)
    with self.assertRaisesRegex(ValueError, message):
      accounting.dp_rec_epsilon(**kwargs, **bits_kwargs)

  def test_reverse_divergence_is_paper_only(self):
    with self.assertRaisesRegex(ValueError, 'reverse_divergence'):
      accounting.DpRecAccountant(reverse_divergence='numerical')

  def test_non_integer_orders_rejected(self):
    with self.assertRaisesRegex(ValueError, 'integers'):
      accounting.DpRecAccountant(orders=[1.5, 2.0])


class AccountantContractTest(parameterized.TestCase):

  @parameterized.parameters('pld', 'sound', 'paper')
  def test_no_op_and_empty_accountant(self, mode):
    accountant = accounting.DpRecAccountant(accounting=mode)
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)
    accountant.compose(dp_accounting.NoOpDpEvent())
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)

  def test_zero_rounds_release_nothing(self):
    common = dict(population=100, clients_per_round=10, rounds=0,
                  delta=1e-5)
    self.assertEqual(accounting.dp_rec_epsilon(
        clip_ratio=1.0, bits=7, num_groups=2, **common), 0.0)
    self.assertEqual(accounting.dp_rec_local_epsilon(
        clip_ratio=1.0, bits=7, num_groups=2, rounds=0, delta=1e-5), 0.0)
    self.assertEqual(accounting.dp_fedavg_epsilon(
        noise_multiplier=1.0, **common), 0.0)
    # Arguments are still checked, and calibration needs rounds.
    with self.assertRaisesRegex(ValueError, 'clip_ratio'):
      accounting.dp_rec_epsilon(clip_ratio=-1.0, bits=7, num_groups=2,
                                **common)
    with self.assertRaisesRegex(ValueError, 'rounds'):
      accounting.calibrate_clip_ratio(target_epsilon=1.0, bits=7,
                                      num_groups=2, **common)

  @parameterized.parameters('pld', 'sound', 'paper')
  def test_non_private(self, mode):
    accountant = accounting.DpRecAccountant(accounting=mode)
    accountant.compose(dp_accounting.NonPrivateDpEvent())
    self.assertEqual(accountant.get_epsilon(1e-5), math.inf)

  @parameterized.named_parameters(
      ('gaussian', dp_accounting.GaussianDpEvent(1.0)),
      ('poisson_gaussian', dp_accounting.PoissonSampledDpEvent(
          0.1, dp_accounting.GaussianDpEvent(1.0))),
      ('unsupported', dp_accounting.UnsupportedDpEvent()),
      ('composed_bad', dp_accounting.ComposedDpEvent(
          [accounting.DpRecEvent(1.0, 8),
           dp_accounting.LaplaceDpEvent(1.0)])),
  )
  def test_unsupported_events(self, event):
    accountant = accounting.DpRecAccountant()
    self.assertFalse(accountant.supports(event))
    with self.assertRaises(dp_accounting.UnsupportedEventError):
      accountant.compose(event)
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)

  def test_supports_does_not_compose(self):
    accountant = accounting.DpRecAccountant()
    event = accounting.dp_rec_round_event(clip_ratio=1.0, bits=8,
                                          num_groups=5, population=100,
                                          clients_per_round=5)
    self.assertTrue(accountant.supports(event))
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)

  @parameterized.parameters('pld', 'sound', 'paper')
  def test_composition_equals_self_composition(self, mode):
    event = accounting.dp_rec_round_event(clip_ratio=1.0, total_bits=40,
                                          population=100, clients_per_round=5)
    a = accounting.DpRecAccountant(accounting=mode)
    for _ in range(4):
      a.compose(event)
    b = accounting.DpRecAccountant(accounting=mode)
    b.compose(dp_accounting.SelfComposedDpEvent(event, 4))
    self.assertAlmostEqual(a.get_epsilon(1e-5), b.get_epsilon(1e-5), places=9)

  @parameterized.named_parameters(
      ('negative_c', -1.0, 8, ValueError),
      ('nan_c', float('nan'), 8, ValueError),
      ('bool_bits', 1.0, True, TypeError),
      ('zero_bits', 1.0, 0, ValueError),
      ('float_bits', 1.0, 8.0, TypeError),
  )
  def test_bad_event(self, c, bits, error):
    with self.assertRaises(error):
      accounting.DpRecEvent(c, bits)

  def test_bad_accountant_arguments(self):
    with self.assertRaisesRegex(ValueError, 'accounting'):
      accounting.DpRecAccountant(accounting='exact')
    with self.assertRaisesRegex(ValueError, 'neighboring_relation'):
      accounting.DpRecAccountant(
          neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)

  @parameterized.named_parameters(
      ('delta_zero', dict(delta=0.0), ValueError, 'delta'),
      ('delta_one', dict(delta=1.0), ValueError, 'delta'),
      ('rounds_negative', dict(rounds=-1), ValueError, 'rounds'),
      ('rounds_float', dict(rounds=1.5), TypeError, 'rounds'),
      ('population_zero', dict(population=0), ValueError, 'population'),
      ('too_many_clients', dict(clients_per_round=200), ValueError,
       'clients_per_round'),
  )
  def test_bad_epsilon_arguments(self, override, error, name):
    kwargs = dict(clip_ratio=1.0, population=100, clients_per_round=10,
                  rounds=10, delta=1e-5, bits=8, num_groups=8)
    kwargs.update(override)
    with self.assertRaisesRegex(error, name):
      accounting.dp_rec_epsilon(**kwargs)


class MonotonicityTest(parameterized.TestCase):

  _BASE = dict(clip_ratio=1.0, population=1000, clients_per_round=10,
               rounds=100, delta=1e-5, bits=8, num_groups=4)

  @parameterized.named_parameters(
      ('clip_ratio', 'clip_ratio', 1.2, +1),
      ('population', 'population', 2000, -1),
      ('clients_per_round', 'clients_per_round', 20, +1),
      ('rounds', 'rounds', 200, +1),
      ('delta', 'delta', 1e-4, -1),
  )
  def test_monotone(self, name, value, direction):
    base = accounting.dp_rec_epsilon(**self._BASE)
    changed = accounting.dp_rec_epsilon(**{**self._BASE, name: value})
    self.assertEqual(np.sign(changed - base), direction)


class CalibrationTest(parameterized.TestCase):

  @parameterized.parameters(1.0, 3.0)
  def test_clip_ratio_round_trip(self, target):
    kwargs = dict(population=100, clients_per_round=10, rounds=1000,
                  delta=_paper_delta(100), bits=7, num_groups=10)
    c = accounting.calibrate_clip_ratio(target_epsilon=target, **kwargs)
    self.assertLessEqual(accounting.dp_rec_epsilon(clip_ratio=c, **kwargs),
                         target)
    self.assertGreater(
        accounting.dp_rec_epsilon(clip_ratio=c * 1.001, **kwargs), target)

  def test_paper_calibration_matches_paper_mnist(self):
    c = accounting.calibrate_clip_ratio(
        target_epsilon=3.0, population=100, clients_per_round=10, rounds=1000,
        delta=_paper_delta(100), total_bits=70, accounting='paper')
    self.assertAlmostEqual(c, 0.545, delta=0.005)

  def test_paper_calibration_fails_when_bits_cannot_meet_delta(self):
    with self.assertRaises(accounting.OverheadExceedsDeltaError):
      accounting.calibrate_clip_ratio(
          target_epsilon=1.0, population=342477, clients_per_round=60,
          rounds=1500, delta=_paper_delta(342477), total_bits=30,
          accounting='paper')

  def test_calibration_rejects_bad_target(self):
    with self.assertRaisesRegex(ValueError, 'target_epsilon'):
      accounting.calibrate_clip_ratio(
          target_epsilon=0.0, population=100, clients_per_round=10,
          rounds=10, delta=1e-3, bits=8, num_groups=8)

  @parameterized.named_parameters(
      ('power', lambda x: x**3, 8.0, True, 2.0),
      ('inverse_square', lambda z: 1.0 / z**2, 4.0, False, 0.5),
      ('steep', lambda x: math.expm1(x * x) + x, 3.0, True, None),
      ('zero_below', lambda x: 0.0 if x < 0.5 else x, 2.0, True, 2.0),
      ('inf_above', lambda x: math.inf if x > 3.0 else x, 2.5, True, 2.5),
      ('inf_below', lambda z: math.inf if z < 0.1 else 1.0 / z, 4.0, False,
       0.25),
      # Where interpolation stalls (review of the search): a flat approach
      # and a jump, a kink, a plateau on the target, both directions.
      ('jump', lambda x: 1 - 1e-6 * (3 - x) if x < 3 else 2.0, 1.0, True,
       3.0),
      ('kink', lambda x: 1 - 1e-4 * (3 - x) if x < 3 else 1 + 1e6 * (x - 3),
       1.0, True, 3.0),
      ('jump_decreasing',
       lambda z: 1 - 1e-6 * (z - 3) if z > 3 else 2.0, 1.0, False, 3.0),
      ('plateau', lambda x: 1.0 if x <= 5 else 2.0, 1.0, True, 5.0),
      ('nan_above', lambda x: math.nan if x > 2 else x, 3.0, True, 2.0))
  def test_search_finds_the_boundary(self, fn, target, largest, boundary):
    lo, hi, tol = 1e-3, 25.0, 1e-6
    calls = []

    def epsilon(x):
      calls.append(x)
      return fn(x)

    x = calibration.search(epsilon, target, lo, hi, tol, 'x', largest)
    if boundary is None:  # Where fn crosses the target, by Brent's method.
      boundary = optimize.brentq(lambda x: fn(x) - target, lo, hi,
                                 xtol=1e-14)
    self.assertLessEqual(fn(x), target)  # Always meets the target,
    self.assertLessEqual(abs(x - boundary), 2 * tol * boundary)  # Within tol.
    self.assertTrue(all(lo <= c <= hi for c in calls))
    # At most a few times bisection's steps (geometric to a factor 4, then
    # halving to tol): the stall safeguard bounds the interpolation.
    bisection = (math.log2(math.log2(hi / lo) / 2) +
                 math.log2(4 / tol) + 2)
    self.assertLessEqual(len(calls), (calibration._STALL_STEPS + 1) *  # pylint: disable=protected-access
                         bisection)

  @parameterized.parameters(
      (dict(lo=0.0), 'lo=0.0'), (dict(lo=2.0, hi=1.0), 'hi=1.0'),
      (dict(target=0.0), 'target_epsilon must be positive'),
      (dict(tol=0.0), 'tol must be'), (dict(tol=1.0), 'tol must be'))
  def test_search_rejects_bad_arguments(self, changes, message):
    kwargs = dict(target=1.0, lo=1e-3, hi=25.0, tol=1e-6)
    kwargs.update(changes)
    with self.assertRaisesRegex(ValueError, message):
      calibration.search(lambda x: x, name='x', largest=True, **kwargs)

  def test_real_accountants_need_far_fewer_steps_than_bisection(self):
    calls = []
    epsilon = lambda z: (calls.append(z), accounting.dp_fedavg_epsilon(  # pylint: disable=g-long-lambda
        noise_multiplier=z, population=4000, clients_per_round=40,
        rounds=10, delta=1e-4, accounting='rdp'))[1]
    z = calibration.search(epsilon, 1.0, calibration.MIN_NOISE_MULTIPLIER,
                           calibration.MAX_NOISE_MULTIPLIER, 1e-6, 'z',
                           largest=False)
    self.assertLessEqual(epsilon(z), 1.0)
    self.assertGreater(epsilon(z * (1 - 2e-6)), 1.0)
    self.assertLessEqual(len(calls), 17)  # Bisection: 26 here.

  def test_search_refuses_an_unreachable_target(self):
    with self.assertRaisesRegex(accounting.TargetUnreachableError,
                                'No c >= 0.001 meets target_epsilon=0.5'):
      calibration.search(lambda x: 1.0 + x, 0.5, 1e-3, 25.0, 1e-6, 'c',
                         largest=True)

  @parameterized.parameters(1.2641164, 0.000123456789, 9.9999999, 3.0, 25.0)
  def test_rounding_is_safe(self, value):
    self.assertLessEqual(accounting.round_down(value), value)
    self.assertGreaterEqual(accounting.round_up(value), value)
    self.assertLess(value - accounting.round_down(value), 2e-5 * value)
    self.assertLess(accounting.round_up(value) - value, 2e-5 * value)




class PldDefaultTest(parameterized.TestCase):
  """The default accounting (PLD, docs/PRIVACY.md Section 9)."""

  @parameterized.parameters(
      (4000, 40, 10, 4, 1, 0.886), (4000, 40, 10, 4, 1, 1.3),
      (342477, 60, 1500, 7, 6, 1.1), (100, 10, 1000, 7, 10, 0.545),
      (3500, 100, 200, 7, 1, 0.77), (660, 66, 20, 2, 3, 2.0))
  def test_never_above_rdp(self, n, b, t, bits, groups, c):
    kwargs = dict(clip_ratio=c, population=n, clients_per_round=b, rounds=t,
                  delta=n**-1.1, bits=bits, num_groups=groups)
    pld = accounting.dp_rec_epsilon(**kwargs)
    rdp = accounting.dp_rec_epsilon(accounting='rdp', **kwargs)
    # min(PLD, RDP) by construction; what this checks is that the default
    # does take the minimum and that 'sound' is 'rdp'.
    self.assertLessEqual(pld, rdp)
    self.assertEqual(accounting.dp_rec_epsilon(accounting='sound', **kwargs),
                     rdp)

  @parameterized.parameters(
      # (N, B, T, bits, groups, c, the largest PLD / RDP ratio expected):
      # few draws (the main job) or tiny q (SO-LR) are where the PLD gains.
      (4000, 40, 10, 4, 1, 0.886, 0.5), (342477, 60, 1500, 7, 6, 1.1, 0.5))
  def test_pld_alone_beats_rdp(self, n, b, t, bits, groups, c, ratio):
    delta = n**-1.1
    _, draw = message_profile.draw_pld(q=1 / n, clip_ratio=c, bits=bits,
                                       num_groups=groups)
    pld_alone = draw.self_compose(b * t).get_epsilon_for_delta(delta)
    rdp = accounting.dp_rec_epsilon(
        clip_ratio=c, population=n, clients_per_round=b, rounds=t,
        delta=delta, bits=bits, num_groups=groups, accounting='rdp')
    self.assertLess(pld_alone, ratio * rdp)
    self.assertEqual(accounting.dp_rec_epsilon(
        clip_ratio=c, population=n, clients_per_round=b, rounds=t,
        delta=delta, bits=bits, num_groups=groups), pld_alone)

  def test_main_job_gains(self):
    # The main job (N = 4000, B = 40, T = 10, one group of 4 bits): the
    # PLD calibrates c well above the RDP's 0.886.
    kwargs = dict(population=4000, clients_per_round=40, rounds=10,
                  delta=4000**-1.1, bits=4, num_groups=1)
    c = accounting.calibrate_clip_ratio(target_epsilon=1.0, tol=1e-4,
                                        **kwargs)
    self.assertGreater(c, 1.0)
    self.assertLessEqual(accounting.dp_rec_epsilon(clip_ratio=c, **kwargs),
                         1.0)
    self.assertGreater(
        accounting.dp_rec_epsilon(clip_ratio=c * 1.01, **kwargs), 1.0)
    # Epsilon grows with the rounds; round 1 costs a fraction of the total.
    by_round = [accounting.dp_rec_epsilon(clip_ratio=c, **{**kwargs,
                                                           'rounds': r})
                for r in (1, 2, 5, 10)]
    self.assertEqual(by_round, sorted(by_round))
    self.assertLess(by_round[0], 0.6)

  def test_gaussian_proxy_is_a_lower_reference(self):
    # With 2^20 candidates the release is close to the Gaussian mechanism at
    # sensitivity 2c; a bound below that Gaussian's exact PLD epsilon would
    # be wrong.
    kwargs = dict(population=1000, rounds=100, delta=1000**-1.1)
    eps = accounting.dp_rec_epsilon(clip_ratio=0.5, bits=20, num_groups=1,
                                    clients_per_round=10, **kwargs)
    gauss_2c = accounting.dp_fedavg_epsilon(
        noise_multiplier=1.0, clients_per_round=1,
        **{**kwargs, 'rounds': 1000})
    self.assertGreater(eps, 0.99 * gauss_2c)

  def test_amplified_needs_another_client(self):
    with self.assertRaisesRegex(ValueError, 'population=1'):
      accounting.dp_rec_epsilon(clip_ratio=1.0, population=1,
                                clients_per_round=1, rounds=1, delta=1e-5,
                                bits=4, num_groups=1)
    event = dp_accounting.PoissonSampledDpEvent(
        1.0, accounting.DpRecEvent(1.0, 4, 1))
    self.assertFalse(accounting.DpRecAccountant().supports(event))
    # The Renyi accountings keep accepting q = 1 (the local pair).
    rdp = accounting.DpRecAccountant(accounting='rdp')
    self.assertTrue(rdp.supports(event))
    rdp.compose(event)
    self.assertGreater(rdp.get_epsilon(1e-5), 0.0)

  @parameterized.parameters('pld', 'rdp')
  def test_sampling_probability_zero_releases_nothing(self, mode):
    accountant = accounting.DpRecAccountant(accounting=mode)
    event = dp_accounting.PoissonSampledDpEvent(
        0.0, accounting.DpRecEvent(1.0, 4, 1))
    self.assertTrue(accountant.supports(event))
    accountant.compose(event, 10)
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)

  def test_non_private_in_pld_mode(self):
    accountant = accounting.DpRecAccountant()
    accountant.compose(accounting.dp_rec_round_event(
        clip_ratio=1.0, population=4000, clients_per_round=40, bits=4,
        num_groups=1))
    self.assertLess(accountant.get_epsilon(1e-5), 1.0)
    accountant.compose(dp_accounting.NonPrivateDpEvent())
    self.assertEqual(accountant.get_epsilon(1e-5), math.inf)

  def test_draws_on_different_grids_compose(self):
    # A local release (q = 1) needs a coarser loss grid than amplified
    # draws; the accountant rebuilds both on the coarser one, so the PLD
    # still counts (its epsilon stays below the Renyi one).
    kwargs = dict(population=4000, clients_per_round=40, bits=4,
                  num_groups=1, clip_ratio=1.0)
    amplified = accounting.DpRecAccountant()
    amplified.compose(accounting.dp_rec_round_event(**kwargs), 10)
    both = accounting.DpRecAccountant()
    both.compose(accounting.dp_rec_round_event(**kwargs), 10)
    both.compose(accounting.DpRecEvent(0.5, 4, 1))
    rdp = accounting.DpRecAccountant(accounting='rdp')
    rdp.compose(accounting.dp_rec_round_event(**kwargs), 10)
    rdp.compose(accounting.DpRecEvent(0.5, 4, 1))
    # Precondition: the two kinds of draw have different loss grids.
    self.assertNotEqual(
        message_profile.draw_pld(q=1.0, clip_ratio=0.5, bits=4,
                                 num_groups=1)[0],
        message_profile.draw_pld(q=1 / 4000, clip_ratio=1.0, bits=4,
                                 num_groups=1)[0])
    delta = 4000**-1.1
    eps_both, order = both.get_epsilon_and_optimal_order(delta)
    self.assertIsNone(order)  # The PLD's.
    self.assertGreater(eps_both, amplified.get_epsilon(delta))
    self.assertLess(eps_both, rdp.get_epsilon(delta))

  def test_compose_checks_before_changing_state(self):
    accountant = accounting.DpRecAccountant()
    with self.assertRaisesRegex(ValueError, 'bits'):
      accountant.compose(dp_accounting.PoissonSampledDpEvent(
          0.01, accounting.DpRecEvent(1.0, 100, 1)))
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)

  def test_local_never_above_rdp(self):
    for c in (0.5, 1.0, 2.0):
      kwargs = dict(clip_ratio=c, delta=1e-5, bits=4, num_groups=1, rounds=3)
      self.assertLessEqual(
          accounting.dp_rec_local_epsilon(**kwargs),
          accounting.dp_rec_local_epsilon(accounting='rdp', **kwargs))

  def test_bad_discretization(self):
    with self.assertRaisesRegex(ValueError, 'discretization'):
      accounting.DpRecAccountant(discretization=0.0)


class DpFedAvgPldTest(parameterized.TestCase):

  @parameterized.parameters(
      (0.01, 0.893, 10, 4000), (60 / 342477, 0.957, 1500, 342477),
      (0.1, 1.0, 30, 100), (0.01, 3.0, 10, 4000))
  def test_within_three_percent_and_never_below(self, q, z, t, n):
    from dp_accounting.pld import privacy_loss_distribution  # pylint: disable=g-import-not-at-top
    delta = n**-1.1
    b = round(q * n)
    eps = accounting.dp_fedavg_epsilon(noise_multiplier=z, population=n,
                                       clients_per_round=b, rounds=t,
                                       delta=delta)
    exact = privacy_loss_distribution.from_gaussian_mechanism(
        z, sampling_prob=b / n, value_discretization_interval=2e-5
    ).self_compose(t).get_epsilon_for_delta(delta)
    # The 2e-5 grid is itself pessimistic, within 1e-3 of exact here.
    self.assertGreaterEqual(eps, exact * (1 - 1e-3))
    self.assertLessEqual(eps, exact * 1.03)

  def test_huge_epsilon_skips_the_pld(self):
    # z = 0.01: RDP epsilon in the thousands; the PLD (minutes there) is
    # skipped and the RDP value, also a bound, returned.
    kwargs = dict(noise_multiplier=0.01, population=100, clients_per_round=20,
                  rounds=2, delta=1e-5)
    rdp = accounting.dp_fedavg_epsilon(accounting='rdp', **kwargs)
    self.assertGreater(rdp, baselines.PLD_MAX_RDP_EPSILON)
    self.assertEqual(accounting.dp_fedavg_epsilon(**kwargs), rdp)

  def test_sound_is_rdp_for_dp_fedavg(self):
    kwargs = dict(noise_multiplier=0.9, population=4000, clients_per_round=40,
                  rounds=10, delta=1e-5)
    self.assertEqual(accounting.dp_fedavg_epsilon(accounting='sound', **kwargs),
                     accounting.dp_fedavg_epsilon(accounting='rdp', **kwargs))
    with self.assertRaisesRegex(ValueError, 'conversion'):
      accounting.calibrate_dp_fedavg_noise(
          target_epsilon=1.0, population=4000, clients_per_round=40,
          rounds=10, delta=1e-5, conversion='classic')

  def test_main_job_round_one_under_half(self):
    kwargs = dict(population=4000, clients_per_round=40, delta=4000**-1.1)
    z = accounting.calibrate_dp_fedavg_noise(target_epsilon=1.0, rounds=10,
                                             **kwargs)
    self.assertLess(z, 0.7)  # RDP: 0.893.
    self.assertLess(accounting.dp_fedavg_epsilon(
        noise_multiplier=z, rounds=1, **kwargs), 0.5)
    self.assertLessEqual(accounting.dp_fedavg_epsilon(
        noise_multiplier=z, rounds=10, **kwargs), 1.0)


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
