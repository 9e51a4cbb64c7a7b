"""Calibration: the largest clip ratio or smallest noise meeting a target.

Every search brackets the boundary of {x : epsilon(x) <= target} for an
epsilon monotone in x, and returns a value that was evaluated and meets the
target, within a relative tolerance of the boundary:

* under the default accounting (`'min_pld_rdp'`: DP-REC's c, DP-FedAvg's z),
  `lattice_search.largest_meeting`: the answer is a lattice point one step
  on the safe side of the boundary, the same whatever the starting guess
  (earlier calibrations of the same federation, kept as guesses), in about
  four to eight evaluations; a point whose RDP epsilon (the cheaper bound,
  never below the default's) meets the target is settled without its PLD;
* otherwise `search`, which interpolates log epsilon against log x (false
  position, Illinois variant, with bisection as the safeguard): 9 to 15
  epsilon evaluations for the accountants here, against bisection's 25 to
  30. DDGauss, whose epsilon is not monotone in the noise, scans a log grid
  first.
"""

import math
from typing import Callable, Optional, Tuple

import numpy as np

from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import baselines
from tff_dprec.accounting import dp_rec_accountant
from tff_dprec.accounting import events
from tff_dprec.accounting import lattice_search
from tff_dprec.accounting import message_profile
from tff_dprec.accounting import paper_accountant
from tff_dprec.accounting import pld_accountant

# Bounds of the calibration searches.
MAX_CLIP_RATIO = 25.0
MIN_CLIP_RATIO = 1e-3
MIN_NOISE_MULTIPLIER = 1e-3
MAX_NOISE_MULTIPLIER = 1e4
SEARCH_ITERATIONS = 200
# search bisects when its bracket has not halved in this many steps.
_STALL_STEPS = 3
# Where DP-REC's PLD calibration starts when no earlier one is known.
_COLD_CLIP_RATIO = 1.0
# DP-FedAvg's PLD calibration starts this factor below the RDP's z.
_FIRST_NOISE_STEP = 1.5
# Earlier answers of the PLD calibrations in this process, as starting
# guesses only (the answers do not depend on them: `lattice_search`).
_CLIP_RATIO_GUESSES = lattice_search.Guesses()
_NOISE_GUESSES = lattice_search.Guesses()
# The PLD calibrations (DP-REC's c, DP-FedAvg's z) made in this process, by
# their arguments: a run and the planner's lines calibrate the same
# federation. Code that replaces an accounting function calls `clear_memo`
# before and after.
_CALIBRATIONS = pld_accountant.Memo(256)


class TargetUnreachableError(ValueError):
  """No parameter within the search bounds meets the privacy target."""


def calibrate_clip_ratio(*, target_epsilon: float, population: int,
                         clients_per_round: int, rounds: int, delta: float,
                         bits: Optional[int] = None,
                         num_groups: Optional[int] = None,
                         total_bits: Optional[int] = None,
                         accounting: str = accountings.DEFAULT_ACCOUNTING,
                         reverse_divergence: str = (
                             paper_accountant.REVERSE_FORWARD_BOUND),
                         tol: float = 1e-6) -> float:
  """Returns the largest clip ratio c whose DP-REC epsilon <= target_epsilon.

  Relative tolerance `tol`; the value returned always satisfies the target.
  Under `'min_pld_rdp'` it lies between (1 + tol)^-2 and (1 + tol)^-1 times the
  boundary (`lattice_search`), otherwise within `tol` below it (`search`).
  Arguments as `dp_rec_epsilon`.

  Raises:
    ValueError, TypeError: For invalid arguments.
    OverheadExceedsDeltaError: Paper mode, delta unreachable with the bits
      even for a vanishing clip ratio.
    TargetUnreachableError: If no c in [1e-3, 25] meets the target.
  """
  accounting = accountings.resolve(accounting)
  validation.check_positive_number(target_epsilon, 'target_epsilon')
  validation.check_positive_int(rounds, 'rounds')
  validation.check_probability(delta, 'delta')
  bits, num_groups = events.resolve_bits(accounting, bits, num_groups,
                                         total_bits)

  def epsilon(c, kind=accounting):
    return dp_rec_accountant.dp_rec_epsilon(
        clip_ratio=c, population=population,
        clients_per_round=clients_per_round, rounds=rounds, delta=delta,
        bits=bits, num_groups=num_groups, accounting=kind,
        reverse_divergence=reverse_divergence)

  def epsilon_or_inf(c):
    try:
      return epsilon(c)
    except paper_accountant.OverheadExceedsDeltaError:
      return math.inf

  if accounting == accountings.PAPER:
    # Raises OverheadExceedsDeltaError when even c -> 0 cannot meet delta.
    epsilon(MIN_CLIP_RATIO)
  if accounting == accountings.MIN_PLD_RDP:
    return _memoised(
        ('dp_rec', float(target_epsilon), population, clients_per_round,
         rounds, float(delta), bits, num_groups, reverse_divergence,
         float(tol)),
        lambda: _pld_clip_ratio(epsilon, target_epsilon, tol,
                                events.draw_rate(population,
                                                 clients_per_round),
                                delta, bits, num_groups,
                                clients_per_round * rounds))
  return search(epsilon_or_inf, target_epsilon, MIN_CLIP_RATIO,
                MAX_CLIP_RATIO, tol, 'clip_ratio', largest=True)


def clear_memo() -> None:
  """Forgets the calibrations kept in this process (`_CALIBRATIONS`)."""
  _CALIBRATIONS.clear()


def _memoised(key, calibrate: Callable[[], float]) -> float:
  """`calibrate()`, kept in `_CALIBRATIONS` under `key`."""
  value = _CALIBRATIONS.get(key)
  if value is None:
    value = calibrate()
    _CALIBRATIONS.put(key, value)
  return value


def _pld_clip_ratio(epsilon, target, tol, q, delta, bits, num_groups, draws):
  """DP-REC's clip ratio under the PLD: `lattice_search.largest_meeting`.

  The PLD epsilon is the smaller of two bounds, so a clip ratio whose RDP
  epsilon (cheaper) meets the target meets it: the PLD is evaluated only
  where the RDP bound misses. The search starts from what earlier
  calibrations of the same federation found (`_CLIP_RATIO_GUESSES`).
  """

  def search_epsilon(c):
    rdp = epsilon(c, accountings.RDP)
    return lattice_search.UpperBound(rdp) if rdp <= target else epsilon(c)

  key = (q, delta, float(target), num_groups, tol)
  guess, slope = _CLIP_RATIO_GUESSES.guess(key, bits, draws)
  # The worst pair's profile steps with c (message_profile).
  breaks = (message_profile.worst_pair_cell
            if message_profile.uses_worst_pair(
                clip_ratio=1.0, bits=bits, num_groups=num_groups) else None)
  try:
    found = lattice_search.largest_meeting(
        search_epsilon, target, MIN_CLIP_RATIO, MAX_CLIP_RATIO, tol,
        guess=guess if guess is not None else _COLD_CLIP_RATIO, slope=slope,
        breaks=breaks)
  except lattice_search.Unreachable as e:
    raise TargetUnreachableError(
        f'No clip_ratio >= {MIN_CLIP_RATIO} meets target_epsilon='
        f'{target!r}.') from e
  _CLIP_RATIO_GUESSES.remember(key, bits, draws, found)
  return found.x


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
                              tol: float = 1e-6,
                              accounting: str = (
                                  accountings.DEFAULT_ACCOUNTING)
                              ) -> float:
  """Returns the smallest noise multiplier whose epsilon <= target_epsilon.

  `accounting` and `conversion` as in `baselines.dp_fedavg_epsilon`; under
  `'min_pld_rdp'` the value lies between (1 + tol) and (1 + tol)^2 times the
  boundary (`lattice_search`), otherwise within `tol` above it.
  """
  validation.check_positive_number(target_epsilon, 'target_epsilon')
  accounting = accountings.resolve(accounting,
                                   accountings.DP_FEDAVG_ACCOUNTINGS)
  if (accounting == accountings.MIN_PLD_RDP and
      conversion != baselines.CONVERSION_TIGHT):
    raise ValueError(
        f'conversion={conversion!r} applies to the RDP accountant; pass '
        "accounting='rdp' with it (accounting='min_pld_rdp' was given).")

  def epsilon(z, kind=accounting):
    return baselines.dp_fedavg_epsilon(
        noise_multiplier=z, population=population,
        clients_per_round=clients_per_round, rounds=rounds, delta=delta,
        conversion=conversion, accounting=kind)

  if accounting == accountings.MIN_PLD_RDP:
    return _memoised(
        ('dp_fedavg', float(target_epsilon), population, clients_per_round,
         rounds, float(delta), float(tol)),
        lambda: _pld_noise(epsilon, target_epsilon, tol, population,
                           clients_per_round, rounds, delta))
  return search(epsilon, target_epsilon, MIN_NOISE_MULTIPLIER,
                MAX_NOISE_MULTIPLIER, tol, 'noise_multiplier', largest=False)


def _pld_noise(epsilon, target, tol, population, clients_per_round, rounds,
               delta):
  """DP-FedAvg's noise multiplier under the PLD, on the lattice of
  `lattice_search` in 1/z (the answer one lattice step above the smallest
  lattice z meeting the target).

  The RDP calibration meets the target (the PLD epsilon is the smaller of
  two bounds), so z lies below it: the search runs in [1e-3, z_RDP], from
  the answer at the nearest rounds found earlier or else from z_RDP / 1.5,
  and evaluates the PLD only where the RDP epsilon misses the target.
  """
  highest = MAX_NOISE_MULTIPLIER
  try:
    highest = calibrate_dp_fedavg_noise(
        target_epsilon=target, population=population,
        clients_per_round=clients_per_round, rounds=rounds, delta=delta,
        tol=tol, accounting=accountings.RDP)
  except TargetUnreachableError:
    pass  # The PLD may still reach it: search the whole range.
  if highest <= MIN_NOISE_MULTIPLIER:
    return highest

  def search_epsilon(x):
    z = 1.0 / x
    rdp = epsilon(z, accountings.RDP)
    return lattice_search.UpperBound(rdp) if rdp <= target else epsilon(z)

  key = (population, clients_per_round, delta, float(target), tol)
  guess, slope = _NOISE_GUESSES.guess(key, None, rounds)
  try:
    found = lattice_search.largest_meeting(
        search_epsilon, target, 1.0 / highest, 1.0 / MIN_NOISE_MULTIPLIER,
        tol, guess=guess if guess is not None else _FIRST_NOISE_STEP / highest,
        slope=slope)
  except lattice_search.Unreachable as e:
    raise TargetUnreachableError(
        f'No noise_multiplier <= {highest} meets target_epsilon='
        f'{target!r}.') from e
  _NOISE_GUESSES.remember(key, None, rounds, found)
  return 1.0 / found.x


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
  [1e-3, 1e4] for the first feasible value and then searches below it.

  Raises:
    TargetUnreachableError: If no noise multiplier on the grid meets the
      target (for example small epsilon with few bits).
  """
  validation.check_positive_number(target_epsilon, 'target_epsilon')

  def epsilon(z):
    return baselines.ddgauss_epsilon(
        noise_multiplier=z, l2_clip=l2_clip, bits=bits,
        clients_per_round=clients_per_round, population=population,
        rounds=rounds, delta=delta, dimension=dimension, beta=beta,
        modclip_prob=modclip_prob, rotation_type=rotation_type,
        conversion=conversion)

  grid = np.geomspace(MIN_NOISE_MULTIPLIER, MAX_NOISE_MULTIPLIER, 141)
  previous = None
  for z in grid:
    if epsilon(float(z)) <= target_epsilon:
      if previous is None:
        return float(z)
      return search(epsilon, target_epsilon, previous, float(z), tol,
                    'noise_multiplier', largest=False)
    previous = float(z)
  raise TargetUnreachableError(
      f'DDGauss cannot reach target_epsilon={target_epsilon!r} at '
      f'delta={delta!r} with bits={bits}, clients_per_round='
      f'{clients_per_round}, population={population}, rounds={rounds}, '
      f'dimension={dimension}: no noise multiplier in '
      f'[{MIN_NOISE_MULTIPLIER}, {MAX_NOISE_MULTIPLIER}] meets it.')


def search(epsilon: Callable[[float], float], target: float, lo: float,
           hi: float, tol: float, name: str, largest: bool) -> float:
  """The boundary of {x in [lo, hi] : epsilon(x) <= target}.

  `epsilon` must be monotone on [lo, hi]: increasing for `largest` (the
  largest x meeting the target is returned), decreasing otherwise (the
  smallest). It may return inf (or nan) where a target is unreachable. The
  search keeps a bracket (good, bad) with epsilon(good) <= target and
  epsilon(bad) > target, and stops when it is narrower than `tol` times its
  lower end, so the value returned always meets the target and is within a
  relative `tol` of the boundary.

  Steps: false position on log epsilon against log x, with the Illinois
  modification (an end kept twice has its value halved) so that both ends
  converge. Bisection (geometric while the bracket spans more than a factor
  of 4) is the safeguard: where interpolation is undefined (epsilon 0 or
  inf), where an end sits exactly on the target, and whenever the bracket
  has not halved in the last `_STALL_STEPS` steps; so at most about
  `_STALL_STEPS` times bisection's number of steps. Every step lands at
  least tol * low / 2 inside the bracket.

  Raises:
    ValueError: For lo <= 0, hi < lo, target <= 0 or tol outside
      [1e-12, 1).
    TargetUnreachableError: If the value at the good end misses the target.
  """
  _check_search_args(lo, hi, target, tol)
  good, bad = (lo, hi) if largest else (hi, lo)
  e_good = epsilon(good)
  if not e_good <= target:
    raise TargetUnreachableError(
        f'No {name} {">=" if largest else "<="} {good} meets '
        f'target_epsilon={target!r}.')
  e_bad = epsilon(bad)
  if e_bad <= target:
    return bad
  good, bad = _narrow(epsilon, target, (good, e_good), (bad, e_bad), tol)
  low, high = min(good, bad), max(good, bad)
  if high - low <= tol * low:
    return good
  raise TargetUnreachableError(
      f'The search for {name} did not converge in {SEARCH_ITERATIONS} steps '
      f'(bracket [{low!r}, {high!r}], target_epsilon={target!r}): is '
      'epsilon monotone?')


def _check_search_args(lo: float, hi: float, target: float,
                       tol: float) -> None:
  """Raises ValueError for the bad arguments `search` lists."""
  if not 0 < lo <= hi < math.inf:
    raise ValueError(f'search needs 0 < lo <= hi < inf, found lo={lo!r}, '
                     f'hi={hi!r}.')
  if not 0 < target < math.inf:
    raise ValueError(f'target_epsilon must be positive and finite, found '
                     f'{target!r}.')
  if not 1e-12 <= tol < 1:
    raise ValueError(f'tol must be in [1e-12, 1), found {tol!r}.')


def _narrow(epsilon: Callable[[float], float], target: float,
            good_end: Tuple[float, float], bad_end: Tuple[float, float],
            tol: float) -> Tuple[float, float]:
  """`search`'s steps: the bracket (good, bad) after at most its budget.

  `good_end` and `bad_end` are (x, epsilon(x)) with epsilon(good) <= target
  < epsilon(bad). Returns early once the bracket is within `tol`.
  """
  (good, e_good), (bad, e_bad) = good_end, bad_end
  f_good, f_bad = _log_gap(e_good, target), _log_gap(e_bad, target)
  kept, widths = None, []
  for _ in range(SEARCH_ITERATIONS):
    low, high = min(good, bad), max(good, bad)
    width = tol * low
    if high - low <= width:
      break
    widths.append(high - low)
    stalled = (len(widths) > _STALL_STEPS and
               widths[-1] > widths[-1 - _STALL_STEPS] / 2)
    x = None
    if not stalled and f_good != 0 and f_bad != 0:
      x = _false_position(good, bad, f_good, f_bad)
    if x is None or not math.isfinite(x):
      x = math.sqrt(low * high) if high > 4 * low else (low + high) / 2.0
      if stalled:
        widths.clear()
    x = min(max(x, low + width / 2), high - width / 2)
    e = epsilon(x)
    if e <= target:
      good, f_good = x, _log_gap(e, target)
      if kept == 'bad':
        f_bad /= 2
      kept = 'bad'
    else:
      bad, f_bad = x, _log_gap(e, target)
      if kept == 'good':
        f_good /= 2
      kept = 'good'
  return good, bad


def _log_gap(epsilon: float, target: float) -> float:
  """log(epsilon / target): <= 0 meets the target (-inf at 0, inf at inf)."""
  if epsilon <= 0:
    return -math.inf
  if not epsilon < math.inf:  # inf or nan: unreachable.
    return math.inf
  return math.log(epsilon) - math.log(target)


def _false_position(good, bad, f_good, f_bad) -> Optional[float]:
  """Where the chord of (log x, f) crosses 0; None where undefined."""
  if not (math.isfinite(f_good) and math.isfinite(f_bad)) or f_bad <= f_good:
    return None
  u_good, u_bad = math.log(good), math.log(bad)
  return math.exp(u_good - f_good * (u_bad - u_good) / (f_bad - f_good))
