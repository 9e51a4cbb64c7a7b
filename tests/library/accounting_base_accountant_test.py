"""Tests for tff_dprec.accounting.base_accountant: the events every DP-REC
accountant walks, its argument checks, and composition in steps."""

# dp_accounting's contract test calls `_maybe_compose` directly.
# pylint: disable=protected-access

import math
import warnings

from absl.testing import absltest
from absl.testing import parameterized
import dp_accounting
import numpy as np

from tff_dprec import accounting
from tff_dprec.accounting import base_accountant
from tff_dprec.accounting import rdp_bounds

_MODES = ('min_pld_rdp', 'rdp', 'paper')
# A small federation; the paper's accounting needs many index bits.
_FEDERATION = dict(population=4000, clients_per_round=40)
_ROUND = dict(_FEDERATION, clip_ratio=1.0, bits=4, num_groups=1)
_PAPER_ROUND = dict(_FEDERATION, clip_ratio=1.0, bits=60, num_groups=1)
_DELTA = 4000**-1.1


def _round(mode):
  return accounting.DpRecRoundEvent(
      **(_PAPER_ROUND if mode == 'paper' else _ROUND))


def _release(mode):
  return accounting.DpRecEvent(0.5, 60 if mode == 'paper' else 4, 1)


class _UnknownDpEvent(dp_accounting.DpEvent):
  pass


class ContractTest(parameterized.TestCase):
  """dp_accounting's `PrivacyAccountantTest`, for deltas in (0, 1).

  Its shipped version also asks for the epsilon at delta 0 and 1, which
  these accountants refuse (ValueError, `BadArgumentsTest`).
  """

  @parameterized.parameters(*_MODES)
  def test_is_a_dp_rec_accountant(self, mode):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    self.assertIsInstance(accountant, base_accountant.DpRecAccountantBase)
    self.assertIsInstance(accountant, dp_accounting.PrivacyAccountant)

  @parameterized.parameters(*_MODES)
  def test_unsupported(self, mode):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    for unsupported in (dp_accounting.UnsupportedDpEvent(), _UnknownDpEvent(),
                        dp_accounting.GaussianDpEvent(1.0)):
      for nested in (unsupported,
                     dp_accounting.SelfComposedDpEvent(unsupported, 10),
                     dp_accounting.ComposedDpEvent([_round(mode),
                                                    unsupported])):
        error = accountant._maybe_compose(nested, count=1, do_compose=False)
        self.assertIsNotNone(error)
        self.assertEqual(error.invalid_event, unsupported)
        self.assertFalse(accountant.supports(nested))
        with self.assertRaisesRegex(dp_accounting.UnsupportedEventError,
                                    'caused by subevent'):
          accountant.compose(nested)
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)

  @parameterized.parameters(*_MODES)
  def test_no_op(self, mode):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    self.assertEqual(accountant.get_epsilon(1e-12), 0.0)
    self.assertTrue(accountant.supports(dp_accounting.NoOpDpEvent()))
    accountant.compose(dp_accounting.NoOpDpEvent())
    self.assertEqual(accountant.get_epsilon(1e-12), 0.0)
    self.assertEqual(accountant.get_epsilon(0.99), 0.0)

  @parameterized.parameters(*_MODES)
  def test_non_private(self, mode):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    accountant.compose(_round(mode))
    self.assertLess(accountant.get_epsilon(_DELTA), math.inf)
    accountant.compose(dp_accounting.NonPrivateDpEvent())
    self.assertEqual(accountant.get_epsilon(_DELTA), math.inf)
    accountant.compose(_round(mode))
    self.assertEqual(accountant.get_epsilon(0.99), math.inf)


class DpRecEventsTest(parameterized.TestCase):
  """Which events mean what to the accountants."""

  @parameterized.parameters(*_MODES)
  def test_poisson_sampling_of_a_release_is_refused(self, mode):
    # PoissonSampledDpEvent means independent inclusion: not DP-REC's draws.
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    for q in (0.0, 0.01, 1.0):
      event = dp_accounting.PoissonSampledDpEvent(q, _release(mode))
      self.assertFalse(accountant.supports(event))
      with self.assertRaisesRegex(dp_accounting.UnsupportedEventError,
                                  'DpRecRoundEvent'):
        accountant.compose(event)

  @parameterized.parameters(*_MODES)
  def test_sampling_with_replacement_of_a_release_is_refused(self, mode):
    # It applies one event to the whole sample; a round releases a message
    # per draw.
    event = dp_accounting.SampledWithReplacementDpEvent(4000, 40,
                                                        _release(mode))
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    self.assertFalse(accountant.supports(event))

  @parameterized.parameters(*_MODES)
  def test_supports_does_not_compose(self, mode):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    for event in (_round(mode), _release(mode),
                  dp_accounting.ComposedDpEvent([_round(mode),
                                                 _release(mode)])):
      self.assertTrue(accountant.supports(event))
    self.assertEqual(accountant.get_epsilon(_DELTA), 0.0)

  def test_a_round_is_its_draws(self):
    # The Renyi accountant's state: T B draws, each proven_rdp at q = 1/N.
    accountant = accounting.make_dp_rec_accountant(accounting='rdp')
    accountant.compose(_round('rdp'), 3)
    per_draw = rdp_bounds.proven_rdp(1 / 4000, 1.0, 4, 1,
                                    np.asarray(rdp_bounds.PROVEN_ORDERS))
    np.testing.assert_array_equal(accountant.rdp, 3 * 40 * per_draw)

  @parameterized.parameters('min_pld_rdp', 'rdp')
  def test_a_release_alone_is_a_known_participant(self, mode):
    # No amplification: more than a draw of the same message.
    release = accounting.make_dp_rec_accountant(accounting=mode)
    release.compose(accounting.DpRecEvent(1.0, 4, 1))
    draw = accounting.make_dp_rec_accountant(accounting=mode)
    draw.compose(accounting.DpRecRoundEvent(4000, 1, 1.0, 4, 1))
    self.assertGreater(release.get_epsilon(_DELTA),
                       draw.get_epsilon(_DELTA))

  def test_zero_clip_ratio_releases_nothing(self):
    for mode in ('min_pld_rdp', 'rdp'):
      accountant = accounting.make_dp_rec_accountant(accounting=mode)
      accountant.compose(accounting.DpRecRoundEvent(
          **{**_ROUND, 'clip_ratio': 0.0}), 10)
      self.assertEqual(accountant.get_epsilon(_DELTA), 0.0)


class BadArgumentsTest(parameterized.TestCase):

  @parameterized.parameters(*_MODES)
  def test_neighboring_relation(self, mode):
    with self.assertRaisesRegex(ValueError,
                                'neighboring_relation.*REPLACE_ONE'):
      accounting.make_dp_rec_accountant(
          accounting=mode,
          neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)

  @parameterized.named_parameters(
      ('zero', 0, ValueError, r'count.*0'),
      ('negative', -1, ValueError, r'count.*-1'),
      ('float', 1.5, TypeError, r'count.*1\.5'),
      ('bool', True, TypeError, r'count.*True'),
      ('str', '2', TypeError, r"count.*'2'"),
  )
  def test_count(self, count, error, message):
    for mode in _MODES:
      accountant = accounting.make_dp_rec_accountant(accounting=mode)
      with self.assertRaisesRegex(error, message):
        accountant.compose(_round(mode), count)
      self.assertEqual(accountant.get_epsilon(_DELTA), 0.0)

  @parameterized.parameters(*_MODES)
  def test_self_composed_count(self, mode):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    # dp_accounting's ledger takes positive counts only.
    for count in (0, -2, 1.5):
      event = dp_accounting.SelfComposedDpEvent(_round(mode), count)
      self.assertFalse(accountant.supports(event))
      with self.assertRaisesRegex(dp_accounting.UnsupportedEventError,
                                  f'count.*{count}'):
        accountant.compose(event)

  @parameterized.parameters(*_MODES)
  def test_event_type(self, mode):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    with self.assertRaisesRegex(TypeError, 'DpEvent'):
      accountant.compose(dict(_ROUND))

  @parameterized.parameters(
      *[(mode, delta) for mode in _MODES
        for delta in (0.0, 1.0, -0.1, float('nan'))])
  def test_target_delta(self, mode, delta):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    accountant.compose(_round(mode))
    with self.assertRaisesRegex(ValueError, f'target_delta.*{delta}'):
      accountant.get_epsilon(delta)


class CompositionInStepsTest(parameterized.TestCase):
  """Composing round by round leaves the state of one composition."""

  @parameterized.parameters('min_pld_rdp', 'rdp')
  def test_round_by_round_equals_one_composition(self, mode):
    stepped = accounting.make_dp_rec_accountant(accounting=mode)
    self.assertTrue(stepped.composes_exactly)
    for rounds in range(1, 6):
      stepped.compose(_round(mode))
      once = accounting.make_dp_rec_accountant(accounting=mode)
      once.compose(_round(mode), rounds)
      self.assertEqual(stepped.get_epsilon(_DELTA), once.get_epsilon(_DELTA))
      np.testing.assert_array_equal(stepped.rdp, once.rdp)

  @parameterized.parameters('min_pld_rdp', 'rdp')
  def test_every_form_of_the_same_rounds_agrees(self, mode):
    event = _round(mode)
    forms = (
        [(event, 6)],
        [(dp_accounting.SelfComposedDpEvent(event, 6), 1)],
        [(dp_accounting.ComposedDpEvent([event] * 6), 1)],
        [(event, 2), (dp_accounting.SelfComposedDpEvent(event, 2), 2)],
    )
    epsilons = []
    for form in forms:
      accountant = accounting.make_dp_rec_accountant(accounting=mode)
      for e, count in form:
        accountant.compose(e, count)
      epsilons.append(accountant.get_epsilon(_DELTA))
    self.assertEqual(epsilons, [epsilons[0]] * len(forms))

  @parameterized.parameters('min_pld_rdp', 'rdp')
  def test_mixed_kinds_in_steps(self, mode):
    # Rounds, a known participant's release, more rounds: the state of the
    # rounds composed at once, then the release.
    stepped = accounting.make_dp_rec_accountant(accounting=mode)
    stepped.compose(_round(mode), 2)
    stepped.compose(_release(mode))
    stepped.compose(_round(mode), 3)
    once = accounting.make_dp_rec_accountant(accounting=mode)
    once.compose(_round(mode), 5)
    once.compose(_release(mode))
    self.assertEqual(stepped.get_epsilon_and_optimal_order(_DELTA),
                     once.get_epsilon_and_optimal_order(_DELTA))

  def test_paper_composes_in_steps_to_round_off(self):
    # The paper's accountant adds each composition's divergences.
    stepped = accounting.make_dp_rec_accountant(accounting='paper')
    self.assertFalse(stepped.composes_exactly)
    for _ in range(5):
      stepped.compose(_round('paper'))
    once = accounting.make_dp_rec_accountant(accounting='paper')
    once.compose(_round('paper'), 5)
    self.assertAlmostEqual(stepped.get_epsilon(_DELTA),
                           once.get_epsilon(_DELTA), places=12)


if __name__ == '__main__':
  warnings.simplefilter('ignore', accounting.UnprovenPaperBoundWarning)
  absltest.main()
