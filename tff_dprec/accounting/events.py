"""DP-REC's `DpEvent`, the event of one round, and the checks they share.

`DpRecEvent` holds data only, as `dp_accounting/dp_event.py`'s events do;
the accountants (`pld_accountant`, `rdp_accountant`, `paper_accountant`)
compose it, alone (a known participant) or inside
`PoissonSampledDpEvent(q, DpRecEvent)` (one client draw with probability
q, as `dp_rec_round_event` builds a round).
"""

from typing import Optional

import attr
import dp_accounting

from tff_dprec import validation
from tff_dprec.accounting import accountings


def _check_clip_ratio(instance, attribute, value):
  del instance, attribute
  validation.check_nonnegative_number(value, 'clip_ratio')


def _check_bits(instance, attribute, value):
  del instance, attribute
  validation.check_int_in_range(value, 'bits', 1, 4096)


def _check_num_groups(instance, attribute, value):
  del instance, attribute
  validation.check_positive_int(value, 'num_groups')


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DpRecEvent(dp_accounting.DpEvent):
  """One DP-REC release of one client's update.

  The client clips its update v to |v|_2 <= clip_ratio * s, splits it into
  `num_groups` groups and, for each group, sends the index of one of
  2^bits candidates drawn from p = N(0, s^2 I) with a public seed, chosen
  with probability proportional to q(x)/p(x), q = N(v_g, s^2 I).

  Attributes:
    clip_ratio: c = l2_clip / noise_stddev (non-negative).
    bits: Index bits of each group.
    num_groups: Number of groups M (the message carries M * bits index
      bits); required: `learning.message_layout(model_fn, ...).num_groups`
      gives a model's (one group is the least conservative guess).
  """
  clip_ratio: float = attr.ib(validator=_check_clip_ratio)
  bits: int = attr.ib(validator=_check_bits)
  num_groups: int = attr.ib(validator=_check_num_groups)

  @property
  def total_bits(self) -> int:
    return self.bits * self.num_groups


def dp_rec_round_event(*, clip_ratio: float, population: int,
                       clients_per_round: int, bits: Optional[int] = None,
                       num_groups: Optional[int] = None,
                       total_bits: Optional[int] = None
                       ) -> dp_accounting.DpEvent:
  """One DP-REC round: B client draws with replacement, each with q = 1/N."""
  q = draw_rate(population, clients_per_round)
  if total_bits is not None:
    bits, num_groups = resolve_bits(accountings.PAPER, bits, num_groups,
                                    total_bits)
  else:
    bits, num_groups = resolve_bits(accountings.PLD, bits, num_groups, None)
  return dp_accounting.SelfComposedDpEvent(
      dp_accounting.PoissonSampledDpEvent(
          q, DpRecEvent(clip_ratio, bits, num_groups)),
      clients_per_round)


def resolve_bits(accounting: str, bits: Optional[int],
                 num_groups: Optional[int], total_bits: Optional[int]):
  """Returns (bits, num_groups) from the caller's arguments, checked.

  The proven accountings need `bits` (per group) and `num_groups`;
  `total_bits` (one index of that many bits) is the paper mode's, which
  also accepts `bits` with `num_groups`.
  """
  validation.check_choice(accounting, 'accounting', accountings.ACCOUNTINGS)
  if total_bits is not None:
    if accounting != accountings.PAPER:
      raise ValueError(
          f"total_bits={total_bits!r} is the paper mode's message size; "
          f"accounting={accounting!r} needs bits (per group) and num_groups. "
          "Pass "
          "bits= and num_groups=, or accounting='paper'.")
    if bits is not None or num_groups is not None:
      raise ValueError(
          f'Pass either total_bits={total_bits!r} or bits={bits!r} with '
          f'num_groups={num_groups!r}, not both.')
    validation.check_positive_int(total_bits, 'total_bits')
    return int(total_bits), 1
  if bits is None or num_groups is None:
    raise ValueError(
        f'bits (per group) and num_groups are required, found bits={bits!r}, '
        f'num_groups={num_groups!r}.')
  validation.check_positive_int(bits, 'bits')
  validation.check_positive_int(num_groups, 'num_groups')
  return int(bits), int(num_groups)


def sampling_rate(population: int, clients_per_round: int) -> float:
  """q = B/N, checked (DP-FedAvg's and DDGauss's sampling probability)."""
  validation.check_positive_int(population, 'population')
  validation.check_positive_int(clients_per_round, 'clients_per_round')
  if clients_per_round > population:
    raise ValueError(
        f'clients_per_round={clients_per_round} exceeds population='
        f'{population}.')
  return clients_per_round / population


def draw_rate(population: int, clients_per_round: int) -> float:
  """q = 1/N of one DP-REC draw; the amplified analysis needs N >= 2."""
  sampling_rate(population, clients_per_round)
  if population < 2:
    raise ValueError(
        f'population={population}: the amplified DP-REC epsilon compares a '
        "draw of the target with another client's message, so it needs "
        'population >= 2; dp_rec_local_epsilon gives the epsilon of a '
        'known participant.')
  return 1.0 / population
