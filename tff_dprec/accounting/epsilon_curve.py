"""DP-REC's epsilon after every round of one run, from one kept state.

A run reports its epsilon after each round; `dp_rec_epsilon` would build
the accountant from scratch every time. `DpRecEpsilonCurve` keeps what the
rounds share, and gives the same values:

* `'pld'`: one client draw's PLD (`message_profile.draw_pld`), its Renyi
  bound, and the transform and tail bounds of its self-composition
  (`loss_pmf.SelfComposer`); after r rounds, r B draws cost one power and
  one inverse FFT, and epsilon is the smaller of the PLD's and the Renyi
  one, as `pld_accountant.DpRecPldAccountant` gives it;
* `'rdp'` and `'paper'`: the accountant of the run composed afresh (its
  bounds per draw are kept by their modules, so a round costs little).
"""

from typing import List, Optional, Sequence

from dp_accounting.rdp import rdp_privacy_accountant
import numpy as np

from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import dp_rec_accountant
from tff_dprec.accounting import events
from tff_dprec.accounting import loss_pmf
from tff_dprec.accounting import message_profile
from tff_dprec.accounting import paper_accountant
from tff_dprec.accounting import pld_accountant
from tff_dprec.accounting import rdp_bounds


class DpRecEpsilonCurve:
  """Epsilon of one DP-REC run after any number of rounds.

  `epsilon(rounds)` equals `dp_rec_epsilon(rounds=rounds, ...)` with the
  same arguments (tests/accounting_epsilon_curve_test.py), at about the
  cost of one round's composition instead of an accountant's construction.
  """

  def __init__(self, *, clip_ratio: float, population: int,
               clients_per_round: int, delta: float,
               bits: Optional[int] = None, num_groups: Optional[int] = None,
               total_bits: Optional[int] = None,
               accounting: str = accountings.DEFAULT_ACCOUNTING,
               reverse_divergence: str = (
                   paper_accountant.REVERSE_FORWARD_BOUND)):
    """Arguments as `dp_rec_epsilon`'s, without `rounds`.

    Raises:
      ValueError, TypeError: For invalid arguments.
    """
    validation.check_nonnegative_number(clip_ratio, 'clip_ratio')
    validation.check_probability(delta, 'delta')
    self._q = events.draw_rate(population, clients_per_round)
    self._bits, self._groups = events.resolve_bits(accounting, bits,
                                                   num_groups, total_bits)
    # The accountant dp_rec_epsilon would use (which also checks the
    # remaining arguments): the kept state is its PLD's.
    accountant = dp_rec_accountant.make_dp_rec_accountant(
        accounting=accounting, reverse_divergence=reverse_divergence)
    self._kwargs = dict(
        clip_ratio=clip_ratio, population=population,
        clients_per_round=clients_per_round, delta=delta,
        accounting=accounting, reverse_divergence=reverse_divergence)
    if total_bits is not None:
      self._kwargs['total_bits'] = total_bits
    else:
      self._kwargs.update(bits=self._bits, num_groups=self._groups)
    self._clip_ratio = float(clip_ratio)
    self._clients = int(clients_per_round)
    self._delta = float(delta)
    self._pld = (isinstance(accountant, pld_accountant.DpRecPldAccountant)
                 and self._clip_ratio > 0)
    self._rdp_per_draw = None  # Kept at the first round asked.
    self._self_composers = None

  def epsilon(self, rounds: int) -> float:
    """Epsilon after `rounds` rounds (0 gives 0)."""
    validation.check_nonnegative_int(rounds, 'rounds')
    if rounds == 0:
      return 0.0  # Nothing released.
    if not self._pld:
      return dp_rec_accountant.dp_rec_epsilon(rounds=rounds, **self._kwargs)
    draws = self._clients * int(rounds)
    rdp = draws * self._draw_rdp()
    # As `DpRecPldAccountant.get_epsilon_and_optimal_order`: the Renyi
    # epsilon, and the PLD's where smaller.
    eps = float(rdp_privacy_accountant.compute_epsilon(
        _ORDERS.astype(np.float64), rdp, self._delta)[0])
    if not np.any(rdp):
      return eps
    composers = self._composers()
    pld_eps = max(composers[0].compose(draws).epsilon_for_delta(self._delta),
                  composers[1].compose(draws).epsilon_for_delta(self._delta))
    return float(pld_eps) if pld_eps < eps else eps

  def epsilons(self, rounds: Sequence[int]) -> List[float]:
    """`epsilon` at each of `rounds`."""
    return [self.epsilon(r) for r in rounds]

  def _draw_rdp(self) -> np.ndarray:
    if self._rdp_per_draw is None:
      self._rdp_per_draw = rdp_bounds.sound_rdp(
          self._q, self._clip_ratio, self._bits, self._groups, _ORDERS)
    return self._rdp_per_draw

  def _composers(self):
    if self._self_composers is None:
      _, pld = message_profile.draw_pld(
          q=self._q, clip_ratio=self._clip_ratio, bits=self._bits,
          num_groups=self._groups,
          discretization=message_profile.DEFAULT_DISCRETIZATION)
      self._self_composers = (loss_pmf.SelfComposer(pld.remove),
                              loss_pmf.SelfComposer(pld.add))
    return self._self_composers


_ORDERS = np.asarray(rdp_bounds.SOUND_ORDERS, np.int64)


def dp_rec_epsilons(*, rounds: Sequence[int], **kwargs) -> List[float]:
  """`dp_rec_epsilon` after each of `rounds`, from one `DpRecEpsilonCurve`.

  Args:
    rounds: Round counts (each >= 0).
    **kwargs: `dp_rec_epsilon`'s other arguments.
  """
  return DpRecEpsilonCurve(**kwargs).epsilons(rounds)
