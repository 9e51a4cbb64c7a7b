"""DP-REC privacy accounting: the event, the accountant, epsilon functions.

Three accountings (derivations and what is assumed: docs/PRIVACY.md):

* `'pld'` (default). A privacy loss distribution of the same release
  (docs/PRIVACY.md, Section 9): certified profiles of one message
  (`message_profile`), the exact Poisson-subsampling forms of the
  substitution pair in both directions, a pessimistic connect-the-dots PLD
  per draw, composed with dp_accounting's PLD. The epsilon returned is the
  smaller of this and the `'rdp'` epsilon (both are upper bounds).

* `'rdp'` (alias `'sound'`). Renyi DP of what a client releases, the seed and its
  M indices, for add/remove-one-client neighbours:
    - one message: eps(a) = max over the two directions of the worst case,
      over splits sum_g c_g^2 <= c^2, of the per-group divergences summed over
      groups (`channel.message_rdp`: exact reverse divergence, upper bounds
      on the forward one);
    - one client draw with probability q (Algorithm 7: q = 1/N per draw, B
      draws per round): a draw that misses the target holds another
      client's message, so the base RDP is the substitution bound
      `channel.substitution_rdp`, amplified by the general Poisson
      subsampling bound of Zhu and Wang (ICML 2019, Theorem 6);
    - composition over draws and rounds by adding RDP; conversion to
      (epsilon, delta) with dp_accounting's conversion (Canonne, Kamath,
      Steinke 2020, Prop. 12), valid for any pair of distributions.
  The amplified epsilon protects against observers who do not know who was
  sampled; against the server, a participation costs the local epsilon
  (`dp_rec_local_epsilon`). No delta overhead.

* `'paper'`: Theorem 1 and Algorithm 7 of Triastcyn et al. as published,
    eps = min_l sum [D_{l+1}(mix || p) + D_{l+1}(p || mix)]
          - log(delta - 12/2^b rho)/l,  rho = sum exp(c^2),
  with b the message's total index bits and mix = (1-q) p + q q_v: a draw
  that misses the target is compared with the prior, which does not hold
  when the server sees individual messages (docs/PRIVACY.md, Section 5).
  For M > 1 groups the step "M groups of b bits = one index of M b bits"
  (Theorem 3) is also unproven (a simulation refutes the resulting bias
  bound), so the paper mode warns with `UnprovenPaperBound`. Kept to
  reproduce the paper's Table 1.
"""

import math
import sys
from typing import Optional, Sequence
import warnings

import attr
import dp_accounting
from dp_accounting.rdp import rdp_privacy_accountant
import numpy as np
from scipy import integrate
from scipy import special

from tff_dprec import validation
from tff_dprec.accounting import channel
from tff_dprec.accounting import message_profile

PLD = 'pld'
RDP = 'rdp'
SOUND = 'sound'  # The earlier name of 'rdp'.
PAPER = 'paper'
ACCOUNTINGS = (PLD, RDP, SOUND, PAPER)


def canonical(accounting: str) -> str:
  """The accounting's name, with the alias 'sound' as 'rdp'."""
  validation.check_choice(accounting, 'accounting', ACCOUNTINGS)
  return RDP if accounting == SOUND else accounting

# Sound mode: integer orders (exact reverse divergence, Zhu-Wang bound).
SOUND_ORDERS = tuple(range(2, 65))
# Paper mode: any orders > 1; dense where the optima fall.
PAPER_ORDERS = tuple(
    [1.0 + x / 20.0 for x in range(1, 200)] + list(range(11, 129)) +
    [160, 192, 256, 384, 512, 1024])
DEFAULT_ORDERS = PAPER_ORDERS  # Backwards-compatible name (paper mode).

REVERSE_FORWARD_BOUND = 'forward_bound'
REVERSE_NUMERICAL = 'numerical'

_NeighborRel = dp_accounting.NeighboringRelation


class OverheadExceedsDeltaError(ValueError):
  """Paper mode: the 12/2^b * rho overhead of Theorem 1 is at least delta."""


class UnprovenPaperBound(UserWarning):
  """Paper mode with grouped messages: the epsilon rests on an unproven step."""


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
    num_groups: Number of groups M (the message carries M * bits index bits).
  """
  clip_ratio: float = attr.ib(validator=_check_clip_ratio)
  bits: int = attr.ib(validator=_check_bits)
  num_groups: int = attr.ib(default=1, validator=_check_num_groups)

  @property
  def total_bits(self) -> int:
    return self.bits * self.num_groups


class DpRecAccountant(dp_accounting.PrivacyAccountant):
  """Privacy accountant for DP-REC.

  Supports `DpRecEvent` (a release without amplification),
  `PoissonSampledDpEvent(q, DpRecEvent)` (one client draw with probability
  q; `dp_rec_round_event` builds a round) and `NoOpDpEvent`,
  `NonPrivateDpEvent`, `ComposedDpEvent`, `SelfComposedDpEvent` of those.

  With `accounting='pld'` (default) it composes both a PLD and the Renyi
  bounds, and `get_epsilon` returns the smaller epsilon.
  """

  def __init__(self,
               orders: Optional[Sequence[float]] = None,
               accounting: str = PLD,
               reverse_divergence: str = REVERSE_FORWARD_BOUND,
               neighboring_relation: _NeighborRel = _NeighborRel
               .ADD_OR_REMOVE_ONE,
               discretization: float = message_profile.DEFAULT_DISCRETIZATION):
    """Initializes the accountant.

    Args:
      orders: Renyi orders. PLD and RDP modes: integers >= 2 (default
        `SOUND_ORDERS`); paper mode: values > 1 (default `PAPER_ORDERS`).
      accounting: `'pld'` (default), `'rdp'` (or its alias `'sound'`) or
        `'paper'`; see the module docstring.
      discretization: PLD mode: the loss grid of one draw's PLD (coarser
        where one draw's losses spread wider than 40,000 steps).
      reverse_divergence: Paper mode only: how D(p || mix) is bounded,
        `'forward_bound'` (the paper's) or `'numerical'` (quadrature).
      neighboring_relation: Must be `ADD_OR_REMOVE_ONE`.

    Raises:
      ValueError: For invalid arguments.
    """
    if neighboring_relation is not _NeighborRel.ADD_OR_REMOVE_ONE:
      raise ValueError(
          'DpRecAccountant supports neighboring_relation=ADD_OR_REMOVE_ONE '
          f'only, found {neighboring_relation!r}.')
    super().__init__(neighboring_relation)
    validation.check_choice(accounting, 'accounting', ACCOUNTINGS)
    validation.check_choice(reverse_divergence, 'reverse_divergence',
                            (REVERSE_FORWARD_BOUND, REVERSE_NUMERICAL))
    validation.check_positive_number(discretization, 'discretization')
    if accounting != PAPER and reverse_divergence != REVERSE_FORWARD_BOUND:
      raise ValueError(
          "reverse_divergence applies to accounting='paper' only, found "
          f'reverse_divergence={reverse_divergence!r}.')
    self._accounting = accounting
    self._reverse_divergence = reverse_divergence
    self._discretization = float(discretization)
    # PLD mode: draw counts per (q, c, bits, groups), composed on demand.
    self._draws = {}
    self._composed = None
    self._non_private = False
    if accounting != PAPER:
      self._orders = channel.check_orders(
          SOUND_ORDERS if orders is None else orders)
      self._rdp = np.zeros(len(self._orders))
    else:
      orders = np.asarray(PAPER_ORDERS if orders is None else orders,
                          dtype=np.float64)
      if orders.ndim != 1 or orders.size == 0 or not np.all(orders > 1):
        raise ValueError(f'orders must be a non-empty list of values > 1, '
                         f'found {orders!r}.')
      self._orders = orders
      self._forward = np.zeros_like(orders)
      self._reverse = np.zeros_like(orders)
      self._overhead = 0.0  # sum_t 12 / 2^b_t * exp(c_t^2)
      self._rho = 0.0  # sum_t exp(c_t^2)

  @property
  def accounting(self) -> str:
    return self._accounting

  @property
  def orders(self) -> np.ndarray:
    return np.copy(self._orders)

  @property
  def rdp(self) -> np.ndarray:
    """PLD and RDP modes: the composed RDP, one value per order."""
    if self._accounting == PAPER:
      raise ValueError("rdp is not defined for accounting='paper'.")
    return np.copy(self._rdp)

  @property
  def overhead(self) -> float:
    """Paper mode: the delta overhead 12 sum_t 2^-b_t exp(c_t^2) so far."""
    return self._overhead if self._accounting == PAPER else 0.0

  def _maybe_compose(self, event, count, do_compose):
    if isinstance(event, dp_accounting.NoOpDpEvent):
      return None
    if isinstance(event, dp_accounting.NonPrivateDpEvent):
      if do_compose:
        self._non_private = True
        if self._accounting != PAPER:
          self._rdp += np.inf
        else:
          self._forward += np.inf
      return None
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
      return self._maybe_compose(event.event, event.count * count, do_compose)
    if isinstance(event, dp_accounting.ComposedDpEvent):
      for e in event.events:
        result = self._maybe_compose(e, count, do_compose)
        if result is not None:
          return result
      return None
    if isinstance(event, DpRecEvent):
      if do_compose:
        self._compose(1.0, event, count)
      return None
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
      if not isinstance(event.event, DpRecEvent):
        return self.CompositionErrorDetails(
            invalid_event=event,
            error_message='DpRecAccountant supports PoissonSampledDpEvent of '
            f'a DpRecEvent only, found subevent {event.event}.')
      q = event.sampling_probability
      if self._accounting == PLD and q >= 1.0:
        # The PLD models a draw against another client's message, which a
        # draw that always picks the target (population 1) does not have;
        # a known participant is a DpRecEvent (the local pair).
        return self.CompositionErrorDetails(
            invalid_event=event,
            error_message="accounting='pld' needs a sampling probability "
            f'below 1, found {q!r}; compose a DpRecEvent for a release '
            'without sampling.')
      if do_compose and q > 0.0:  # q = 0 releases nothing of the target.
        self._compose(q, event.event, count)
      return None
    return self.CompositionErrorDetails(
        invalid_event=event, error_message='Unsupported event.')

  def _compose(self, q, event, count):
    if self._accounting != PAPER:
      rdp = count * sound_rdp(
          q, event.clip_ratio, event.bits, event.num_groups, self._orders)
      if self._accounting == PLD and event.clip_ratio > 0:
        key = (min(float(q), 1.0), float(event.clip_ratio), event.bits,
               event.num_groups)
        # Checks the arguments (and warms the cache) before any state
        # changes; the composition itself waits for get_epsilon.
        message_profile.draw_pld(q=key[0], clip_ratio=key[1], bits=key[2],
                                 num_groups=key[3],
                                 discretization=self._discretization)
        self._draws[key] = self._draws.get(key, 0) + count
        self._composed = None
      self._rdp += rdp
      return
    if event.num_groups > 1:
      warn_unproven(event.num_groups)
    c = float(event.clip_ratio)
    forward = _paper_forward_rdp(q, c, self._orders)
    if self._reverse_divergence == REVERSE_NUMERICAL:
      reverse = np.minimum(forward, _reverse_rdp_numerical(q, c, self._orders))
    else:
      reverse = forward
    self._forward += count * forward
    self._reverse += count * reverse
    exp_d2 = math.exp(c * c) if c * c < 700.0 else math.inf
    self._rho += count * exp_d2
    self._overhead += count * 12.0 * exp_d2 * 2.0**-event.total_bits

  def get_epsilon_and_optimal_order(self, target_delta: float):
    """Returns (epsilon, optimal order) at `target_delta`.

    The order is None where the PLD gives the smaller epsilon.

    Raises:
      ValueError: If target_delta is not in (0, 1).
      OverheadExceedsDeltaError: Paper mode, target_delta <= the overhead.
    """
    validation.check_probability(target_delta, 'target_delta')
    if self._accounting != PAPER:
      if not np.any(self._rdp):
        return 0.0, float(self._orders[0])
      eps, order = rdp_privacy_accountant.compute_epsilon(
          self._orders.astype(np.float64), self._rdp, target_delta)
      eps, order = float(eps), float(order)
      if (self._accounting == PLD and self._draws and
          not self._non_private):
        pld_eps = self._composed_pld().get_epsilon_for_delta(target_delta)
        if pld_eps < eps:
          return float(pld_eps), None
      return eps, order
    if self._overhead >= target_delta:
      needed = _bits_needed(self._rho, target_delta)
      raise OverheadExceedsDeltaError(
          f'target_delta={target_delta!r} is at or below the DP-REC overhead '
          f'term 12/2^b * rho = {self._overhead:.4g} (Theorem 1); at least '
          f'{needed} index bits per message are needed for this delta.')
    if self._rho == 0.0 and not np.any(self._forward):
      return 0.0, float(self._orders[0])
    lam = self._orders - 1.0
    eps = (self._forward + self._reverse -
           math.log(target_delta - self._overhead) / lam)
    i = int(np.argmin(eps))
    return float(max(eps[i], 0.0)), float(self._orders[i])

  def get_epsilon(self, target_delta: float) -> float:
    return self.get_epsilon_and_optimal_order(target_delta)[0]

  def _composed_pld(self):
    """The PLD of every draw so far, on one loss grid.

    Each draw's PLD is built on the accountant's discretization or coarser
    (`message_profile.draw_pld`); PLDs compose on one grid only, so all are
    rebuilt on the coarsest step any of them needs (none needs a coarser
    one at a coarser step: fewer points fit the limit).
    """
    if self._composed is None:
      step = self._discretization
      while True:
        draws = [(message_profile.draw_pld(
            q=q, clip_ratio=c, bits=b, num_groups=m, discretization=step),
                  count) for (q, c, b, m), count in sorted(self._draws.items())]
        coarsest = max(got for (got, _), _ in draws)
        if all(got == coarsest for (got, _), _ in draws):
          break
        step = coarsest
      composed = None
      for (_, pld), count in draws:
        pld = pld.self_compose(count)
        composed = pld if composed is None else composed.compose(pld)
      self._composed = composed
    return self._composed


def sound_rdp(q: float, clip_ratio: float, bits: int, num_groups: int,
              orders: Sequence[int]) -> np.ndarray:
  """RDP of one DP-REC client draw with probability q (sound accounting).

  q = 1 (a known participant's message against the message of the same
  client with no data, update 0): eps(a) = max of the two directions of
  `channel.message_rdp`.

  q < 1 (a draw that picks the target client with probability q, otherwise
  another client of the population): the output is (1-q) A + q P_v against
  A, A the mixture of the other clients' messages. By joint convexity of
  exp((a-1) D_a) this is at most the worst case over one other client v',
  (1-q) P_v' + q P_v against P_v', whose base RDP is the substitution bound
  `channel.substitution_rdp`; then `zhu_wang_upper_bound`, never above the
  base. docs/PRIVACY.md, Section 3.
  """
  orders = channel.check_orders(orders)
  # Clipping and encoding run in float32: allow the norm 2^-20 above c.
  clip_ratio = float(clip_ratio) * (1.0 + 2.0**-20)
  if q >= 1.0:
    forward, reverse = channel.message_rdp(
        clip_ratio=clip_ratio, bits=bits, num_groups=num_groups,
        orders=orders)
    return np.maximum(forward, reverse)
  all_orders = tuple(range(2, int(orders.max()) + 1))
  base = channel.substitution_rdp(clip_ratio=clip_ratio, bits=bits,
                                  num_groups=num_groups, orders=all_orders)
  values = base[orders - 2]  # base[l - 2] = eps(l)
  return np.minimum(values, zhu_wang_upper_bound(q, base, orders))


def _log_first_term(m: int, q: float, log_1mq: float) -> float:
  """log[(1-q)^m (1 + m q)] = -m (m+1) q^2 / 2 + O(q^3), without cancellation.

  Its two logs cancel to first order in q; for m q < 0.01 the series
  sum_k [(-1)^(k+1) m^k - m] q^k / k (k >= 2) is summed instead, to
  relative precision 1e-16.
  """
  if m * q >= 0.01:
    return m * log_1mq + math.log1p(m * q)
  total, k = 0.0, 2
  while True:
    total += ((-1)**(k + 1) * m**k - m) * q**k / k
    # Bound on the rest (terms can vanish: m = 1 at odd k).
    if (m**k + m) * q**k / k <= 1e-18 * abs(total) or k > 60:
      return total
    k += 1


def zhu_wang_upper_bound(q: float, base: np.ndarray,
                         orders: np.ndarray) -> np.ndarray:
  """General Poisson-subsampled RDP upper bound (Zhu and Wang, ICML 2019).

  Theorem 6 there: for a mechanism with RDP eps(.) (add/remove, both
  directions) and sampling probability q, at integer a >= 2,
    (a-1) eps'(a) <= log[(1-q)^(a-1) (a q - q + 1)
                         + C(a,2) q^2 (1-q)^(a-2) e^{eps(2)}
                         + 3 sum_{l=3}^a C(a,l) (1-q)^(a-l) q^l e^{(l-1)eps(l)}].
  `base[l - 2]` is eps(l).

  For small q the bracket is 1 + O(q^2): its log is formed as
  log1p(expm1(first term) + the others), not by a log-sum-exp, which would
  round 1 + tiny and lose the O(q^2) part (a relative error of 1e-8 at
  SO-LR's q = 1/342477, found by an independent review against 50-digit
  arithmetic; the test checks the same against mpmath).
  """
  log_q = math.log(q)
  log_1mq = math.log1p(-q)
  out = np.empty(len(orders))
  for i, alpha in enumerate(orders):
    alpha = int(alpha)
    first = _log_first_term(alpha - 1, q, log_1mq)
    others = [_log_comb(alpha, 2) + 2 * log_q + (alpha - 2) * log_1mq +
              base[0]]
    if alpha >= 3:
      l = np.arange(3, alpha + 1)
      others.extend(math.log(3.0) + _log_comb(alpha, l) +
                    (alpha - l) * log_1mq + l * log_q + (l - 1) * base[l - 2])
    log_others = float(special.logsumexp(others))
    if log_others < 0.0:
      total = math.log1p(math.expm1(first) + math.exp(log_others))
    else:  # Far from 1: no cancellation to avoid.
      total = float(np.logaddexp(first, log_others))
    out[i] = max(total, 0.0) / (alpha - 1)
  return out


def warn_unproven(num_groups):
  warnings.warn(
      f"accounting='paper' with num_groups={num_groups}: the paper treats M "
      'groups of b bits as one index of M*b bits (Theorem 3), a step that '
      'does not follow from its lemma; this epsilon is unproven. Use '
      "accounting='pld' (the default) or 'rdp' for a guarantee "
      '(docs/PRIVACY.md).',
      UnprovenPaperBound, stacklevel=_caller_stacklevel())


def _caller_stacklevel() -> int:
  """`warnings.warn`'s stacklevel of the first frame outside the accounting.

  Frames of tff_dprec and of dp_accounting (`compose` calls back into the
  accountant) are skipped: the warning points at the user's call.
  """
  frame, level = sys._getframe(2), 2  # pylint: disable=protected-access
  while frame is not None and frame.f_globals.get(
      '__name__', '').startswith(('tff_dprec', 'dp_accounting')):
    frame, level = frame.f_back, level + 1
  return level


def resolve_bits(accounting: str, bits: Optional[int],
                 num_groups: Optional[int], total_bits: Optional[int]):
  """Returns (bits, num_groups) from the caller's arguments, checked.

  The proven accountings need `bits` (per group) and `num_groups`;
  `total_bits` (one index of that many bits) is the paper mode's, which
  also accepts `bits` with `num_groups`.
  """
  validation.check_choice(accounting, 'accounting', ACCOUNTINGS)
  if total_bits is not None:
    if accounting != PAPER:
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


def dp_rec_round_event(*, clip_ratio: float, population: int,
                       clients_per_round: int, bits: Optional[int] = None,
                       num_groups: Optional[int] = None,
                       total_bits: Optional[int] = None
                       ) -> dp_accounting.DpEvent:
  """One DP-REC round: B client draws with replacement, each with q = 1/N."""
  q = _draw_rate(population, clients_per_round)
  if total_bits is not None:
    bits, num_groups = resolve_bits(PAPER, bits, num_groups, total_bits)
  else:
    bits, num_groups = resolve_bits(PLD, bits, num_groups, None)
  return dp_accounting.SelfComposedDpEvent(
      dp_accounting.PoissonSampledDpEvent(
          q, DpRecEvent(clip_ratio, bits, num_groups)),
      clients_per_round)


def dp_rec_epsilon(*, clip_ratio: float, population: int,
                   clients_per_round: int, rounds: int, delta: float,
                   bits: Optional[int] = None,
                   num_groups: Optional[int] = None,
                   total_bits: Optional[int] = None,
                   accounting: str = PLD,
                   reverse_divergence: str = REVERSE_FORWARD_BOUND) -> float:
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
    accounting: `'pld'` (default), `'rdp'` (alias `'sound'`) or `'paper'`.
    reverse_divergence: Paper mode only, see `DpRecAccountant`.

  Raises:
    ValueError, TypeError: For invalid arguments.
    OverheadExceedsDeltaError: Paper mode, delta at or below the overhead.
  """
  validation.check_nonnegative_int(rounds, 'rounds')
  validation.check_probability(delta, 'delta')
  q = _draw_rate(population, clients_per_round)
  bits, num_groups = resolve_bits(accounting, bits, num_groups, total_bits)
  accountant = DpRecAccountant(accounting=accounting,
                               reverse_divergence=reverse_divergence)
  event = dp_accounting.SelfComposedDpEvent(
      dp_accounting.PoissonSampledDpEvent(
          q, DpRecEvent(clip_ratio, bits, num_groups)),
      clients_per_round)
  if rounds == 0:
    return 0.0  # Nothing released.
  accountant.compose(event, rounds)
  return accountant.get_epsilon(delta)


def dp_rec_local_epsilon(*, clip_ratio: float, delta: float,
                         bits: Optional[int] = None,
                         num_groups: Optional[int] = None,
                         total_bits: Optional[int] = None, rounds: int = 1,
                         accounting: str = PLD) -> float:
  """Epsilon of `rounds` releases of one client, without amplification.

  Add/remove: a client's message against a message that encodes nothing;
  see docs/PRIVACY.md for substitution.
  """
  validation.check_nonnegative_int(rounds, 'rounds')
  validation.check_probability(delta, 'delta')
  bits, num_groups = resolve_bits(accounting, bits, num_groups, total_bits)
  accountant = DpRecAccountant(accounting=accounting)
  event = DpRecEvent(clip_ratio, bits, num_groups)
  if rounds == 0:
    return 0.0  # Nothing released.
  accountant.compose(event, rounds)
  return accountant.get_epsilon(delta)


def sampling_rate(population, clients_per_round):
  validation.check_positive_int(population, 'population')
  validation.check_positive_int(clients_per_round, 'clients_per_round')
  if clients_per_round > population:
    raise ValueError(
        f'clients_per_round={clients_per_round} exceeds population='
        f'{population}.')
  return clients_per_round / population


def _draw_rate(population, clients_per_round):
  """q = 1/N of one DP-REC draw; the amplified analysis needs N >= 2."""
  sampling_rate(population, clients_per_round)
  if population < 2:
    raise ValueError(
        f'population={population}: the amplified DP-REC epsilon compares a '
        "draw of the target with another client's message, so it needs "
        'population >= 2; dp_rec_local_epsilon gives the epsilon of a '
        'known participant.')
  return 1.0 / population


def _paper_forward_rdp(q, c, orders):
  """RDP of the Poisson-subsampled Gaussian with noise multiplier 1/c."""
  if c == 0.0:
    return np.zeros_like(orders)
  if q >= 1.0:
    return orders * c * c / 2.0
  # dp_accounting 0.4.3 exposes no public RDP vector; this is the function
  # its RdpAccountant composes for PoissonSampledDpEvent(GaussianDpEvent).
  return np.maximum(np.asarray(
      rdp_privacy_accountant._compute_rdp_poisson_subsampled_gaussian(  # pylint: disable=protected-access
          q, 1.0 / c, orders), dtype=np.float64), 0.0)


def _reverse_rdp_numerical(q, c, orders):
  """D_alpha(p || (1-q) p + q q_c) by quadrature, in units of the noise.

  = 1/(alpha-1) log E_{x~N(0,1)}[(1 - q + q exp(c x - c^2/2))^(1-alpha)];
  the integrand is in (0, (1-q)^(1-alpha)]. Rounded up by quad's error.
  """
  if c == 0.0:
    return np.zeros_like(orders)
  if q >= 1.0:
    return orders * c * c / 2.0
  values = []
  log1mq = math.log1p(-q)
  for alpha in orders:

    def integrand(x, alpha=alpha):
      log_ratio = np.logaddexp(log1mq, math.log(q) + c * x - c * c / 2.0)
      return math.exp((1.0 - alpha) * log_ratio - x * x / 2.0) / math.sqrt(
          2.0 * math.pi)

    value, err = integrate.quad(integrand, -np.inf, np.inf, epsabs=1e-14,
                                epsrel=1e-12, limit=200)
    values.append(math.log(value + abs(err)) / (alpha - 1.0))
  return np.maximum(np.asarray(values), 0.0)


def _log_comb(n, k):
  return (special.gammaln(n + 1) - special.gammaln(k + 1) -
          special.gammaln(n - k + 1))


def _bits_needed(rho, delta):
  if not math.isfinite(rho):
    return math.inf
  return int(math.floor(math.log2(12.0 * rho / delta))) + 1
