"""DP-REC's epsilon after every round of one run, from one accountant.

A run reports its epsilon after each round. `DpRecEpsilonCurve` keeps the
accountant `dp_rec_epsilon` would use and composes each new round's
`DpRecRoundEvent` into it, as one uses dp_accounting's accountants; its
epsilon after r rounds is the accountant's, the same value as
`dp_rec_epsilon(rounds=r, ...)`.
"""

from typing import Dict, List, Optional, Sequence

from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import dp_rec_accountant
from tff_dprec.accounting import paper_accountant


class DpRecEpsilonCurve:
  """Epsilon of one DP-REC run after any number of rounds.

  `epsilon(rounds)` equals `dp_rec_epsilon(rounds=rounds, ...)` with the
  same arguments (tests/library/accounting_epsilon_curve_test.py). The
  accountant composes the rounds not yet composed; an accountant whose
  composition in steps is not exact (`composes_exactly`: the paper's), or a
  round count below the one composed, gets a new accountant composed from
  round 0.
  Values already computed are kept.
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
    accounting = accountings.resolve(accounting)
    validation.check_nonnegative_number(clip_ratio, 'clip_ratio')
    validation.check_probability(delta, 'delta')
    self._event = dp_rec_accountant.round_event(
        clip_ratio=clip_ratio, population=population,
        clients_per_round=clients_per_round, bits=bits,
        num_groups=num_groups, total_bits=total_bits, accounting=accounting)
    self._accounting = accounting
    self._reverse_divergence = reverse_divergence
    self._delta = float(delta)
    self._accountant = self._new_accountant()  # Also checks the arguments.
    self._rounds = 0  # Composed into self._accountant.
    self._epsilons: Dict[int, float] = {0: 0.0}  # Nothing released at 0.

  def epsilon(self, rounds: int) -> float:
    """Epsilon after `rounds` rounds (0 gives 0)."""
    validation.check_nonnegative_int(rounds, 'rounds')
    rounds = int(rounds)
    if rounds not in self._epsilons:
      if rounds < self._rounds or not self._accountant.composes_exactly:
        self._accountant, self._rounds = self._new_accountant(), 0
      self._accountant.compose(self._event, rounds - self._rounds)
      self._rounds = rounds
      self._epsilons[rounds] = self._accountant.get_epsilon(self._delta)
    return self._epsilons[rounds]

  def epsilons(self, rounds: Sequence[int]) -> List[float]:
    """`epsilon` at each of `rounds`."""
    return [self.epsilon(r) for r in rounds]

  def _new_accountant(self):
    # Looked up at each call, as dp_rec_epsilon does (tests swap it).
    return dp_rec_accountant.make_dp_rec_accountant(
        accounting=self._accounting,
        reverse_divergence=self._reverse_divergence)


def dp_rec_epsilon_curve(*, rounds: Sequence[int], **kwargs) -> List[float]:
  """`dp_rec_epsilon` after each of `rounds`, from one `DpRecEpsilonCurve`.

  Args:
    rounds: Round counts (each >= 0).
    **kwargs: `dp_rec_epsilon`'s other arguments.
  """
  return DpRecEpsilonCurve(**kwargs).epsilons(rounds)
