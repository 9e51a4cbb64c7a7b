"""`DpRecPaperAccountant`: Theorem 1 and Algorithm 7 of the paper as published.

`accounting='paper'` (Triastcyn et al.):
    eps = min_l sum [D_{l+1}(mix || p) + D_{l+1}(p || mix)]
          - log(delta - 12/2^b rho)/l,  rho = sum exp(c^2),
with b the message's total index bits and mix = (1-q) p + q q_v: a draw
that misses the target is compared with the prior, which does not hold
when the server sees individual messages (docs/PRIVACY.md, Section 5).
For M > 1 groups the step "M groups of b bits = one index of M b bits"
(Theorem 3) is also unproven (a simulation refutes the resulting bias
bound), so the accountant warns with `UnprovenPaperBoundWarning`. Kept to
reproduce the paper's Table 1.
"""

import math
from typing import Optional, Sequence
import warnings

import dp_accounting
import numpy as np
from scipy import integrate

from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import base_accountant
from tff_dprec.accounting import baselines
from tff_dprec.accounting import rdp_bounds

# How D(p || mix) is bounded.
REVERSE_FORWARD_BOUND = 'forward_bound'  # The paper's: by D(mix || p).
REVERSE_NUMERICAL = 'numerical'  # By quadrature.

# `warnings.warn`'s stacklevel in `DpRecPaperAccountant.compose`: 1 would be
# `compose` itself, 2 is the line that called it (a user's, or that of
# `dp_rec_epsilon` or another function composing on its caller's behalf).
_COMPOSE_CALLER_STACKLEVEL = 2

_NeighborRel = dp_accounting.NeighboringRelation


class OverheadExceedsDeltaError(ValueError):
  """Paper mode: the 12/2^b * rho overhead of Theorem 1 is at least delta."""


class UnprovenPaperBoundWarning(UserWarning):
  """Paper mode with grouped messages: the epsilon rests on an unproven step."""


class DpRecPaperAccountant(base_accountant.DpRecAccountantBase):
  """The DP-REC paper's accountant (`accounting='paper'`), unproven.

  Events as `DpRecAccountantBase`. Each draw adds the forward and reverse
  divergences of the Poisson-subsampled Gaussian with noise multiplier 1/c
  over `orders`, and 12/2^b exp(c^2) to the delta `overhead`. A `compose`
  of messages of more than one group warns (`UnprovenPaperBoundWarning`) at
  the line that called `compose`.
  """

  accounting = accountings.PAPER

  def __init__(self,
               orders: Optional[Sequence[float]] = None,
               reverse_divergence: str = REVERSE_FORWARD_BOUND,
               neighboring_relation: _NeighborRel = _NeighborRel
               .ADD_OR_REMOVE_ONE):
    """Initializes the accountant.

    Args:
      orders: Renyi orders, values > 1 (default `rdp_bounds.PAPER_ORDERS`).
      reverse_divergence: How D(p || mix) is bounded, `'forward_bound'` (the
        paper's) or `'numerical'` (quadrature).
      neighboring_relation: Must be `ADD_OR_REMOVE_ONE`.

    Raises:
      ValueError: For invalid arguments.
    """
    super().__init__(neighboring_relation)
    validation.check_choice(reverse_divergence, 'reverse_divergence',
                            (REVERSE_FORWARD_BOUND, REVERSE_NUMERICAL))
    self._reverse_divergence = reverse_divergence
    orders = np.asarray(rdp_bounds.PAPER_ORDERS if orders is None else orders,
                        dtype=np.float64)
    if orders.ndim != 1 or orders.size == 0 or not np.all(orders > 1):
      raise ValueError(f'orders must be a non-empty list of values > 1, '
                       f'found {orders!r}.')
    self._orders = orders
    self._forward = np.zeros_like(orders)
    self._reverse = np.zeros_like(orders)
    self._overhead = 0.0  # sum_t 12 / 2^b_t * exp(c_t^2)
    self._rho = 0.0  # sum_t exp(c_t^2)
    # The most groups of a message the running `compose` met (its warning).
    self._composed_groups = 0

  @property
  def overhead(self) -> float:
    """The delta overhead 12 sum_t 2^-b_t exp(c_t^2) so far."""
    return self._overhead

  def compose(self, event: dp_accounting.DpEvent,
              count: int = 1) -> 'DpRecPaperAccountant':
    """Composes `event` `count` times, as `DpRecAccountantBase.compose`.

    Warns with `UnprovenPaperBoundWarning` if `event` holds a message of more
    than one group, at the line that called `compose` (a fixed stacklevel).

    Raises:
      As `DpRecAccountantBase.compose`.
    """
    self._composed_groups = 0
    result = super().compose(event, count)
    if self._composed_groups > 1:
      warnings.warn(_unproven_message(self._composed_groups),
                    UnprovenPaperBoundWarning,
                    stacklevel=_COMPOSE_CALLER_STACKLEVEL)
    return result

  def _compose_release(self, q, event, count):
    self._composed_groups = max(self._composed_groups, event.num_groups)
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

  def _compose_non_private(self):
    self._forward += np.inf

  def get_epsilon_and_optimal_order(self, target_delta: float):
    """Returns (epsilon, optimal order) at `target_delta`.

    Raises:
      ValueError: If target_delta is not in (0, 1).
      OverheadExceedsDeltaError: If target_delta <= the overhead.
    """
    validation.check_probability(target_delta, 'target_delta')
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


def _unproven_message(num_groups: int) -> str:
  return (
      f"accounting='paper' with num_groups={num_groups}: the paper treats M "
      'groups of b bits as one index of M*b bits (Theorem 3), a step that '
      'does not follow from its lemma; this epsilon is unproven. Use '
      "accounting='min_pld_rdp' (the default) or 'rdp' for a guarantee "
      '(docs/PRIVACY.md).')


def _paper_forward_rdp(q, c, orders):
  """RDP of the Poisson-subsampled Gaussian with noise multiplier 1/c."""
  if c == 0.0:
    return np.zeros_like(orders)
  if q >= 1.0:
    return orders * c * c / 2.0
  return baselines.subsampled_gaussian_rdp(q, 1.0 / c, orders)


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


def _bits_needed(rho, delta):
  if not math.isfinite(rho):
    return math.inf
  return int(math.floor(math.log2(12.0 * rho / delta))) + 1
