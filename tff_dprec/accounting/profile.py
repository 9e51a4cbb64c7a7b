"""Privacy profiles: certified hockey-stick bounds and pessimistic PLDs.

A privacy profile of a pair of distributions (P, Q) is the hockey-stick
divergence as a function of epsilon,

  delta(epsilon) = H_{e^epsilon}(P || Q) = sup_S P(S) - e^epsilon Q(S).

This module turns upper bounds on profiles into a privacy loss distribution
(PLD) that dominates the pair, composed as dp_accounting composes PLDs
(`loss_pmf`). Every
step keeps an upper bound (docs/PRIVACY.md, Section 9):

* `Profile`: non-increasing values on a grid epsilon = i * step (i >= 0);
  between grid points it is read at the grid point below (a profile is
  non-increasing, so this rounds up).
* `from_rdp`: Canonne, Kamath, Steinke (2020), Prop. 12, for each order:
  D_a(P || Q) <= tau implies
  H_{e^eps}(P || Q) <= exp((a - 1)(tau - eps)) (1 - 1/a)^(a - 1) / a;
  the minimum over the orders.
* `triangle`: for any R and eps = eps1 + eps2 (P - e^eps Q =
  (P - e^eps1 R) + e^eps1 (R - e^eps2 Q)),
  H_{e^eps}(P || Q) <= H_{e^eps1}(P || R) + e^eps1 H_{e^eps2}(R || Q).
* `subsampled`: the profiles of one Poisson draw with probability q, whose
  base pair is (P, Q) = (P_v, P_y) (the target's message against another
  client's), in both directions and at every epsilon (negative ones too),
  by the exact forms below.
* `pessimistic_pld`: the lower convex hull of each direction's bounds in
  gamma = e^epsilon (a true profile is convex in gamma, so it stays below
  the hull), then the pessimistic connect-the-dots PMF (Doroshenko, Ghazi,
  Kamath, Kumar, Manurangsi 2022; `loss_pmf.connect_dots`), whose profile
  is the piecewise-linear interpolation through the bounds: it dominates
  the pair.
"""

import math
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from tff_dprec import validation
from tff_dprec.accounting import loss_pmf

# Relative margin by which every computed bound is raised: covers float64
# rounding (about 1e-16 relative per operation) with room to spare.
ROUNDING_MARGIN = 1e-9
# Vectorised passes of `_lower_hull` before its monotone chain.
_HULL_PASSES = 64
# A grid index is rounded down after subtracting this many grid steps, so
# that a float quotient just above an integer cannot round up past the
# epsilon asked for.
_INDEX_SLACK = 1e-7


class Profile:
  """Upper bounds on a privacy profile at epsilon = i * step, i = 0..n-1.

  Values are non-increasing and at most 1. `value(eps)` reads the grid
  point below eps (index floor(eps / step - 1e-7): a point within 1e-7 steps
  above a grid point reads the one before it; rounding up, as a profile is
  non-increasing), the last value beyond the grid, and 1 for eps < 0
  (H_gamma <= 1 holds for every pair of distributions).
  """

  def __init__(self, step: float, values: Sequence[float]):
    validation.check_positive_number(step, 'step')
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
      raise ValueError(f'values must be a non-empty 1-D array, found shape '
                       f'{values.shape}.')
    bad = np.isnan(values) | (values < 0)
    if np.any(bad):
      raise ValueError(f'values must be non-negative numbers, found '
                       f'{values[bad][0]!r} at index '
                       f'{int(np.argmax(bad))}.')
    self._step = float(step)
    # Non-increasing and at most 1: both keep an upper bound (the true
    # profile at i is at most its value at any j <= i).
    self._values = np.minimum.accumulate(np.minimum(values, 1.0))

  @property
  def step(self) -> float:
    return self._step

  @property
  def values(self) -> np.ndarray:
    return np.copy(self._values)

  @property
  def max_epsilon(self) -> float:
    return self._step * (self._values.size - 1)

  def epsilons(self) -> np.ndarray:
    return self._step * np.arange(self._values.size)

  def value(self, epsilon) -> np.ndarray:
    """Upper bound on the profile at each epsilon (array in, array out)."""
    epsilon = np.asarray(epsilon, dtype=np.float64)
    index = np.floor(epsilon / self._step - _INDEX_SLACK)
    out = self._values[np.clip(index, 0, self._values.size - 1).astype(
        np.int64)]
    return np.where(epsilon < 0, 1.0, out)

  def __repr__(self):
    return (f'Profile(step={self._step}, size={self._values.size}, '
            f'delta(0)={self._values[0]:.4g}, '
            f'delta({self.max_epsilon:.4g})={self._values[-1]:.4g})')


def from_rdp(orders: Sequence[float], rdp: Sequence[float], step: float,
             max_epsilon: float) -> Profile:
  """Profile bound from Renyi divergences D_a(P || Q) <= rdp[i] at orders[i].

  Canonne, Kamath, Steinke (NeurIPS 2020), Prop. 12, a statement about one
  pair of distributions, minimised over the orders, raised by
  `ROUNDING_MARGIN`.
  """
  orders = np.asarray(orders, dtype=np.float64)
  rdp = np.asarray(rdp, dtype=np.float64)
  if orders.shape != rdp.shape or orders.ndim != 1 or orders.size == 0:
    raise ValueError(f'orders and rdp must be 1-D of one length, found '
                     f'{orders.shape} and {rdp.shape}.')
  if not np.all(orders > 1):
    raise ValueError(f'orders must be > 1, found {orders!r}.')
  if np.any(np.isnan(rdp)) or np.any(rdp < 0):
    raise ValueError(f'rdp must be non-negative, found {rdp!r}.')
  validation.check_positive_number(step, 'step')
  validation.check_positive_number(max_epsilon, 'max_epsilon')
  n = int(math.ceil(max_epsilon / step)) + 1
  epsilons = step * np.arange(n)
  finite = np.isfinite(rdp)
  if not np.any(finite):
    return Profile(step, np.ones(n))
  a = orders[finite][:, None]
  log_const = np.log1p(-1.0 / a) * (a - 1.0) - np.log(a)
  best = np.full(n, np.inf)
  for a_i, tau_i, c_i in zip(a[:, 0], rdp[finite], log_const[:, 0]):
    best = np.minimum(best, (a_i - 1.0) * (tau_i - epsilons) + c_i)
  values = np.exp(np.minimum(best, 0.0)) * (1.0 + ROUNDING_MARGIN)
  return Profile(step, values)


def minimum(*profiles: Profile) -> Profile:
  """The smaller of several upper bounds on one pair's profile."""
  if not profiles:
    raise ValueError('minimum needs at least one profile.')
  step = profiles[0].step
  if any(p.step != step for p in profiles):
    raise ValueError(f'profiles must share one step, found steps '
                     f'{[p.step for p in profiles]}.')
  n = max(p.values.size for p in profiles)
  # Grid points are read directly; beyond a shorter grid its last value.
  padded = [np.pad(p.values, (0, n - p.values.size), mode='edge')
            for p in profiles]
  return Profile(step, np.min(padded, axis=0))


def triangle(first: Profile, second: Profile, first_cap: Optional[float] =
             None, max_splits: int = 400) -> Profile:
  """H(P || Q) through an intermediate R: first = (P, R), second = (R, Q).

  delta(eps) <= min over eps1 in [0, eps] of
  first(eps1) + e^eps1 second(eps - eps1), eps1 on a subgrid of the common
  grid (any eps1 gives an upper bound). `first_cap`: the first profile is 0
  at eps1 >= first_cap (P / R <= e^first_cap everywhere).
  """
  step = first.step
  if second.step != step:
    raise ValueError(f'first and second must share one step, found '
                     f'{step} and {second.step}.')
  n = second.values.size
  first_values = np.pad(first.values, (0, max(0, n - first.values.size)),
                        mode='edge')
  stride = max(1, int(math.ceil(n / max_splits)))
  last_split = n - 1
  if first_cap is not None:
    last_split = min(last_split,
                     int(math.ceil(first_cap / step / stride)) * stride)
  second_values = second.values
  best = np.minimum(1.0, (first_values[0] + second_values) *
                    (1.0 + ROUNDING_MARGIN))
  for j in range(stride, last_split + 1, stride):
    eps1 = j * step
    head = 0.0
    if first_cap is None or eps1 < first_cap:
      head = float(first_values[j])
    candidate = head + math.exp(eps1) * second_values[:n - j]
    best[j:] = np.minimum(best[j:], candidate * (1.0 + ROUNDING_MARGIN))
  return Profile(step, best)


def subsampled(remove_base: Profile, add_base: Profile, q: float,
               discretization: float, tiny: float
               ) -> Tuple[int, int, np.ndarray, np.ndarray]:
  """Bounds on one Poisson draw's profiles, both directions, on a grid.

  With the target's message P_v and another client's P_y, one draw gives
  X = (1 - q) P_y + q P_v with the target present and Y = P_y without it.
  `remove_base` bounds H(P_v || P_y), `add_base` H(P_y || P_v). Exact forms
  (gamma = e^eps):
    gamma >= 1: H_gamma(X || Y) = q H_{1 + (gamma - 1)/q}(P_v || P_y);
    gamma >= 1: H_gamma(Y || X) = (1 - gamma (1 - q)) H_{g'}(P_y || P_v),
                g' = gamma q / (1 - gamma (1 - q)), 0 if gamma >= 1/(1-q);
    gamma < 1:  H_gamma(A || B) = 1 - gamma + gamma H_{1/gamma}(B || A).
  q = 1 is the pair (P_v, P_y) itself.

  Returns:
    (lo, hi, remove, add): the grid epsilon = i * discretization for
    i = lo..hi (lo = -hi), and upper bounds on H(X || Y) and H(Y || X)
    there. hi is the smallest grid index at which both are <= tiny (or at
    which the bases' grids end).
  """
  if not 0.0 < q <= 1.0:
    raise ValueError(f'q must be in (0, 1], found {q!r}.')
  validation.check_positive_number(discretization, 'discretization')

  remove_pos, add_pos = _subsampled_positive(remove_base, add_base, q)
  hi = _grid_end(remove_pos, add_pos, q, discretization, tiny,
                 max(remove_base.max_epsilon, add_base.max_epsilon))
  index = np.arange(-hi, hi + 1)
  eps = index * discretization
  remove = np.empty(eps.size)
  add = np.empty(eps.size)
  pos = index >= 0
  remove[pos] = remove_pos(eps[pos])
  add[pos] = add_pos(eps[pos])
  neg_e = -eps[~pos]  # > 0
  gamma = np.exp(eps[~pos])
  one_minus_gamma = -np.expm1(eps[~pos])
  remove[~pos] = one_minus_gamma + gamma * add_pos(neg_e)
  add[~pos] = one_minus_gamma + gamma * remove_pos(neg_e)
  margin = 1.0 + ROUNDING_MARGIN
  return (-hi, hi, np.minimum(remove * margin, 1.0),
          np.minimum(add * margin, 1.0))


def _subsampled_positive(remove_base: Profile, add_base: Profile, q: float
                         ) -> Tuple[Callable[[np.ndarray], np.ndarray],
                                    Callable[[np.ndarray], np.ndarray]]:
  """H(X || Y) and H(Y || X) at eps >= 0, as functions (see `subsampled`)."""

  def remove_pos(e):  # H(X || Y) at e >= 0.
    if q >= 1.0:
      return remove_base.value(e)
    return q * remove_base.value(np.log1p(np.expm1(e) / q))

  def add_pos(e):  # H(Y || X) at e >= 0.
    if q >= 1.0:
      return add_base.value(e)
    gamma = np.exp(e)
    coef = 1.0 - gamma * (1.0 - q)
    inside = coef > 0
    safe = np.where(inside, coef, 1.0)
    value = coef * add_base.value(np.log(gamma * q / safe))
    return np.where(inside, value, 0.0)

  return remove_pos, add_pos


def _grid_end(remove_pos: Callable[[np.ndarray], np.ndarray],
              add_pos: Callable[[np.ndarray], np.ndarray], q: float,
              discretization: float, tiny: float, base_max_epsilon: float
              ) -> int:
  """The smallest grid index where both directions are <= `tiny`.

  The search stops growing early where the bases' grids end (their last
  values hold beyond), at `base_max_epsilon` in the bases' epsilon.
  """

  def small(i):
    e = np.asarray([i * discretization])
    return max(remove_pos(e)[0], add_pos(e)[0]) <= tiny

  hi = 1
  while not small(hi):
    e = hi * discretization
    base_e = e if q >= 1.0 else math.log1p(math.expm1(e) / q)
    if base_e > base_max_epsilon:
      break
    hi = int(math.ceil(hi * 1.25))
  # Refine: the smallest such index, by bisection over [hi / 1.25, hi].
  lo_i = max(1, int(hi / 1.25))
  while lo_i < hi:
    mid = (lo_i + hi) // 2
    if small(mid):
      hi = mid
    else:
      lo_i = mid + 1
  return hi


def convex_upper(epsilons: np.ndarray, deltas: np.ndarray) -> np.ndarray:
  """The lower convex hull in gamma = e^eps of (0, 1) and the bounds.

  A profile is convex and non-increasing in gamma with value 1 at gamma = 0,
  so if it is below `deltas` at `epsilons`, it is below this hull there too,
  and the hull is a convex sequence: connect-the-dots gets non-negative
  probabilities (up to round-off). `deltas` must already carry the rounding
  margin; the hull is raised uniformly by 1e-12 (relative) for the round-off
  of the interpolation, which keeps it convex.
  """
  gamma = np.concatenate([[0.0], np.exp(epsilons)])
  values = np.concatenate([[1.0], deltas])
  hull = _lower_hull(gamma, values)
  out = np.interp(gamma[1:], gamma[hull], values[hull]) * (1.0 + 1e-12)
  return np.minimum(np.minimum.accumulate(out), 1.0)


def _lower_hull(g: np.ndarray, v: np.ndarray) -> np.ndarray:
  """Indices of the lower convex hull's vertices, g increasing.

  A point on or above the chord between two others, one on each side, is
  not a vertex; each pass drops every point on or above the chord of its
  current neighbours, all at once, until none is (a few passes for
  profiles, which are nearly convex). The monotone chain (Andrew 1979)
  then runs over the survivors, with the test it would run over all the
  points (a point b between a and i is dropped when it is on or above
  the chord from a to i). No vertex of the hull is ever dropped, so the
  hull is the chain's; among points collinear within rounding the vertex
  set may differ from the chain's over all points, the hull's values by
  float64 round-off, which the callers' relative raise (1e-12) covers.
  """
  index = np.arange(g.size)
  for _ in range(_HULL_PASSES):
    if index.size <= 2:
      break
    a, b, i = index[:-2], index[1:-1], index[2:]
    drop = (g[b] - g[a]) * (v[i] - v[a]) <= (v[b] - v[a]) * (g[i] - g[a])
    if not np.any(drop):
      break
    index = np.concatenate([index[:1], b[~drop], index[-1:]])
  # Python floats: the same IEEE doubles as NumPy's, faster to index.
  gs, vs = g[index].tolist(), v[index].tolist()
  hull = [0]
  for i in range(1, len(gs)):
    while len(hull) >= 2:
      a, b = hull[-2], hull[-1]
      if (gs[b] - gs[a]) * (vs[i] - vs[a]) <= (vs[b] - vs[a]) * (gs[i] - gs[a]):
        hull.pop()
      else:
        break
    hull.append(i)
  return index[hull]


def pessimistic_pld(discretization: float, lo: int, hi: int,
                    remove: np.ndarray, add: np.ndarray
                    ) -> loss_pmf.PrivacyLoss:
  """A PLD dominating every pair whose profiles are below the bounds.

  `remove` and `add` bound H(X || Y) and H(Y || X) at epsilon =
  i * discretization, i = lo..hi. Each becomes a pessimistic
  connect-the-dots PMF (its mass above hi is at +infinity, equal to the
  bound at hi). The composition of such PLDs dominates the adaptive
  composition of the pairs (Zhu, Dong, Wang, AISTATS 2022, Theorem 10).
  """
  eps = np.arange(lo, hi + 1) * discretization
  pmfs = []
  for deltas in (remove, add):
    hull = convex_upper(eps, np.asarray(deltas, dtype=np.float64))
    pmfs.append(loss_pmf.connect_dots(discretization, lo, hi, hull))
  return loss_pmf.PrivacyLoss(pmfs[0], pmfs[1])


def gaussian_profile(sensitivity: float, step: float,
                     max_epsilon: float) -> Profile:
  """The exact profile of (N(sensitivity, 1), N(0, 1)) (for tests).

  H_{e^eps} = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), mu the
  sensitivity in units of the noise (Balle and Wang, ICML 2018, Thm. 8).
  """
  from scipy import special  # pylint: disable=g-import-not-at-top
  mu = float(sensitivity)
  n = int(math.ceil(max_epsilon / step)) + 1
  eps = step * np.arange(n)
  cdf = lambda x: 0.5 * special.erfc(-x / math.sqrt(2.0))
  values = cdf(-eps / mu + mu / 2) - np.exp(eps) * cdf(-eps / mu - mu / 2)
  return Profile(step, np.maximum(values, 0.0) * (1.0 + ROUNDING_MARGIN))
