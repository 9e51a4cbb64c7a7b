"""DP-REC's accountant by name (`make_dp_rec_accountant`); its epsilons.

`make_dp_rec_accountant(accounting=...)` returns the accountant of that
accounting (`accountings`): `'min_pld_rdp'` (the default, `pld_accountant`: the
smaller of the certified PLD and RDP epsilons), `'rdp'` (`rdp_accountant`)
or `'paper'` (`paper_accountant`).
`dp_rec_epsilon` is the epsilon of a training run (T rounds of B draws with
q = 1/N: `events.DpRecRoundEvent` composed T times), `dp_rec_local_epsilon`
that of a known participant (`events.DpRecEvent`).
Derivations and what is assumed: docs/PRIVACY.md.
"""

from typing import Optional, Sequence

import dp_accounting

from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import base_accountant
from tff_dprec.accounting import events
from tff_dprec.accounting import message_profile
from tff_dprec.accounting import paper_accountant
from tff_dprec.accounting import pld_accountant
from tff_dprec.accounting import rdp_accountant

_NeighborRel = dp_accounting.NeighboringRelation


def make_dp_rec_accountant(
    orders: Optional[Sequence[float]] = None,
    accounting: str = accountings.DEFAULT_ACCOUNTING,
    reverse_divergence: str = paper_accountant.REVERSE_FORWARD_BOUND,
    neighboring_relation: _NeighborRel = _NeighborRel.ADD_OR_REMOVE_ONE,
    discretization: float = message_profile.DEFAULT_DISCRETIZATION
) -> base_accountant.DpRecAccountantBase:
  """The DP-REC accountant of `accounting`, a `dp_accounting.PrivacyAccountant`.

  Args:
    orders: Renyi orders. `'min_pld_rdp'` and `'rdp'`: integers >= 2 (default
      `PROVEN_ORDERS`); `'paper'`: values > 1 (default `PAPER_ORDERS`).
    accounting: `'min_pld_rdp'` (default): `DpRecPldAccountant`, the
      smaller of the certified PLD and RDP epsilons; `'rdp'`:
      `DpRecRdpAccountant`, the RDP epsilon alone; `'paper'`:
      `DpRecPaperAccountant` (the paper's Theorem 1, unproven).
    reverse_divergence: `'paper'` only: how D(p || mix) is bounded,
      `'forward_bound'` (the paper's) or `'numerical'` (quadrature).
    neighboring_relation: Must be `ADD_OR_REMOVE_ONE`.
    discretization: `'min_pld_rdp'`: the loss grid of one draw's PLD
      (checked for every accounting).

  Raises:
    ValueError: For invalid arguments.
  """
  accounting = accountings.resolve(accounting)
  validation.check_choice(reverse_divergence, 'reverse_divergence',
                          (paper_accountant.REVERSE_FORWARD_BOUND,
                           paper_accountant.REVERSE_NUMERICAL))
  validation.check_positive_number(discretization, 'discretization')
  if accounting == accountings.PAPER:
    return paper_accountant.DpRecPaperAccountant(
        orders, reverse_divergence, neighboring_relation)
  if reverse_divergence != paper_accountant.REVERSE_FORWARD_BOUND:
    raise ValueError(
        "reverse_divergence applies to accounting='paper' only, found "
        f'reverse_divergence={reverse_divergence!r}.')
  if accounting == accountings.MIN_PLD_RDP:
    return pld_accountant.DpRecPldAccountant(orders, neighboring_relation,
                                             discretization)
  return rdp_accountant.DpRecRdpAccountant(orders, neighboring_relation)


def dp_rec_epsilon(*, clip_ratio: float, population: int,
                   clients_per_round: int, rounds: int, delta: float,
                   bits: Optional[int] = None,
                   num_groups: Optional[int] = None,
                   total_bits: Optional[int] = None,
                   accounting: str = accountings.DEFAULT_ACCOUNTING,
                   reverse_divergence: str = (
                       paper_accountant.REVERSE_FORWARD_BOUND)) -> float:
  """Epsilon of DP-REC after `rounds` rounds (T*B draws with q = 1/N).

  Args:
    clip_ratio: c = l2_clip / noise_stddev, >= 0.
    population: N, the number of clients in the federation.
    clients_per_round: B, drawn with replacement.
    rounds: T (0 gives epsilon 0).
    delta: Target delta in (0, 1).
    bits: Index bits per group.
    num_groups: Groups per message.
    total_bits: Paper mode only: the message's index bits as one index.
    accounting: `'min_pld_rdp'` (default: the smaller of the certified PLD
      and RDP epsilons), `'rdp'` (the RDP epsilon) or `'paper'` (the paper's
      Theorem 1, unproven; docs/PRIVACY.md).
    reverse_divergence: Paper mode only, see `make_dp_rec_accountant`.

  Raises:
    ValueError, TypeError: For invalid arguments.
    OverheadExceedsDeltaError: Paper mode, delta at or below the overhead.
  """
  accounting = accountings.resolve(accounting)
  validation.check_nonnegative_int(rounds, 'rounds')
  validation.check_probability(delta, 'delta')
  event = round_event(clip_ratio=clip_ratio, population=population,
                      clients_per_round=clients_per_round, bits=bits,
                      num_groups=num_groups, total_bits=total_bits,
                      accounting=accounting)
  accountant = make_dp_rec_accountant(accounting=accounting,
                                      reverse_divergence=reverse_divergence)
  if rounds == 0:
    return 0.0  # Nothing released.
  accountant.compose(event, rounds)
  return accountant.get_epsilon(delta)


def round_event(*, clip_ratio: float, population: int,
                clients_per_round: int, bits: Optional[int],
                num_groups: Optional[int], total_bits: Optional[int],
                accounting: str) -> events.DpRecRoundEvent:
  """`events.dp_rec_round_event`, its message size checked for `accounting`.

  Raises:
    ValueError, TypeError: For invalid arguments.
  """
  events.resolve_bits(accounting, bits, num_groups, total_bits)
  return events.dp_rec_round_event(
      clip_ratio=clip_ratio, population=population,
      clients_per_round=clients_per_round, bits=bits, num_groups=num_groups,
      total_bits=total_bits)


def dp_rec_local_epsilon(*, clip_ratio: float, delta: float,
                         bits: Optional[int] = None,
                         num_groups: Optional[int] = None,
                         total_bits: Optional[int] = None, rounds: int = 1,
                         accounting: str = accountings.DEFAULT_ACCOUNTING
                         ) -> float:
  """Epsilon of `rounds` releases of one client, without amplification.

  Add/remove: a client's message against a message that encodes nothing;
  see docs/PRIVACY.md for substitution.
  """
  accounting = accountings.resolve(accounting)
  validation.check_nonnegative_int(rounds, 'rounds')
  validation.check_probability(delta, 'delta')
  bits, num_groups = events.resolve_bits(accounting, bits, num_groups,
                                         total_bits)
  accountant = make_dp_rec_accountant(accounting=accounting)
  event = events.DpRecEvent(clip_ratio, bits, num_groups)
  if rounds == 0:
    return 0.0  # Nothing released.
  accountant.compose(event, rounds)
  return accountant.get_epsilon(delta)
