"""A calibration search whose answer, for a monotone epsilon, does not depend
on its path.

`largest_meeting` returns, for an epsilon increasing in x, a point of the
lattice x_k = (1 + tol)^k one step below the largest lattice point that
meets the target: with K the largest k with epsilon(x_k) <= target (its
neighbour x_(K+1) misses it), the answer is x_(K-1). It is evaluated and
meets the target, and for a monotone epsilon with boundary b (the largest
x meeting the target):

  b / (1 + tol)^2 < x_(K-1) <= b / (1 + tol),

so it is never above any value within tol below the boundary (which any
search stopping within tol of it returns), and the answer is a function of
epsilon alone: a starting guess (`guess`, or what `Guesses` remembers of
earlier calibrations) changes the number of evaluations, not the answer.
Were epsilon not monotone (numerics), the answer could depend on the path,
but it is still evaluated and still meets the target.

Steps: secant steps on log epsilon against log x from the guess (the
first with an assumed slope), each landing on a lattice point inside the
bracket of lattice points known to meet and to miss the target; bisection
of the bracket's lattice indices when the steps stall; doubling outwards
while no bracket exists. Near the boundary the secant is exact to well
under a lattice step, so a search from a close guess costs about four
evaluations: the guess, one secant step and the lattice points on either
side of the boundary (the answer's own evaluation among them, or one more).

Where epsilon is a step function in part, constant in x on cells that end
at known points (DP-REC's worst-pair profile is computed at c rounded up
to a coarser lattice), the secant stalls on the steps. `breaks` names the
cells' ends: inside a bracket, the search first tries the two lattice
points either side of the end of the cell where the secant (or chord, or
middle) lands, then goes on as before. That too changes only the path.
"""

import collections
import math
from typing import Callable, Dict, Hashable, NamedTuple, Optional, Tuple

# Slope of log epsilon in log x assumed for the first step: about that of
# the amplified PLD epsilons near their boundaries (6 to 10 at the main
# job's setting; a steeper guess undershoots, which costs less than an
# overshoot to where epsilon is large and slow to evaluate).
DEFAULT_SLOPE = 6.0
# Steps before the search bisects a bracket that has not halved.
_STALL_STEPS = 3
_MAX_EVALUATIONS = 200


class Unreachable(ValueError):
  """Even the lowest x allowed misses the target."""


class UpperBound(float):
  """An epsilon known only from above, at most the target.

  `epsilon` may return one where a cheaper bound already meets the target:
  it settles that point, and steers the search only where too few exact
  values do.
  """


class Found(NamedTuple):
  """What `largest_meeting` found.

  Attributes:
    x: The answer.
    slope: The secant slope of log epsilon in log x near the boundary (a
      starting slope for a similar search), or None.
    evaluations: How many times epsilon was evaluated.
  """
  x: float
  slope: Optional[float]
  evaluations: int


def largest_meeting(epsilon: Callable[[float], float], target: float,
                    lo: float, hi: float, tol: float,
                    guess: Optional[float] = None,
                    slope: Optional[float] = None,
                    breaks: Optional[Callable[[float], Tuple[float, float]]]
                    = None
                    ) -> Found:
  """x_(K-1) of the module docstring, for epsilon increasing on [lo, hi].

  `epsilon` may return inf or nan where the target is unreachable. When
  `hi` meets the target, `hi` is returned; when x_(K-1) falls below `lo`,
  `lo` (which meets the target). `slope` (default `DEFAULT_SLOPE`) is the
  slope of log epsilon in log x assumed for the first step. `breaks(x)`,
  if given, is the cell (start, end] holding x: epsilon may step up at
  the ends of cells (module docstring).

  Raises:
    Unreachable: If epsilon(lo) misses the target.
    ValueError: If the search does not converge (epsilon not monotone).
  """
  slope = DEFAULT_SLOPE if slope is None else slope
  lattice = _Lattice(epsilon, target, lo, hi, tol, breaks)
  k = lattice.index(guess if guess is not None else math.sqrt(lo * hi))
  previous_width = None
  stalled = 0
  while not lattice.done():
    lattice.evaluate(k)
    width = lattice.width()
    if width is not None:
      stalled = stalled + 1 if (previous_width is not None and
                                width > previous_width / 2) else 0
      previous_width = width if stalled == 0 else previous_width
    k = lattice.next_index(slope, bisect=stalled >= _STALL_STEPS)
    if stalled >= _STALL_STEPS:
      stalled, previous_width = 0, None
  x = lattice.answer()
  return Found(x, lattice.secant_slope(), lattice.evaluations)


class _Lattice:
  """The evaluations of `largest_meeting`, by lattice index."""

  def __init__(self, epsilon, target, lo, hi, tol, breaks=None):
    if not 0 < lo < hi < math.inf:
      raise ValueError(f'need 0 < lo < hi < inf, found lo={lo!r}, '
                       f'hi={hi!r}.')
    if not 1e-12 <= tol < 1:
      raise ValueError(f'tol must be in [1e-12, 1), found {tol!r}.')
    self._epsilon = epsilon
    self._breaks = breaks
    self._target = target
    self._lo, self._hi = lo, hi
    self._step = math.log1p(tol)
    # Lattice indices strictly inside (lo, hi); lo and hi are extra points.
    self._k_lo = math.floor(math.log(lo) / self._step) + 1
    self._k_hi = math.ceil(math.log(hi) / self._step) - 1
    self._values: Dict[int, float] = {}  # index (or the ends) -> epsilon
    self.good: Optional[int] = None  # The largest index meeting the target.
    self.bad: Optional[int] = None  # The smallest index missing it.
    self._hi_meets = False
    self._outward = 0  # Steps taken without a bracket.
    self.evaluations = 0

  def index(self, x: float) -> int:
    k = math.floor(math.log(x) / self._step)
    return min(max(k, self._k_lo - 1), self._k_hi + 1)

  def point(self, k: int) -> float:
    if k < self._k_lo:
      return self._lo
    if k > self._k_hi:
      return self._hi
    return math.exp(k * self._step)

  def evaluate(self, k: int) -> None:
    """epsilon at index k (k_lo - 1 is lo and k_hi + 1 is hi)."""
    if k in self._values:
      return
    self.evaluations += 1
    if self.evaluations > _MAX_EVALUATIONS:
      raise ValueError(f'The lattice search did not converge in '
                       f'{_MAX_EVALUATIONS} evaluations: is epsilon '
                       'monotone?')
    e = self._epsilon(self.point(k))
    self._values[k] = e
    if e <= self._target:
      if k > self._k_hi:
        self._hi_meets = True
      self.good = k if self.good is None else max(self.good, k)
    else:
      if k < self._k_lo:
        raise Unreachable(f'epsilon({self._lo!r}) = {e!r} misses the '
                          f'target {self._target!r}.')
      self.bad = k if self.bad is None else min(self.bad, k)

  def done(self) -> bool:
    if self._hi_meets:
      return True
    return (self.good is not None and self.bad is not None and
            self.bad <= self.good + 1)

  def width(self) -> Optional[int]:
    if self.good is None or self.bad is None:
      return None
    return self.bad - self.good

  def next_index(self, slope: float, bisect: bool) -> int:
    """The next index to evaluate, strictly inside the bracket.

    Inside a bracket: the secant's root where it falls inside, else the
    root of the chord between the bracket's ends (false position), else
    (or when `bisect`) the middle. Without a bracket: outwards to the
    predicted boundary, at least 2^(n - 1) lattice steps and at most a
    factor 2^n in x on the n-th such step.
    """
    predicted = self._predict(slope)
    if self.good is not None and self.bad is not None:
      inside = None
      if not bisect:
        for k in (predicted, self._chord_root()):
          if k is not None and self.good < k + 1 and k < self.bad:
            inside = min(max(k, self.good + 1), self.bad - 1)
            break
      inside = (self.good + self.bad) // 2 if inside is None else inside
      at_break = self._either_side_of_break(inside)
      return inside if at_break is None else at_break
    self._outward += 1
    least = 2**(self._outward - 1)
    most = max(least, int(math.log(2.0) * least / self._step))
    if self.bad is None:  # Only points meeting the target: go up.
      k = self.good + most
      if predicted is not None:
        k = max(self.good + least, min(predicted + 1, k))
      return min(k, self._k_hi + 1)
    k = self.bad - most  # Only points missing it: go down.
    if predicted is not None:
      k = min(self.bad - least, max(predicted, k))
    return max(k, self._k_lo - 1)

  def _either_side_of_break(self, k: int) -> Optional[int]:
    """The last lattice index of a cell near point k, or the first of the
    cell after it, strictly inside the bracket and not yet evaluated: of
    the ends of the cell holding point k, the nearer first. None without
    `breaks` or such an index."""
    if self._breaks is None or not self._k_lo <= k <= self._k_hi:
      return None
    x = self.point(k)
    ends = sorted(self._breaks(x), key=lambda end: abs(math.log(end / x)))
    for end in ends:
      last = self.index(end)
      while last > self.good and self.point(last) > end:  # Round-off.
        last -= 1
      for j in (last, last + 1):
        if self.good < j < self.bad and j not in self._values:
          return j
    return None

  def _chord_root(self) -> Optional[int]:
    """Index of the root of the chord between the bracket's ends."""
    ends = []
    for k in (self.good, self.bad):
      f = _log_gap(self._values[k], self._target)
      if not math.isfinite(f):
        return None
      ends.append((math.log(self.point(k)), f))
    (u0, f0), (u1, f1) = ends
    if f1 <= f0:
      return None
    return math.floor((u0 - f0 * (u1 - u0) / (f1 - f0)) / self._step)

  def _nearest(self, exact_only=False):
    """(k, log x, log(epsilon / target)) of the finite evaluations: exact
    values before upper bounds, each the nearest to the target first."""
    points = [(k, math.log(self.point(k)), _log_gap(e, self._target),
               isinstance(e, UpperBound)) for k, e in self._values.items()
              if not (exact_only and isinstance(e, UpperBound))]
    points = [p for p in points if math.isfinite(p[2])]
    points.sort(key=lambda p: (p[3], abs(p[2])))
    return [p[:3] for p in points]

  def secant_slope(self) -> Optional[float]:
    """The slope through the two exact evaluations nearest the target."""
    points = self._nearest(exact_only=True)
    if len(points) < 2 or points[0][1] == points[1][1]:
      return None
    (_, u0, f0), (_, u1, f1) = points[0], points[1]
    slope = (f1 - f0) / (u1 - u0)
    return slope if slope > 0 and math.isfinite(slope) else None

  def _predict(self, slope: float) -> Optional[int]:
    """Index of the secant's root (the last lattice index meeting it)."""
    points = self._nearest()
    if not points:
      return None
    if len(points) == 1:
      _, u, f = points[0]
      root = u - f / slope
    else:
      (_, u0, f0), (_, u1, f1) = points[0], points[1]
      if f0 == f1 or u0 == u1:
        return None
      root = u0 - f0 * (u1 - u0) / (f1 - f0)
    if not math.isfinite(root):
      return None
    return math.floor(root / self._step)

  def answer(self) -> float:
    """x_(K-1), evaluated, or hi when hi meets the target."""
    if self._hi_meets:
      return self._hi
    k = self.good - 1
    if k < self._k_lo:
      k = self._k_lo - 1  # lo, which meets the target.
    self.evaluate(k)
    if not self._values[k] <= self._target:
      raise ValueError(
          f'epsilon is not monotone: {self.point(self.good)!r} meets the '
          f'target and {self.point(k)!r} below it does not.')
    return self.point(k)


def _log_gap(epsilon: float, target: float) -> float:
  if epsilon <= 0:
    return -math.inf
  if not epsilon < math.inf:
    return math.inf
  return math.log(epsilon) - math.log(target)


class Guesses:
  """Earlier answers of one kind of calibration, as starting guesses.

  Keyed by everything but one count (for DP-REC: the draws B T) and one
  discrete setting (the bits); a guess for a new (setting, count) is the
  answer at the same setting interpolated (or extrapolated) in log count
  from the two nearest counts, else the nearest count's, else the answer
  at the nearest setting. Guesses only save evaluations: the lattice
  search's answer does not depend on them.
  """

  def __init__(self, size: int = 256):
    self._size = size
    self._found = collections.OrderedDict()  # key -> {(setting, count): x}

  def remember(self, key: Hashable, setting, count: int, found_: Found
               ) -> None:
    found = self._found.setdefault(key, {})
    found[(setting, count)] = found_
    self._found.move_to_end(key)
    while len(self._found) > self._size:
      self._found.popitem(last=False)

  def guess(self, key: Hashable, setting, count: int):
    """(x, slope) to start from, each None where nothing is known."""
    found = self._found.get(key)
    if not found:
      return None, None
    same = sorted(((abs(math.log(n / count)), n, f)
                   for (s, n), f in found.items() if s == setting),
                  key=lambda item: item[:2])
    if len(same) >= 2:
      (_, n0, f0), (_, n1, f1) = same[0], same[1]
      t = math.log(count / n0) / math.log(n1 / n0)
      x = math.exp(math.log(f0.x) + t * (math.log(f1.x) - math.log(f0.x)))
      return x, f0.slope
    if same:
      return same[0][2].x, same[0][2].slope
    nearest = min(found.items(), key=lambda item: (
        abs(math.log(item[0][1] / count)), abs(_distance(item[0][0],
                                                         setting))))
    return nearest[1].x, nearest[1].slope


def _distance(a, b) -> float:
  try:
    return float(a) - float(b)
  except (TypeError, ValueError):
    return 0.0 if a == b else 1.0
