"""Tests for tff_dprec.accounting.pld_accountant: the default accounting."""

import math

from absl.testing import parameterized
import dp_accounting
import numpy as np

from tff_dprec import accounting
from tff_dprec.accounting import message_profile
from tff_dprec.accounting import pld_accountant


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
    # does take the minimum.
    self.assertLessEqual(pld, rdp)

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
    with self.assertRaisesRegex(ValueError, 'population=1'):
      accounting.DpRecRoundEvent(1, 1, 1.0, 4, 1)
    # A known participant is a DpRecEvent (the local pair).
    accountant = accounting.make_dp_rec_accountant()
    accountant.compose(accounting.DpRecEvent(1.0, 4, 1))
    self.assertGreater(accountant.get_epsilon(1e-5), 0.0)

  def test_non_private_in_pld_mode(self):
    accountant = accounting.make_dp_rec_accountant()
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
    amplified = accounting.make_dp_rec_accountant()
    amplified.compose(accounting.dp_rec_round_event(**kwargs), 10)
    both = accounting.make_dp_rec_accountant()
    both.compose(accounting.dp_rec_round_event(**kwargs), 10)
    both.compose(accounting.DpRecEvent(0.5, 4, 1))
    rdp = accounting.make_dp_rec_accountant(accounting='rdp')
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
    # The PLD's messages have at most 64 bits per group (the event allows
    # the paper mode's 4096).
    accountant = accounting.make_dp_rec_accountant()
    with self.assertRaisesRegex(ValueError, 'bits'):
      accountant.compose(accounting.DpRecRoundEvent(100, 1, 1.0, 100, 1))
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)
    self.assertEqual(accountant.pld.draws, ())
    np.testing.assert_array_equal(accountant.rdp, 0.0)

  def test_local_never_above_rdp(self):
    for c in (0.5, 1.0, 2.0):
      kwargs = dict(clip_ratio=c, delta=1e-5, bits=4, num_groups=1, rounds=3)
      self.assertLessEqual(
          accounting.dp_rec_local_epsilon(**kwargs),
          accounting.dp_rec_local_epsilon(accounting='rdp', **kwargs))

  def test_composes_round_by_round_as_self_composition(self):
    # The state after each round is the draw's PLD self-composed to the
    # draws so far (dp_accounting's self_compose), to the last bit.
    n, b, c, bits = 4000, 40, 1.0, 4
    delta = n**-1.1
    _, draw = message_profile.draw_pld(q=1 / n, clip_ratio=c, bits=bits,
                                       num_groups=1)
    accountant = accounting.make_dp_rec_accountant()
    event = accounting.DpRecRoundEvent(n, b, c, bits, 1)
    for rounds in (1, 2, 3):
      accountant.compose(event)
      self.assertEqual(accountant.pld.draws, (((1 / n, c, bits, 1),
                                               b * rounds),))
      self.assertEqual(
          accountant.pld.privacy_loss().get_epsilon_for_delta(delta),
          draw.self_compose(b * rounds).get_epsilon_for_delta(delta))

  def test_composed_pld_is_immutable(self):
    empty = pld_accountant.ComposedPld(1e-4)
    kind = (1 / 4000, 1.0, 4, 1)
    one = empty.compose(kind, 40)
    two = one.compose(kind, 40)
    self.assertEqual(empty.draws, ())
    self.assertEqual(one.draws, ((kind, 40),))
    self.assertEqual(two.draws, ((kind, 80),))
    with self.assertRaisesRegex(ValueError, 'empty'):
      empty.privacy_loss()
    with self.assertRaisesRegex(ValueError, 'count'):
      one.compose(kind, 0)
    self.assertLess(one.get_epsilon_for_delta(1e-5),
                    two.get_epsilon_for_delta(1e-5))

  def test_bad_discretization(self):
    with self.assertRaisesRegex(ValueError, 'discretization'):
      accounting.make_dp_rec_accountant(discretization=0.0)


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
