"""Renyi divergences of the DP-REC channel: what one client releases.

One group with prior p = N(0, s^2 I), clipped update v with c = |v| / s,
K = 2^bits candidates z_1..z_K ~ p drawn from the public seed, and the index
k drawn with probability w_k / sum_j w_j, w_k = exp(<z_k, v>/s^2 - c^2/2).
By rotation invariance only xi_k = <z_k, v> / (s |v|) ~ N(0, 1) i.i.d.
matters: w_k = exp(c xi_k - c^2/2), E[w^p] = exp(p (p - 1) c^2 / 2).
The update v = 0 gives the uniform index, P_0(k | seed) = 1/K. For the
released pair (seed, k), with r = c^2 and W = mean_k w_k:

  forward  D_a(P_v || P_0) = log E[(w_1 / W)^a] / (a - 1),
  reverse  D_a(P_0 || P_v) = log E[(W / w_1)^(a - 1)] / (a - 1).

Bounds computed here (derivations in docs/PRIVACY.md):
  * reverse, integer a (m = a - 1): exact,
      E[(W / w_1)^m] = K^-m sum_j C(m, j) E[w^(j - m)] E[S^(m - j)],
    S the sum of K - 1 copies of w, its moments by binomial convolution in
    log space (every term positive: no cancellation). Each term is a positive
    multiple of exp(a_i r), a_i >= 0, so log E[...] is convex in r and zero at
    r = 0: D(r) / r is non-decreasing, and the sum over groups with
    sum_g r_g <= r is at most the one-group value at r (the worst split).
  * forward: min of three upper bounds,
      - D_inf = log max P_v/P_0 <= log K (the index has K values);
      - tilt + drop: E[(w_1/W)^a] = e^{a(a-1)r/2} E[(K/(e^{ar} w_1 + S))^a]
        <= e^{a(a-1)r/2} E[(K/S_K)^a], S_K a sum of K copies of w, so
        D <= a r/2 + Psi_a(r)/(a - 1), Psi_a(r) = log E[(K/S_K)^a], evaluated
        by numerical quadrature of (1/Gamma(a)) int t^(a-1) L(t/K)^K dt with
        L the log-normal Laplace transform (see `_psi`);
      - AM-GM on the K weights: Psi_a(r) <= a r (1 + a/K) / 2, linear in r.
    Psi_a is non-decreasing in r (S_K grows in convex order with r and
    x^-a is convex), which bounds the worst split over groups (see
    `message_rdp`).
"""

import functools
import math
from typing import Sequence, Tuple

import numpy as np
from scipy import special

from tff_dprec import validation

# Orders up to which the forward bound is evaluated numerically; above, the
# closed-form bounds are used (the exact reverse divergence is larger there
# for every setting we checked, and the AM-GM bound is within a / (a - 1)).
FORWARD_NUMERIC_MAX_ORDER = 32
# Relative safety margin applied to every numerically evaluated moment.
_NUMERIC_MARGIN = 1e-6
# Quadrature grids for the log-normal Laplace transform (x ~ N(0, 1)) and the
# outer integral in u = log t.
_X = np.linspace(-12.0, 12.0, 1201)
_X_WEIGHTS = np.exp(-_X**2 / 2.0) / math.sqrt(2.0 * math.pi) * (_X[1] - _X[0])
_U = np.linspace(-40.0, 25.0, 1301)
# Split grid for the forward bound: ratio between consecutive r values, and
# the smallest r considered, as a fraction of r / num_groups.
_SPLIT_RATIO = 1.15
_SPLIT_FLOOR = 1e-3


def rec_channel_rdp(*, clip_ratio: float, bits: int,
                    orders: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
  """Upper bounds on the Renyi divergences of one DP-REC group.

  Args:
    clip_ratio: c = |v| / s for this group, >= 0.
    bits: Index bits b of the group, K = 2^b candidates (1 <= b <= 64).
    orders: Integer Renyi orders a >= 2.

  Returns:
    (forward, reverse): numpy arrays of upper bounds on D_a(P_v || P_0) and
    D_a(P_0 || P_v), one per order. The reverse is exact up to floating point
    (rounded up); the forward is the smallest of the bounds in the module
    docstring.

  Raises:
    TypeError, ValueError: For invalid arguments.
  """
  validation.check_nonnegative_number(clip_ratio, 'clip_ratio')
  validation.check_int_in_range(bits, 'bits', 1, 64)
  orders = check_orders(orders)
  r = float(clip_ratio)**2
  reverse = _reverse(r, bits, orders)
  forward = _forward_one_group(r, bits, orders)
  return forward, reverse


def message_rdp(*, clip_ratio: float, bits: int, num_groups: int,
                orders: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
  """Worst-case Renyi divergences of a whole message of `num_groups` groups.

  The groups' candidates come from independent streams and the indices are
  drawn independently given v, so the divergences of (seed, k_1..k_M) add
  over groups. The clip bounds only the total, sum_g c_g^2 <= clip_ratio^2;
  this returns bounds that hold for every such split:
    * reverse: the one-group value at the whole clip ratio (D(r)/r is
      non-decreasing, see the module docstring);
    * forward: min(M b log 2, AM-GM bound at r, a r/2 + R * rho_a/(a-1) +
      tail), with rho_a an upper bound of sup Psi_a(t)/t over t in [r0, r]
      from a geometric grid (Psi_a non-decreasing: on [t_i, t_{i+1}],
      Psi_a(t)/t <= Psi_a(t_{i+1})/t_i), and the groups below
      r0 = 1e-3 r / M bounded by the AM-GM constant (they hold at most
      M r0 <= 1e-3 r in total).

  Args:
    clip_ratio: c = l2_clip / noise_stddev for the whole update, >= 0.
    bits: Index bits per group.
    num_groups: M >= 1.
    orders: Integer Renyi orders a >= 2.

  Returns:
    (forward, reverse) numpy arrays, one per order.
  """
  validation.check_nonnegative_number(clip_ratio, 'clip_ratio')
  validation.check_int_in_range(bits, 'bits', 1, 64)
  validation.check_positive_int(num_groups, 'num_groups')
  orders = check_orders(orders)
  return _message_rdp(float(clip_ratio), int(bits), int(num_groups),
                      tuple(int(a) for a in orders))


# Hoelder exponents tried in the weak triangle inequality of
# `substitution_rdp`.
_TRIANGLE_EXPONENTS = (1.5, 2.0, 3.0, 4.0)


def substitution_rdp(*, clip_ratio: float, bits: int, num_groups: int,
                     orders: Sequence[int]) -> np.ndarray:
  """Upper bound on sup over |v|, |v'| <= c s of D_a(P_v || P_v').

  The divergence between the messages of two different updates (the
  substitution pair that sampling from a population of other clients
  creates, docs/PRIVACY.md Section 3), in both directions (the bound is
  symmetric in v, v'). Mironov's weak triangle inequality (Renyi DP, CSF
  2017, Prop. 11) through the message that encodes nothing, P_0: for p > 1,

    D_a(P_v || P_v') <= (a - 1/p)/(a - 1) D_{p a}(P_v || P_0)
                        + D_{(p a - 1)/(p - 1)}(P_0 || P_v'),

  with each term from `message_rdp` (worst split over groups) at the integer
  order above (D_a is non-decreasing in a), minimised over p in
  {1.5, 2, 3, 4}. For the Gaussian mechanism p = 2 gives about
  a (2c)^2 / 2, the exact substitution value.

  Args:
    clip_ratio: c = l2_clip / noise_stddev, >= 0.
    bits: Index bits per group.
    num_groups: M >= 1.
    orders: Integer Renyi orders a >= 2.

  Returns:
    A numpy array, one bound per order.
  """
  validation.check_nonnegative_number(clip_ratio, 'clip_ratio')
  validation.check_int_in_range(bits, 'bits', 1, 64)
  validation.check_positive_int(num_groups, 'num_groups')
  orders = check_orders(orders)
  return _substitution_rdp(float(clip_ratio), int(bits), int(num_groups),
                           tuple(int(a) for a in orders))


@functools.lru_cache(maxsize=1024)
def _substitution_rdp(clip_ratio, bits, num_groups, orders):
  if clip_ratio == 0.0:
    return np.zeros(len(orders))
  triangles = []  # (order, exponent p, forward order, reverse order).
  needed = set()
  for a in orders:
    for p in _TRIANGLE_EXPONENTS:
      forward_order = int(math.ceil(p * a - 1e-9))
      reverse_order = max(2, int(math.ceil((p * a - 1.0) / (p - 1.0) - 1e-9)))
      triangles.append((a, p, forward_order, reverse_order))
      needed.update((forward_order, reverse_order))
  needed = tuple(sorted(needed))
  forward, reverse = _message_rdp(clip_ratio, bits, num_groups, needed)
  index = {o: i for i, o in enumerate(needed)}
  best = {a: math.inf for a in orders}
  for a, p, fo, ro in triangles:
    value = ((a - 1.0 / p) / (a - 1.0) * forward[index[fo]] +
             reverse[index[ro]])
    best[a] = min(best[a], value)
  return np.asarray([best[a] for a in orders])


def log_sum_exp(values: np.ndarray) -> float:
  """scipy.special.logsumexp of a 1-D float64 array, without its overhead.

  The same operations in the same order (the largest value, or 0 if it is
  not finite, subtracted before exp and added after log), so the same
  result to the last bit; scipy's argument handling costs more than the
  sum for the short arrays of the Renyi bounds.
  """
  top = np.amax(values, keepdims=True)
  if not np.isfinite(top[0]):
    top[0] = 0.0
    with np.errstate(divide='ignore'):  # All -inf: log 0.
      return np.log(np.sum(np.exp(values - top))) + top[0]
  return np.log(np.sum(np.exp(values - top))) + top[0]


def check_orders(orders) -> np.ndarray:
  """Integer orders >= 2, as an int64 array; TypeError/ValueError otherwise."""
  try:
    array = np.asarray(orders)
  except Exception as e:  # pylint: disable=broad-except
    raise TypeError(f'orders must be a sequence of integers, found '
                    f'{orders!r}.') from e
  if array.ndim != 1 or array.size == 0:
    raise ValueError(f'orders must be a non-empty 1-D sequence, found '
                     f'{orders!r}.')
  if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer) or (
      np.issubdtype(array.dtype, np.floating) and
      np.all(np.isfinite(array)) and np.all(array == np.round(array)))):
    raise ValueError(f'orders must be integers (the exact reverse divergence '
                     f'and the subsampling bound need integer orders), found '
                     f'{orders!r}.')
  array = array.astype(np.int64)
  if np.any(array < 2):
    raise ValueError(f'orders must be >= 2, found {orders!r}.')
  return array


@functools.lru_cache(maxsize=4096)
def _message_rdp(clip_ratio, bits, num_groups, orders):
  orders = np.asarray(orders, np.int64)
  r = clip_ratio * clip_ratio
  reverse = _reverse(r, bits, orders)
  if r == 0.0:
    return np.zeros(len(orders)), reverse
  a = orders.astype(np.float64)
  k = 2.0**bits
  amgm = a * r / 2.0 + a * r * (1.0 + a / k) / (2.0 * (a - 1.0))
  forward = np.minimum(amgm, num_groups * bits * math.log(2.0))
  numeric = orders <= FORWARD_NUMERIC_MAX_ORDER
  if np.any(numeric):
    # A fixed lattice of rho^j (shared by every clip ratio, so calibration
    # reuses the Laplace transforms), cut at r, which is a grid point too.
    log_ratio = math.log(_SPLIT_RATIO)
    low = math.floor(math.log(_SPLIT_FLOOR * r / num_groups) / log_ratio)
    high = math.ceil(math.log(r) / log_ratio)
    grid = [_SPLIT_RATIO**j for j in range(low, high)]
    grid = np.asarray([t for t in grid if t < r] + [r])
    na = a[numeric]
    psi = np.stack([_psi_cached(float(t), bits, tuple(na)) for t in grid])
    if len(grid) > 1:
      rho = np.max(psi[1:] / grid[:-1, None], axis=0)
    else:
      rho = psi[0] / grid[0]
    # Groups below grid[0] hold at most num_groups * grid[0] of r in total.
    tail = num_groups * grid[0] * na * (1.0 + na / k) / 2.0
    split = na * r / 2.0 + (r * rho + tail) / (na - 1.0)
    forward[numeric] = np.minimum(forward[numeric], split)
  return forward, reverse


def _forward_one_group(r, bits, orders):
  a = orders.astype(np.float64)
  k = 2.0**bits
  if r == 0.0:
    return np.zeros(len(orders))
  amgm = a * r / 2.0 + a * r * (1.0 + a / k) / (2.0 * (a - 1.0))
  forward = np.minimum(amgm, bits * math.log(2.0))
  numeric = orders <= FORWARD_NUMERIC_MAX_ORDER
  if np.any(numeric):
    na = a[numeric]
    tilt = na * r / 2.0 + _psi(r, bits, na) / (na - 1.0)
    forward[numeric] = np.minimum(forward[numeric], tilt)
  return forward


@functools.lru_cache(maxsize=65536)
def _log_laplace_k(r, bits):
  """K * log E[exp(-t w / K)] on t = exp(_U), w log-normal with E[w] = 1."""
  k = 2.0**bits
  c = math.sqrt(r)
  s = np.exp(_U)[:, None] / k
  w = np.exp(c * _X - r / 2.0)[None, :]
  # E[exp(-s w)] - 1 = E[expm1(-s w)], accurate when s w is tiny.
  em1 = np.expm1(-s * w) @ _X_WEIGHTS
  em1 = np.maximum(em1, -1.0 + 1e-300)
  return k * np.log1p(em1)


@functools.lru_cache(maxsize=65536)
def _psi_cached(r, bits, orders):
  """`_psi` for a tuple of orders; the split grid's lattice points recur."""
  return _psi(r, bits, np.asarray(orders, np.float64))


def _psi(r, bits, orders):
  """Upper estimate of Psi_a(r) = log E[(K / S_K)^a] for each order a.

  E[X^-a] = (1/Gamma(a)) int_0^inf t^(a-1) E[exp(-t X)] dt with X = S_K / K,
  and E[exp(-t X)] = E[exp(-t w / K)]^K. The inner expectation is a
  trapezoid rule over x ~ N(0, 1) on [-12, 12] (step 0.02), the outer one a
  trapezoid rule in u = log t on [-40, 25]; the head below t = e^-40 is
  bounded by t^a / a and the grid must reach a negligible integrand at its
  top end, else the closed-form AM-GM bound is returned for that order.
  The result is rounded up by a relative margin of 1e-6. This is a numerical
  evaluation, checked against Monte Carlo and against the AM-GM bound in the
  tests, not interval arithmetic.
  """
  if r == 0.0:
    return np.zeros(len(orders))
  log_lk = _log_laplace_k(float(r), int(bits))
  a = np.asarray(orders, np.float64)[:, None]
  log_integrand = a * _U[None, :] + log_lk[None, :] - special.gammaln(a)
  du = _U[1] - _U[0]
  log_value = special.logsumexp(log_integrand, axis=1, b=du)
  # Trapezoid ends and the head: add both end values in full (an upper
  # correction for the half weights) and the head bound.
  log_value = np.logaddexp(log_value, log_integrand[:, 0])
  head = a[:, 0] * _U[0] - np.log(a[:, 0]) - special.gammaln(a[:, 0])
  log_value = np.logaddexp(log_value, head)
  psi = log_value + math.log1p(_NUMERIC_MARGIN)
  amgm = a[:, 0] * r * (1.0 + a[:, 0] / 2.0**bits) / 2.0
  truncated = log_integrand[:, -1] > log_value - 35.0
  return np.maximum(np.where(truncated, amgm, np.minimum(psi, amgm)), 0.0)


def _reverse(r, bits, orders):
  """Exact D_a(P_0 || P_v) for integer orders, rounded up."""
  orders = np.asarray(orders, np.int64)
  if r == 0.0:
    return np.zeros(len(orders))
  max_m = int(orders.max()) - 1
  log_moments = _log_moments_of_sum(float(r), int(bits), max_m)
  lbin = _log_binomials(max_m)
  out = np.empty(len(orders))
  for i, alpha in enumerate(orders):
    m = int(alpha) - 1
    j = np.arange(m + 1)
    p = (j - m).astype(np.float64)
    terms = lbin[m, :m + 1] + p * (p - 1.0) * r / 2.0 + log_moments[m - j]
    value = (log_sum_exp(terms) - m * bits * math.log(2.0)) / m
    # Round up for the floating-point error of ~m^2 log-space operations.
    out[i] = value + 1e-9 * (abs(value) + 1.0)
  return np.maximum(out, 0.0)


@functools.lru_cache(maxsize=None)
def _log_binomials(n):
  rows = np.arange(n + 1)[:, None]
  cols = np.arange(n + 1)[None, :]
  lg = special.gammaln(np.arange(n + 1) + 1.0)  # log k!
  out = lg[rows] - lg[cols] - lg[np.maximum(rows - cols, 0)]
  return np.where(cols <= rows, out, -np.inf)


@functools.lru_cache(maxsize=4096)
def _log_moments_of_sum(r, bits, max_m):
  """log E[S^n], n = 0..max_m, S the sum of 2^bits - 1 copies of w.

  2^b - 1 = 1 + 2 + ... + 2^(b-1): the sum of copies is built by doubling,
  each step a binomial convolution of moment sequences in log space.
  """
  n = np.arange(max_m + 1, dtype=np.float64)
  power = n * (n - 1.0) * r / 2.0  # log E[w^n]: one copy
  lbin = _log_binomials(max_m)
  result = None
  for step in range(bits):
    result = power if result is None else _convolve(result, power, lbin)
    if step + 1 < bits:
      power = _convolve(power, power, lbin)
  return result


def _convolve(log_a, log_b, lbin):
  """log E[(A + B)^n] from log E[A^i], log E[B^i], A and B independent."""
  size = len(log_a)
  idx = np.arange(size)
  diff = idx[:, None] - idx[None, :]
  gathered = np.where(diff >= 0, log_b[np.clip(diff, 0, size - 1)], -np.inf)
  return special.logsumexp(lbin + log_a[None, :] + gathered, axis=1)
