"""Calibration: the largest clip ratio or smallest noise meeting a target.

Every search is a bounded bisection on a monotone predicate (epsilon <=
target), and returns a value that meets the target; DDGauss, whose epsilon
is not monotone in the noise, scans a log grid first.
"""

import math
from typing import Optional

import numpy as np

from tff_dprec import validation
from tff_dprec.accounting import baselines
from tff_dprec.accounting import dp_rec

# Bounds of the calibration searches.
MAX_CLIP_RATIO = 25.0
MIN_CLIP_RATIO = 1e-3
MIN_NOISE_MULTIPLIER = 1e-3
MAX_NOISE_MULTIPLIER = 1e4
SEARCH_ITERATIONS = 100


class TargetUnreachableError(ValueError):
  """No parameter within the search bounds meets the privacy target."""


def calibrate_clip_ratio(*, target_epsilon: float, population: int,
                         clients_per_round: int, rounds: int, delta: float,
                         bits: Optional[int] = None,
                         num_groups: Optional[int] = None,
                         total_bits: Optional[int] = None,
                         accounting: str = dp_rec.SOUND,
                         reverse_divergence: str = dp_rec.REVERSE_FORWARD_BOUND,
                         tol: float = 1e-6) -> float:
  """Returns the largest clip ratio c whose DP-REC epsilon <= target_epsilon.

  Bisection (epsilon increases with c), relative tolerance `tol`; the value
  returned always satisfies the target. Arguments as `dp_rec_epsilon`.

  Raises:
    ValueError, TypeError: For invalid arguments.
    OverheadExceedsDeltaError: Paper mode, delta unreachable with the bits
      even for a vanishing clip ratio.
    TargetUnreachableError: If no c in [1e-3, 25] meets the target.
  """
  validation.check_positive_number(target_epsilon, 'target_epsilon')
  validation.check_nonnegative_int(rounds, 'rounds')
  validation.check_probability(delta, 'delta')
  bits, num_groups = dp_rec.resolve_bits(accounting, bits, num_groups,
                                         total_bits)

  def epsilon(c):
    return dp_rec.dp_rec_epsilon(
        clip_ratio=c, population=population,
        clients_per_round=clients_per_round, rounds=rounds, delta=delta,
        bits=bits, num_groups=num_groups, accounting=accounting,
        reverse_divergence=reverse_divergence)

  def ok(c):
    try:
      return epsilon(c) <= target_epsilon
    except dp_rec.OverheadExceedsDeltaError:
      return False

  # Raises OverheadExceedsDeltaError when even c -> 0 cannot meet delta.
  epsilon(MIN_CLIP_RATIO)
  return bisect_largest(ok, MIN_CLIP_RATIO, MAX_CLIP_RATIO, tol, 'clip_ratio',
                        target_epsilon)


def round_down(value: float, digits: int = 6) -> float:
  """`value` rounded down to `digits` significant digits (safe to paste)."""
  return _round(value, digits, -1)


def round_up(value: float, digits: int = 6) -> float:
  """`value` rounded up to `digits` significant digits (safe to paste)."""
  return _round(value, digits, +1)


def _round(value, digits, direction):
  if value <= 0 or not math.isfinite(value):
    return value
  mantissa, exponent = f'{value:.{digits - 1}e}'.split('e')
  result = float(f'{mantissa}e{exponent}')
  if (result - value) * direction < 0:
    step = direction * 10.0**-(digits - 1)
    result = float(f'{float(mantissa) + step:.{digits - 1}f}e{exponent}')
  return result


def calibrate_dp_fedavg_noise(*, target_epsilon: float, population: int,
                              clients_per_round: int, rounds: int,
                              delta: float,
                              conversion: str = baselines.CONVERSION_TIGHT,
                              tol: float = 1e-6) -> float:
  """Returns the smallest noise multiplier whose epsilon <= target_epsilon."""
  validation.check_positive_number(target_epsilon, 'target_epsilon')

  def ok(z):
    return baselines.dp_fedavg_epsilon(
        noise_multiplier=z, population=population,
        clients_per_round=clients_per_round, rounds=rounds, delta=delta,
        conversion=conversion) <= target_epsilon

  return bisect_smallest(ok, MIN_NOISE_MULTIPLIER, MAX_NOISE_MULTIPLIER,
                          tol, 'noise_multiplier', target_epsilon)


def calibrate_ddgauss_noise(*, target_epsilon: float, l2_clip: float,
                            bits: int, clients_per_round: int,
                            population: int, rounds: int, delta: float,
                            dimension: int, beta: float = 0.0,
                            modclip_prob: float = 1e-4,
                            rotation_type: str = 'dft',
                            conversion: str = baselines.CONVERSION_TIGHT,
                            tol: float = 1e-4) -> float:
  """Returns the smallest noise multiplier meeting the target for DDGauss.

  Epsilon is not monotone in the noise (more noise means a coarser grid and a
  larger rounding-inflated sensitivity), so the search scans a log grid over
  [1e-3, 1e4] for the first feasible value and then bisects below it.

  Raises:
    TargetUnreachableError: If no noise multiplier on the grid meets the
      target (for example small epsilon with few bits).
  """
  validation.check_positive_number(target_epsilon, 'target_epsilon')

  def ok(z):
    return baselines.ddgauss_epsilon(
        noise_multiplier=z, l2_clip=l2_clip, bits=bits,
        clients_per_round=clients_per_round, population=population,
        rounds=rounds, delta=delta, dimension=dimension, beta=beta,
        modclip_prob=modclip_prob, rotation_type=rotation_type,
        conversion=conversion) <= target_epsilon

  grid = np.geomspace(MIN_NOISE_MULTIPLIER, MAX_NOISE_MULTIPLIER, 141)
  previous = None
  for z in grid:
    if ok(float(z)):
      if previous is None:
        return float(z)
      return bisect_smallest(ok, previous, float(z), tol, 'noise_multiplier',
                              target_epsilon)
    previous = float(z)
  raise TargetUnreachableError(
      f'DDGauss cannot reach target_epsilon={target_epsilon!r} at '
      f'delta={delta!r} with bits={bits}, clients_per_round='
      f'{clients_per_round}, population={population}, rounds={rounds}, '
      f'dimension={dimension}: no noise multiplier in '
      f'[{MIN_NOISE_MULTIPLIER}, {MAX_NOISE_MULTIPLIER}] meets it.')


def bisect_largest(ok, lo, hi, tol, name, target):
  """Largest x in [lo, hi] with ok(x), for ok true below and false above."""
  return _bisect(ok, lo, hi, tol, name, target, largest=True)


def bisect_smallest(ok, lo, hi, tol, name, target):
  """Smallest x in [lo, hi] with ok(x), for ok false below and true above."""
  return _bisect(ok, lo, hi, tol, name, target, largest=False)


def _bisect(ok, lo, hi, tol, name, target, largest):
  """Bounded bisection (geometric while the bracket is wide)."""
  good, bad = (lo, hi) if largest else (hi, lo)
  if not ok(good):
    raise TargetUnreachableError(
        f'No {name} {">=" if largest else "<="} {good} meets '
        f'target_epsilon={target!r}.')
  if ok(bad):
    return bad
  for _ in range(SEARCH_ITERATIONS):
    low, high = min(good, bad), max(good, bad)
    if high - low <= tol * low:
      break
    mid = math.sqrt(low * high) if high > 4 * low else (low + high) / 2.0
    if ok(mid):
      good = mid
    else:
      bad = mid
  return good
