"""Dense privacy loss distributions: construction, composition, epsilon.

The pessimistic PLDs of DP-REC's draws (`message_profile`), in the
representation of dp_accounting's `DensePLDPmf`: probabilities on the loss
grid (lower + i) * discretization and a mass at +infinity, one `LossPmf`
per direction of the neighbouring relation, a `PrivacyLoss` for the pair.
The arithmetic follows dp_accounting 0.4.3's PLD module step for step, so
that epsilons agree with it to float64 round-off
(tests/library/accounting_loss_pmf_test.py): at delta ~ 1e-6 the FFT's round-off
moves the epsilon by up to 1e-7 relative with the transform's size, so the
sizes are dp_accounting's. It is faster where it matters to DP-REC's
accounting:

* `connect_dots`: the pessimistic connect-the-dots PMF (Doroshenko, Ghazi,
  Kamath, Kumar, Manurangsi 2022, Algorithm 1, fixed gap), from an array.
* `LossPmf.self_compose`: the count-fold convolution by an FFT raised to
  the count, on the window that the Chernoff bound of dp_accounting's
  `self_convolve` leaves (the circular transform folds the mass outside
  it, at most 1e-15, into the window, and that bound is added to the mass
  at +infinity, as dp_accounting does). `SelfComposer` keeps the transform
  for many counts (a run's epsilon after every round).
* `LossPmf.epsilon_for_delta`: the smallest epsilon whose hockey-stick
  divergence is at most delta, read off as dp_accounting's
  `_get_epsilon_for_delta` reads it (the same running sums, in the same
  order; numpy's exp may differ from math's in the last bit), with array
  operations in place of its Python loop, from the top loss down to the
  answer.

Every step is pessimistic as dp_accounting's is (docs/PRIVACY.md, 9.3).
"""

import math
from typing import Sequence

import numpy as np
from scipy import fft
from scipy import signal

# Tail mass that a composition may move to +infinity (dp_accounting's
# default for `self_compose` and `compose`).
TAIL_MASS_TRUNCATION = 1e-15
# Transforms a `SelfComposer` keeps (one per FFT size).
_KEPT_TRANSFORMS = 2
# From this count on, numpy's complex power z ** count is exp(count log z)
# (below it multiplies), so a kept log z gives the same values.
_POWER_BY_LOG = 100
# exp(x) is exactly 0 below this (e^-746 is under half the least double).
_UNDERFLOW = -746.0
# Losses in the first block `epsilon_for_delta` walks (doubling after).
_FIRST_BLOCK = 16384
# Orders of the Chernoff bound `_log_mgfs` takes in one array operation.
_ORDERS_AT_ONCE = 8
# A bound on the absolute error of `_close_log_mgfs` (each the log of a
# sum of positive terms, each within 31 units in the last place of its
# value, the sum pairwise: about 1e-14), with room to spare.
_CLOSE_ERROR = 1e-12


class LossPmf:
  """One direction of a PLD: P(loss = (lower + i) * discretization) = probs[i].

  Attributes:
    discretization: The loss grid's step.
    lower: The grid index of probs[0].
    probs: Probabilities on the grid (non-negative).
    infinity_mass: The probability of an infinite loss.
  """

  def __init__(self, discretization: float, lower: int, probs: np.ndarray,
               infinity_mass: float):
    self.discretization = float(discretization)
    self.lower = int(lower)
    self.probs = np.asarray(probs, dtype=np.float64)
    self.infinity_mass = float(infinity_mass)

  def losses(self) -> np.ndarray:
    return (np.arange(self.probs.size) + self.lower) * self.discretization

  def self_compose(self, count: int) -> 'LossPmf':
    """The PMF of `count` independent losses summed (count >= 1)."""
    return SelfComposer(self).compose(count)

  def compose(self, other: 'LossPmf') -> 'LossPmf':
    """The PMF of the sum of this loss and an independent `other` loss.

    The full convolution, then at most TAIL_MASS_TRUNCATION / 2 cut from
    each end: the lower cut goes to the first loss kept, the upper one to
    +infinity (pessimistic).
    """
    if other.discretization != self.discretization:
      raise ValueError(
          f'PMFs compose on one loss grid, found discretizations '
          f'{self.discretization!r} and {other.discretization!r}.')
    # FFT round-off leaves entries of about -1e-16 where the mass is 0:
    # raised to 0, which only adds mass (never lowers a delta(eps)).
    probs = np.maximum(signal.fftconvolve(self.probs, other.probs), 0.0)
    infinity = (self.infinity_mass + other.infinity_mass -
                self.infinity_mass * other.infinity_mass)
    threshold = TAIL_MASS_TRUNCATION / 2
    left = _first_above(np.cumsum(probs), threshold)
    right = probs.size - _first_above(np.cumsum(probs[::-1]), threshold)
    right = max(right, left + 1)
    left_mass = np.sum(probs[:left])
    right_mass = np.sum(probs[right:])
    kept = probs[left:right]
    kept[0] += left_mass
    return LossPmf(self.discretization, self.lower + other.lower + left, kept,
                   infinity + right_mass)

  def epsilon_for_delta(self, delta: float) -> float:
    """The smallest epsilon >= 0 with hockey-stick divergence <= delta.

    delta(eps) = inf_mass + sum over losses l > eps of p_l (1 - e^(eps - l)).
    Walking the losses downwards with the running sums U = inf_mass +
    sum p_l and L = sum p_l e^-l, the answer is log((U - delta) / L) at the
    first loss at or below that value; inf when inf_mass > delta. The
    walk goes in blocks from the top loss, each block's sums continuing the
    last block's (the same sums as one walk), and stops at the answer.
    """
    if self.infinity_mass > delta:
      return math.inf
    probs = self.probs[::-1]
    # The top loss, then stepped down one step at a time (as a sum).
    loss = (self.lower + probs.size - 1) * self.discretization
    upper, lower = self.infinity_mass, 0.0
    start, block = 0, _FIRST_BLOCK
    while start < probs.size:
      p = probs[start:start + block]
      steps = np.full(p.size, -self.discretization)
      if start == 0:
        steps[0] = loss
        losses = np.cumsum(steps)
      else:
        losses = np.cumsum(np.concatenate([[loss], steps]))[1:]
      uppers = np.cumsum(np.concatenate([[upper], p]))
      # A loss of zero probability adds nothing, also where e^-l overflows
      # (0 * inf would be nan).
      with np.errstate(over='ignore', invalid='ignore'):
        weighted = np.exp(-losses) * p
      weighted[p == 0] = 0.0
      lowers = np.cumsum(np.concatenate([[lower], weighted]))
      # Before adding loss k the sums are uppers[k], lowers[k].
      stop = _first_stop(uppers[:-1], lowers[:-1], losses, delta)
      # A loss so large that e^-l underflows: the answer is that loss.
      exhausted = np.flatnonzero((uppers[1:] >= delta) & (lowers[1:] == 0.0))
      if exhausted.size and (stop is None or exhausted[0] < stop):
        return max(0.0, float(losses[exhausted[0]]))
      if stop is not None:
        return _epsilon(float(uppers[stop]), float(lowers[stop]), delta)
      loss, upper, lower = losses[-1], uppers[-1], lowers[-1]
      start += p.size
      block *= 2
    return _epsilon(float(upper), float(lower), delta)

  def delta_for_epsilon(self, epsilons) -> np.ndarray:
    """The hockey-stick divergence at each epsilon (array in, array out);
    at an epsilon above every finite loss (+infinity included), the mass at
    +infinity."""
    eps = np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    losses = self.losses()
    # Sums over losses above eps: suffix sums, as a function of eps.
    above_p = np.concatenate([np.cumsum(self.probs[::-1])[::-1], [0.0]])
    with np.errstate(over='ignore', invalid='ignore'):
      weighted = self.probs * np.exp(-losses)
    weighted[self.probs == 0] = 0.0  # Not 0 * inf where e^-l overflows.
    above_q = np.concatenate([np.cumsum(weighted[::-1])[::-1], [0.0]])
    first = np.searchsorted(losses, eps, side='right')
    # Beyond the last finite loss both sums are 0: no exp(eps) * 0 (NaN at
    # eps = +infinity, or above exp's range).
    beyond = first >= losses.size
    with np.errstate(over='ignore', invalid='ignore'):
      out = self.infinity_mass + above_p[first] - np.exp(eps) * above_q[first]
    out = np.where(beyond, self.infinity_mass, out)
    return np.maximum(out, self.infinity_mass)


class SelfComposer:
  """Self-compositions of one `LossPmf`, its transform kept between counts.

  `compose(count)` is dp_accounting's `self_convolve` to the last bit: the
  window of its Chernoff bound (orders +-1..20 over the PMF's length, tail
  mass TAIL_MASS_TRUNCATION), a complex FFT of its size raised to the
  count, the window read back. The bound's moment generating function and
  the transform (one per FFT size, which consecutive counts mostly share)
  are kept, so a run's epsilon after every round costs one power and one
  inverse FFT a round; the power is computed only where it does not
  underflow to 0 (after a few hundred draws, nearly everywhere).
  """

  def __init__(self, pmf: LossPmf):
    self._pmf = pmf
    probs = pmf.probs
    self._orders = np.concatenate(
        (np.arange(-20, 0), np.arange(1, 21))) / probs.size
    # log E[e^(order i)] at each order, as dp_accounting's bound takes it:
    # close values (absolute error below _CLOSE_ERROR) for every order,
    # and its own, to the last bit, for the orders a window can rest on.
    self._close_log_mgfs = _close_log_mgfs(probs)
    self._log_mgfs = {}  # order's index -> dp_accounting's value
    self._transforms = {}  # FFT size -> (F, log |F|).

  def window(self, count: int):
    """(first, last) grid offsets kept of the count-fold sum.

    dp_accounting's window: each order's bound rounded to a grid offset,
    the tightest kept. An order whose bound, from the close moment
    generating function, cannot be the tightest whatever its error is
    left out; the others' bounds are computed as dp_accounting computes
    them.
    """
    upper = (self._pmf.probs.size - 1) * count
    lower = 0
    for sign, rounding, tightest in ((1.0, math.ceil, min),
                                     (-1.0, math.floor, max)):
      close = []
      for i, order in enumerate(self._orders):
        if order * sign > 0:
          bound = self._bound(count, order, self._close_log_mgfs[i])
          slack = (count * _CLOSE_ERROR / abs(order) + 1e-12 * abs(bound))
          close.append((i, rounding(bound - slack), rounding(bound + slack)))
      # The tightest any order can be, and the orders that can reach it.
      reach = tightest(ends[2] if sign > 0 else ends[1] for ends in close)
      exact = [rounding(self._bound(count, self._orders[i],
                                    self._log_mgf(i)))
               for i, low, high in close
               if (low if sign > 0 else high) * sign <= reach * sign]
      if sign > 0:
        upper = min([upper] + exact)
      else:
        lower = max([lower] + exact)
    return lower, upper

  @staticmethod
  def _bound(count, order, log_mgf):
    """The Chernoff bound of one order (dp_accounting's arithmetic)."""
    return (count * log_mgf + math.log(2 / TAIL_MASS_TRUNCATION)) / order

  def _log_mgf(self, i):
    """dp_accounting's log E[e^(order i)] for the i-th order."""
    if i not in self._log_mgfs:
      self._log_mgfs[i] = _log_mgfs(self._pmf.probs, self._orders[i:i + 1])[0]
    return self._log_mgfs[i]

  def compose(self, count: int) -> LossPmf:
    """The PMF of `count` independent copies summed."""
    if count < 1:
      raise ValueError(f'count must be at least 1, found {count!r}.')
    pmf = self._pmf
    first, last = self.window(count)
    length = last - first + 1
    size = fft.next_fast_len(max(length, pmf.probs.size))
    transform, log_modulus = self._transform(size)
    if count < _POWER_BY_LOG:
      power = transform**count
    else:
      # numpy's complex power there, exp(count log F), computed only where
      # it does not underflow to exactly 0 (|F|^count < e^-747; most of
      # the transform after a few hundred draws).
      live = count * log_modulus >= _UNDERFLOW - 1.0
      power = np.zeros_like(transform)
      power[live] = np.exp(count * np.log(transform[live]))
    probs = np.real(fft.ifft(power))
    # The window, wrapping around the FFT's circle (np.roll's values).
    offset = first % size
    probs = np.concatenate([probs[offset:offset + length],
                            probs[:max(0, offset + length - size)]])
    np.maximum(probs, 0.0, out=probs)  # FFT round-off below 0, as `compose`.
    infinity = (TAIL_MASS_TRUNCATION -
                math.expm1(count * math.log1p(-pmf.infinity_mass)))
    return LossPmf(pmf.discretization, pmf.lower * count + first, probs,
                   infinity)

  def _transform(self, size):
    if size not in self._transforms:
      if len(self._transforms) >= _KEPT_TRANSFORMS:
        self._transforms.pop(next(iter(self._transforms)))
      transform = fft.fft(self._pmf.probs, size)
      with np.errstate(divide='ignore'):
        self._transforms[size] = (transform, np.log(np.abs(transform)))
    return self._transforms[size]


class PrivacyLoss:
  """A PLD: the `remove` and `add` directions, each a `LossPmf`."""

  def __init__(self, remove: LossPmf, add: LossPmf):
    if remove.discretization != add.discretization:
      raise ValueError('remove and add must share one loss grid.')
    self.remove = remove
    self.add = add

  @property
  def discretization(self) -> float:
    return self.remove.discretization

  def self_compose(self, count: int) -> 'PrivacyLoss':
    return PrivacyLoss(self.remove.self_compose(count),
                       self.add.self_compose(count))

  def compose(self, other: 'PrivacyLoss') -> 'PrivacyLoss':
    return PrivacyLoss(self.remove.compose(other.remove),
                       self.add.compose(other.add))

  def get_epsilon_for_delta(self, delta: float) -> float:
    """The larger of the two directions' epsilons at `delta`."""
    return max(self.remove.epsilon_for_delta(delta),
               self.add.epsilon_for_delta(delta))

  def get_delta_for_epsilon(self, epsilons) -> np.ndarray:
    return np.maximum(self.remove.delta_for_epsilon(epsilons),
                      self.add.delta_for_epsilon(epsilons))


def connect_dots(discretization: float, lo: int, hi: int,
                 deltas: Sequence[float]) -> LossPmf:
  """The pessimistic connect-the-dots PMF of a profile on a fixed grid.

  `deltas` are the profile's values at epsilon = i * discretization,
  i = lo..hi, non-increasing. With d the step and D_i the values,
  Doroshenko et al. (2022), Algorithm 1, puts
    p_lo = 1 - D_lo + (D_lo+1 - D_lo) / (e^d - 1),
    p_i = ((D_i+1 - D_i) - e^d (D_i - D_i-1)) / (e^d - 1),
    p_hi = (D_hi - D_hi-1) / (e^-d - 1),
  and D_hi at +infinity; its profile is the piecewise-linear interpolation
  (in e^epsilon) of the values. Negative round-off is clipped to 0.

  Raises:
    ValueError: For fewer than two grid points, a length mismatch or
      values that are not non-increasing in [0, 1].
  """
  deltas = np.asarray(deltas, dtype=np.float64)
  if hi <= lo or deltas.size != hi - lo + 1:
    raise ValueError(f'connect_dots needs hi > lo and hi - lo + 1 values, '
                     f'found lo={lo}, hi={hi}, {deltas.size} values.')
  if np.any(deltas < 0) or np.any(deltas > 1):
    raise ValueError('deltas must lie in [0, 1].')
  diffs = np.diff(deltas)
  if np.any(diffs > 0):
    raise ValueError('deltas must be non-increasing.')
  probs = np.zeros_like(deltas)
  probs[0] = 1 - deltas[0] + diffs[0] / math.expm1(discretization)
  probs[1:-1] = ((diffs[1:] - diffs[:-1] * math.exp(discretization)) /
                 math.expm1(discretization))
  probs[-1] = diffs[-1] / math.expm1(-discretization)
  return LossPmf(discretization, lo, np.maximum(0.0, probs), deltas[-1])


def _log_mgfs(probs: np.ndarray, orders: np.ndarray) -> np.ndarray:
  """scipy.special.logsumexp(arange(n) * order, b=probs) at each order.

  The same operations (weights 0 as exponents -inf, the largest exponent
  subtracted before exp and added after log, a pairwise sum per order),
  so the same values, several orders to an array operation.
  """
  index = np.arange(probs.size)
  zero = probs == 0
  out = np.empty(len(orders))
  for start in range(0, len(orders), _ORDERS_AT_ONCE):
    block = orders[start:start + _ORDERS_AT_ONCE]
    exponents = index[None, :] * block[:, None]
    exponents[:, zero] = -np.inf
    top = np.amax(exponents, axis=1, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    sums = np.sum(probs[None, :] * np.exp(exponents - top), axis=1)
    with np.errstate(divide='ignore'):
      out[start:start + block.size] = np.log(sums) + top[:, 0]
  return out


def _close_log_mgfs(probs: np.ndarray) -> np.ndarray:
  """log sum_i probs[i] e^(k i / n) for k = -20..-1, 1..20 (n the length),
  the order of `SelfComposer`'s bound, to a relative 1e-13.

  e^(k i / n) as the k-th power of e^(i / n) by repeated products (k
  roundings of at most half a unit in the last place, after exp's one),
  then a pairwise sum: an array product per order instead of an exp.
  """
  n = probs.size
  out = []
  for sign in (-1.0, 1.0):
    step = np.exp(sign * np.arange(n) / n)
    power = np.ones(n)
    logs = []
    for _ in range(20):
      power = power * step
      logs.append(math.log(float(np.sum(probs * power))))
    out.append(logs[::-1] if sign < 0 else logs)
  return np.asarray(out[0] + out[1])


def _epsilon(mass_upper: float, mass_lower: float, delta: float) -> float:
  """log((U - delta) / L), or 0 where that is not positive."""
  if mass_upper <= mass_lower + delta:
    return 0.0
  return math.log((mass_upper - delta) / mass_lower)


def _first_above(cumulative: np.ndarray, threshold: float) -> int:
  """The first index whose running sum exceeds threshold, else the length."""
  above = np.flatnonzero(cumulative > threshold)
  return int(above[0]) if above.size else cumulative.size


def _first_stop(upper, lower, losses, delta):
  """The first k with upper[k] > delta, lower[k] > 0 and
  log((upper[k] - delta) / lower[k]) >= losses[k], or None."""
  with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
    stop = ((upper > delta) & (lower > 0) &
            (np.log((upper - delta) / lower) >= losses))
  found = np.flatnonzero(stop)
  return int(found[0]) if found.size else None
