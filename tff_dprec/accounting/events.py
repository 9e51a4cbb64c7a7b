"""DP-REC's `DpEvent`s: one client's release, and one round of draws.

Both hold data only, as `dp_accounting/dp_event.py`'s events do; the
accountants (`pld_accountant`, `rdp_accountant`, `paper_accountant`, over
`base_accountant`) interpret them:

* `DpRecEvent`: one release of a known participant's message (no
  amplification);
* `DpRecRoundEvent`: one round of Algorithm 7, B draws with replacement
  from N clients, each draw releasing the drawn client's message.

A round is its own event because no dp_accounting event means the same:
`PoissonSampledDpEvent` includes each record independently, and
`SampledWithReplacementDpEvent` applies one event to the whole sample (and
dp_accounting 0.4.3's accountants support neither for this). Build a round
with `dp_rec_round_event`, which also takes the paper mode's `total_bits`.
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


def _check_population(instance, attribute, value):
  del instance, attribute
  validation.check_positive_int(value, 'population')


def _check_clients_per_round(instance, attribute, value):
  del instance, attribute
  validation.check_positive_int(value, 'clients_per_round')


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DpRecEvent(dp_accounting.DpEvent):
  """One DP-REC release of one client's update.

  The client clips its update v to |v|_2 <= clip_ratio * s, splits it into
  `num_groups` groups and, for each group, sends the index of one of
  2^bits candidates drawn from p = N(0, s^2 I) with a public seed, chosen
  with probability proportional to q(x)/p(x), q = N(v_g, s^2 I).

  Composed alone, it is the release of a known participant: for
  add/remove-one-client neighbours, the client's message P_v against the
  message of the same client with no data, P_0.

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


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DpRecRoundEvent(dp_accounting.DpEvent):
  """One DP-REC round: B draws with replacement, each releasing a message.

  Algorithm 7: each of the B = `clients_per_round` draws picks one of the
  N = `population` clients uniformly at random, independently of the other
  draws, and releases the picked client's message (`message_event`), so a
  draw picks the target with probability q = 1/N (`draw_rate`). The
  server sees every message: for add/remove-one-client neighbours a draw
  that misses the target holds another client's message, so each draw is
  bounded by the pair ((1 - q) P_y + q P_v, P_y) for the worst other
  client y (docs/PRIVACY.md, Sections 3 and 9), and a round composes B
  such draws. N >= 2: a draw must be able to miss the target.

  Attributes:
    population: N, the number of clients (at least 2).
    clients_per_round: B, the draws of a round (at most N).
    clip_ratio: c = l2_clip / noise_stddev of each message (non-negative).
    bits: Index bits of each group.
    num_groups: Groups of each message.
  """
  population: int = attr.ib(validator=_check_population)
  clients_per_round: int = attr.ib(validator=_check_clients_per_round)
  clip_ratio: float = attr.ib(validator=_check_clip_ratio)
  bits: int = attr.ib(validator=_check_bits)
  num_groups: int = attr.ib(validator=_check_num_groups)

  def __attrs_post_init__(self):
    draw_rate(self.population, self.clients_per_round)

  @property
  def draw_rate(self) -> float:
    """q = 1/N, the probability that one draw picks a given client."""
    return draw_rate(self.population, self.clients_per_round)

  @property
  def message_event(self) -> DpRecEvent:
    """The `DpRecEvent` of each draw's message."""
    return DpRecEvent(self.clip_ratio, self.bits, self.num_groups)

  @property
  def total_bits(self) -> int:
    return self.bits * self.num_groups


def dp_rec_round_event(*, clip_ratio: float, population: int,
                       clients_per_round: int, bits: Optional[int] = None,
                       num_groups: Optional[int] = None,
                       total_bits: Optional[int] = None) -> DpRecRoundEvent:
  """The `DpRecRoundEvent` of one round: B draws with q = 1/N each.

  Args:
    clip_ratio: c = l2_clip / noise_stddev, >= 0.
    population: N, at least 2.
    clients_per_round: B, at most N.
    bits: Index bits per group (with `num_groups`).
    num_groups: Groups per message (with `bits`).
    total_bits: The paper mode's message size as one index of that many
      bits (one group), instead of `bits` and `num_groups`.

  Raises:
    ValueError, TypeError: For invalid arguments.
  """
  draw_rate(population, clients_per_round)
  if total_bits is not None:
    bits, num_groups = resolve_bits(accountings.PAPER, bits, num_groups,
                                    total_bits)
  else:
    bits, num_groups = resolve_bits(accountings.MIN_PLD_RDP, bits,
                                    num_groups, None)
  return DpRecRoundEvent(population, clients_per_round, clip_ratio, bits,
                         num_groups)


def resolve_bits(accounting: str, bits: Optional[int],
                 num_groups: Optional[int], total_bits: Optional[int]):
  """Returns (bits, num_groups) from the caller's arguments, checked.

  The proven accountings need `bits` (per group) and `num_groups`;
  `total_bits` (one index of that many bits) is the paper mode's, which
  also accepts `bits` with `num_groups`.
  """
  accounting = accountings.resolve(accounting)
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
