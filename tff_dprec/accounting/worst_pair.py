"""The privacy profile of DP-REC's worst message pair, certified from above.

For one group of b bits (K = 2^b candidates) at clip ratio c, the largest
hockey-stick divergence between two messages, over updates of norm at most
c s, is that of the antipodal pair at full norm (docs/PRIVACY.md, Section
11, Theorem 11.1). With xi_1, ..., xi_K i.i.d. N(0, 1),

  H_gamma = K E[(softmax(c xi)_1 - gamma softmax(-c xi)_1)_+]
          = K E[(w / (w + U) - gamma / (1 + w V))_+],

w = e^(c xi_1), U = sum_(j >= 2) e^(c xi_j), V = sum_(j >= 2) e^(-c xi_j).
The integrand rises with xi_1 and V and falls with U, and, as a convex
non-decreasing function of a sum of a function of -U and one of V, it is
supermodular in (-U, V). So (Section 11.3), every step below only raises it:

1. U and V have one law, that of a sum S of K - 1 terms e^(c xi). The
   comonotone coupling of -U and V, U = F^-1(1 - W) and V = F^-1(W) with W
   uniform, maximises the expectation of a supermodular function over all
   couplings of the two marginals (Lorentz 1953; Tchen 1980).
2. S is bounded below by S-, the same sum on the log grid
   e^(g_lo + i h) with every term and every partial sum rounded down (terms
   below e^(g_lo) to 0, sums above the grid to its top). After D roundings
   on any path, S <= e^(D h) S- + (K - 1) e^(g_lo) =: S+. U is replaced by
   S- (smaller) and V by S+ (larger), each by its quantile function.
3. W is cut into cells (logit-spaced), and in each cell U is read at the
   cell's end where it is smallest and V where it is largest; xi_1 into
   cells of width x_step, read at the upper end, and its tail beyond
   X_MAX counted as a likelihood ratio of infinity.
4. The bound at every gamma at once is that of a discrete pair whose
   outcomes are the cells: sort them by likelihood ratio and take
   cumulative sums. Float64 round-off is bounded and added (_ROUND_OFF per
   term and the summation bound), and cumulative masses are read with a
   margin of _MASS_SLACK absolute and _RELATIVE_SLACK relative, each in
   the direction that raises the bound.
"""

import functools
import math
from typing import NamedTuple, Tuple

import numpy as np
from scipy import special

from tff_dprec import validation
from tff_dprec.accounting import profile

# Bits of one group that the computation takes (2^MAX_BITS candidates).
MAX_BITS = 24
# Relative lattice of the clip ratios at which the profile is computed.
C_LATTICE = 2.0**-10
# Terms below e^LOG_LOW are rounded to 0 in S- and up to it in S+.
LOG_LOW = -8.0
# xi_1's upper tail, counted with likelihood ratio infinity, starts here.
X_MAX = 9.0
# The W mass of each of the two end cells of the coupling.
W_TAIL = 1e-12


class Discretisation(NamedTuple):
  """The grids of the computation; finer grids give smaller bounds.

  Attributes:
    log_step: log-grid step of the law of S (each rounding costs at most a
      factor e^log_step in one term or partial sum).
    x_step: width of xi_1's cells on [-X_MAX, X_MAX].
    w_cells: cells of the coupling's W, logit-spaced between W_TAIL and
      1 - W_TAIL.
  """
  log_step: float = 4e-3
  x_step: float = 2e-2
  w_cells: int = 512


DEFAULT_DISCRETISATION = Discretisation()
# Absolute and relative margins for cumulative masses read from float64
# sums, and per-term relative round-off of the cells' masses.
_MASS_SLACK = 1e-13
_RELATIVE_SLACK = 1e-9
_ROUND_OFF = 1e-10
# The grid index of a rounded sum: floor after subtracting this (never up).
_INDEX_SLACK = 1e-9


class SumLaw(NamedTuple):
  """The law of S- on the grid e^(low + i step).

  Attributes:
    low: log of the grid's first point.
    step: the grid's log step.
    masses: mass of each grid point.
    zero: mass of the value 0.
    top: mass above the grid (S- at the top grid point, S+ infinite).
    depth: the most roundings on any term's path.
    terms: the number of terms summed.
  """
  low: float
  step: float
  masses: np.ndarray
  zero: float
  top: float
  depth: int
  terms: int

  def values(self) -> np.ndarray:
    return np.exp(self.low + self.step * np.arange(self.masses.size))


def antipodal_profile(
    *, clip_ratio: float, bits: int, step: float, max_epsilon: float,
    discretisation: Discretisation = DEFAULT_DISCRETISATION
) -> profile.Profile:
  """Upper bounds on H_(e^eps)(P_(c e) || P_(-c e)), eps = i * step.

  One group of `bits` bits at clip ratio `clip_ratio` (the norm of the
  update over s), for i = 0 .. ceil(max_epsilon / step), computed at
  `lattice_ceiling(clip_ratio)`.
  """
  validation.check_positive_number(clip_ratio, 'clip_ratio')
  validation.check_int_in_range(bits, 'bits', 1, MAX_BITS)
  validation.check_positive_number(step, 'step')
  validation.check_positive_number(max_epsilon, 'max_epsilon')
  _check_discretisation(discretisation)
  return _antipodal_profile(lattice_ceiling(clip_ratio), int(bits),
                            float(step), float(max_epsilon), discretisation)


def _check_discretisation(discretisation):
  if not isinstance(discretisation, Discretisation):
    raise TypeError(f'discretisation must be a Discretisation, found '
                    f'{discretisation!r}.')
  validation.check_positive_number(discretisation.log_step,
                                   'discretisation.log_step')
  validation.check_positive_number(discretisation.x_step,
                                   'discretisation.x_step')
  validation.check_positive_int(discretisation.w_cells,
                                'discretisation.w_cells')


def lattice_ceiling(clip_ratio: float) -> float:
  """The smallest (1 + C_LATTICE)^k at least `clip_ratio` (> 0).

  The antipodal profile does not decrease with c (Corollary 11.6), so the
  profile at this point bounds that at `clip_ratio`, and nearby clip
  ratios share one computation.
  """
  validation.check_positive_number(clip_ratio, 'clip_ratio')
  log_base = math.log1p(C_LATTICE)
  k = math.ceil(math.log(clip_ratio) / log_base - 1e-9)
  while math.exp(k * log_base) < clip_ratio:  # Round-off: never below.
    k += 1
  return math.exp(k * log_base)


@functools.lru_cache(maxsize=64)
def _antipodal_profile(clip_ratio, bits, step, max_epsilon, grids):
  epsilons = step * np.arange(int(math.ceil(max_epsilon / step)) + 1)
  pair = _sorted_cells(clip_ratio, bits, grids)
  return profile.Profile(step, pair.hockey_stick(np.exp(epsilons)))


class SortedPair(NamedTuple):
  """A discrete pair (a, b) sorted by likelihood ratio, with its sums.

  Attributes:
    ratio: a_i / b_i, non-increasing (infinite where b_i = 0).
    cum_a: cum_a[j] = sum of a over the first j outcomes.
    cum_b: the same for b.
  """
  ratio: np.ndarray
  cum_a: np.ndarray
  cum_b: np.ndarray

  def hockey_stick(self, gammas: np.ndarray) -> np.ndarray:
    """Upper bounds on sum_i (a_i - gamma b_i)_+ at each gamma, certified.

    Adds the float64 summation bound and `_ROUND_OFF` per term, then
    `profile.ROUNDING_MARGIN`.
    """
    gammas = np.asarray(gammas, dtype=np.float64)
    # Outcomes whose ratio exceeds gamma: those before index j.
    j = np.searchsorted(-self.ratio, -gammas, side='left')
    head_a, head_b = self.cum_a[j], self.cum_b[j]
    value = head_a - gammas * head_b
    error = (_ROUND_OFF + (j + 2) * 2.0**-52) * (head_a + gammas * head_b)
    return np.minimum(
        (np.maximum(value, 0.0) + error) * (1.0 + profile.ROUNDING_MARGIN),
        1.0)


def sorted_pair(a: np.ndarray, b: np.ndarray) -> SortedPair:
  """The pair (a, b >= 0) sorted by likelihood ratio a / b."""
  with np.errstate(divide='ignore', invalid='ignore'):
    ratio = np.where(b > 0, a / np.where(b > 0, b, 1.0), np.inf)
  order = np.argsort(-ratio, kind='stable')
  return SortedPair(ratio[order],
                    np.concatenate([[0.0], np.cumsum(a[order])]),
                    np.concatenate([[0.0], np.cumsum(b[order])]))


@functools.lru_cache(maxsize=16)
def _sorted_cells(clip_ratio, bits, grids) -> SortedPair:
  return sorted_pair(*cells(clip_ratio, bits, grids))


def cells(clip_ratio: float, bits: int, grids: Discretisation
          ) -> Tuple[np.ndarray, np.ndarray]:
  """The discrete pair (a, b) whose hockey sticks bound the antipodal pair's.
  """
  k = 2**bits
  law = sum_law(clip_ratio, k - 1, grids.log_step)
  w_mass, log_u, log_v = coupled_cells(law, grids.w_cells)
  x_mass, x_top = xi_cells(grids.x_step)
  # w / (w + U) = expit(c xi_1 - log U), 1 / (1 + w V) = expit(-c xi_1 -
  # log V), in logs so that no exp overflows (U = 0: 1, V = inf: 0).
  cx = clip_ratio * x_top
  p = special.expit(np.subtract.outer(cx, log_u))
  q = special.expit(-np.add.outer(cx, log_v))
  mass = k * np.outer(x_mass, w_mass)
  a = (mass * p).ravel()
  b = (mass * q).ravel()
  # xi_1 above X_MAX: P-mass at most its probability, likelihood ratio inf.
  tail = k * special.ndtr(-X_MAX)
  keep = a > 0
  return (np.concatenate([a[keep], [tail]]),
          np.concatenate([b[keep], [0.0]]))


def xi_cells(x_step: float) -> Tuple[np.ndarray, np.ndarray]:
  """xi_1's cells up to X_MAX: (mass, upper end); the first from -inf."""
  n = int(round(2 * X_MAX / x_step))
  edges = np.linspace(-X_MAX, X_MAX, n + 1)
  below = special.ndtr(edges)      # accurate for edges <= 0
  above = special.ndtr(-edges)     # accurate for edges >= 0
  inner = np.where(edges[1:] <= 0, below[1:] - below[:-1],
                   above[:-1] - above[1:])
  return np.concatenate([[below[0]], inner]), edges


def sum_law(clip_ratio: float, terms: int, log_step: float) -> SumLaw:
  """The law of S-, a lower bound on sum_(j <= terms) e^(c xi_j).

  By doubling: the law of 2^i terms from that of 2^(i - 1), and the laws
  of the binary digits of `terms` added, every sum rounded down to the
  grid e^(LOG_LOW + i log_step).
  """
  validation.check_positive_number(clip_ratio, 'clip_ratio')
  validation.check_positive_int(terms, 'terms')
  validation.check_positive_number(log_step, 'log_step')
  return _sum_law(float(clip_ratio), int(terms), float(log_step))


@functools.lru_cache(maxsize=4)
def _sum_law(clip_ratio, terms, log_step):
  high = math.log(terms) + clip_ratio * X_MAX + 1.0
  n = int(math.ceil((high - LOG_LOW) / log_step)) + 1
  edges = LOG_LOW + log_step * np.arange(n + 1)
  # One term: e^(c xi) in [e^(g_i), e^(g_(i+1))) rounded down to e^(g_i).
  z = edges / clip_ratio
  cdf, sf = special.ndtr(z), special.ndtr(-z)
  masses = np.where(z[1:] <= 0, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
  one = SumLaw(LOG_LOW, log_step, masses, float(cdf[0]), float(sf[-1]), 1,
               1)
  offsets = _offsets(n, log_step)
  total, power = None, one
  remaining = terms
  while True:
    if remaining & 1:
      total = power if total is None else add_laws(total, power, offsets)
    remaining >>= 1
    if not remaining:
      return total
    power = add_laws(power, power, offsets)


def _offsets(n: int, step: float) -> np.ndarray:
  """d[k]: e^g_j + e^g_(j-k) >= e^g_(j + d[k]), the largest such d."""
  k = np.arange(n)
  return np.floor(np.log1p(np.exp(-k * step)) / step -
                  _INDEX_SLACK).astype(np.int64)


def add_laws(first: SumLaw, second: SumLaw, offsets: np.ndarray) -> SumLaw:
  """The law of the sum of two independent S- laws, rounded down."""
  p, q = first.masses, second.masses
  n = p.size
  out = np.zeros(n)
  top = first.top + second.top - first.top * second.top
  # k = 0: both at index j, the sum at j + d[0].
  top += _shift_add(out, p * q, int(offsets[0]))
  both = np.stack([p, q])
  fwd = np.concatenate([np.zeros((2, 1)), np.cumsum(both, axis=1)], axis=1)
  rev = np.concatenate([np.cumsum(both[:, ::-1], axis=1)[:, ::-1],
                        np.zeros((2, 1))], axis=1)
  # Pairs i < j with j - i = k in [k_lo, k_hi] share the offset d; their
  # masses are window sums, read from the nearer end of the cumulative sums.
  for d, k_lo, k_hi in _offset_runs(offsets):
    win = _windows(fwd, rev, k_lo, k_hi)
    values = q[k_lo:] * win[0] + p[k_lo:] * win[1]
    top += _shift_add(out, values, d, start=k_lo)
  # A zero plus x is x, exactly.
  out += first.zero * q + second.zero * p
  zero = first.zero * second.zero
  depth = max(first.depth, second.depth) + 1
  return SumLaw(first.low, first.step, out, zero, top, depth,
                first.terms + second.terms)


def _offset_runs(offsets):
  """(d, k_lo, k_hi) for each run of k >= 1 with one offset (k_hi open: n)."""
  n = offsets.size
  runs = []
  k = 1
  while k < n:
    d = int(offsets[k])
    end = k
    if d == 0:
      end = n - 1
    else:
      end = int(np.searchsorted(-offsets, -d, side='right')) - 1
    runs.append((d, k, end))
    k = end + 1
  return runs


def _shift_add(out, values, d, start=0) -> float:
  """out[start + d + i] += values[i]; returns the mass beyond out's end."""
  n = out.size
  begin = start + d
  fits = max(0, min(values.size, n - begin))
  out[begin:begin + fits] += values[:fits]
  return float(values[fits:].sum())


def _windows(fwd, rev, k_lo, k_hi):
  """Rows' sums of masses i in [j - k_hi, j - k_lo], for j = k_lo .. n - 1.

  Each read from whichever end of the cumulative sums is nearer, so that
  tail masses keep their relative precision.
  """
  n = fwd.shape[1] - 1
  hi_f, hi_r = fwd[:, 1:n - k_lo + 1], rev[:, 1:n - k_lo + 1]
  clipped = max(0, min(k_hi, n) - k_lo)  # j < k_hi: the window starts at 0
  lo_f = np.concatenate([np.repeat(fwd[:, :1], clipped, axis=1),
                         fwd[:, :max(0, n - k_hi)]], axis=1)
  lo_r = np.concatenate([np.repeat(rev[:, :1], clipped, axis=1),
                         rev[:, :max(0, n - k_hi)]], axis=1)
  return np.maximum(
      np.where(hi_f <= lo_r, hi_f - lo_f, lo_r - hi_r), 0.0)


def coupled_cells(law: SumLaw, w_cells: int
                  ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """W's cells of the comonotone coupling: (mass, log U there, log V there).

  U = F^-1(1 - W) of S- at its smallest in the cell, V = F^-1(W) of S+ at
  its largest, both in logs (U = 0 is -inf, V = infinity is inf); an
  index past the last atom (a cumulative mass that cannot be certified)
  reads U = 0 and V = infinity.
  """
  atoms = np.concatenate([[law.zero], law.masses, [law.top]])
  forward = np.cumsum(atoms)                     # P(S <= atom i)
  survival = np.concatenate([np.cumsum(atoms[::-1])[::-1][1:], [0.0]])
  t = np.linspace(-1.0, 1.0, w_cells + 1) * math.log(1.0 / W_TAIL)
  w, w_rest = special.expit(t), special.expit(-t)  # W and 1 - W, accurate
  inner = np.where(t[1:] <= 0, w[1:] - w[:-1], w_rest[:-1] - w_rest[1:])
  mass = np.concatenate([[w[0]], inner, [w_rest[-1]]])
  rel, slack = _RELATIVE_SLACK, _MASS_SLACK
  # U at W = w: the first atom with P(S- > atom) <= w. Each of the two
  # reads, with its margins, can only give an earlier atom than the exact
  # one, so the later of the two is still valid.
  i_u = np.maximum(
      np.searchsorted(-(survival * (1 - rel) - slack), -w, side='left'),
      np.searchsorted(forward * (1 + rel) + slack, w_rest, side='left'))
  # V at W = w: the first atom with P(S+ <= atom) >= w; each read can only
  # give a later atom, so the earlier of the two is still valid.
  i_v = np.minimum(
      np.searchsorted(forward * (1 - rel) - slack, w, side='left'),
      np.searchsorted(-(survival * (1 + rel) + slack), -w_rest,
                      side='left'))
  log_grid = law.low + law.step * np.arange(law.masses.size)
  log_floor = math.log(law.terms) + law.low
  log_u = np.concatenate([[-np.inf], log_grid, [log_grid[-1]], [-np.inf]])
  log_v = np.concatenate(
      [[log_floor], np.logaddexp(law.depth * law.step + log_grid, log_floor),
       [np.inf], [np.inf]])
  # The last cell, (w_L, 1]: U at its least, V at its greatest.
  return (mass, np.concatenate([log_u[i_u], [-np.inf]]),
          np.concatenate([log_v[i_v], [np.inf]]))
