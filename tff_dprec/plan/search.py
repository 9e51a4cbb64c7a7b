"""The planner's searches: DP-REC's bits from c, and its break-even B'.

Both search over a calibration passed in as a function, so that they are
tested on stand-ins and the planner can route the calibrations through a
cache of its caller's (`planner.Calibrations`).
"""

import math
from typing import Callable, Optional

from tff_dprec import validation

# Bits chosen from c: the smallest b whose K = 2^b candidates exceed
# exp(KL + margin), KL <= c^2 / 2 nats being the divergence of a clipped
# update's posterior from the prior. Importance sampling needs about
# exp(KL + t) samples, its error falling like exp(-t / 4) (Chatterjee and
# Diaconis 2018, Thm. 1.1; Havasi et al. 2019 for REC); t = 2 nats, because
# each bit more doubles the candidates the encode generates, and so its
# work. At most 8 bits: the encode generates 2^bits candidates of the
# group's size; a larger c needs more groups rather than more bits per
# group.
REC_MARGIN_NATS = 2.0
MAX_AUTO_BITS = 8


def margin_met(bits: int, clip_ratio: float) -> bool:
  """Whether 2^bits candidates meet the coding margin at c."""
  return bits * math.log(2) >= clip_ratio * clip_ratio / 2 + REC_MARGIN_NATS


def auto_bits(calibrate_c: Callable[[int], float],
              start: Optional[int] = None,
              misses_margin: Optional[Callable[[int], bool]] = None) -> tuple:
  """(bits, c, met): the smallest bits with bits ln 2 >= c(bits)^2 / 2 + margin.

  `calibrate_c(bits)` is DP-REC's clip ratio at `bits` (calibrated, which
  falls as bits grow under the proven accountings, or fixed); a bit width it
  refuses (raises ValueError: a target out of reach) is skipped. When no
  width up to the cap `MAX_AUTO_BITS` meets the margin, the largest width
  that calibrated is returned with `met` False.

  Without `start` the widths are scanned upwards from the smallest. With
  `start` (a guess, for example from a nearby calibration) the search walks
  down from it while the margin holds, or up until it holds: the scan's
  answer whenever the margin is monotone in bits (it is when c does not
  grow with bits), in fewer calibrations; where the walk cannot conclude (a
  refused start, nothing met above it) it falls back to the scan.

  `misses_margin(bits)`, where given, is True only when c(bits) surely
  misses the margin and is not refused (`margin_clip_ratio`): such a width
  is settled without calibrating it, and calibrated only if its c is
  returned. The answer is the same.

  Raises:
    The last refusal of `calibrate_c` when every bit width up to the cap is
    refused.
  """
  lowest = max(1, math.ceil(REC_MARGIN_NATS / math.log(2)))
  seen = {}

  def outcome(bits):  # None (refused) or (c, margin met); c None: missed.
    if bits not in seen:
      if misses_margin is not None and misses_margin(bits):
        seen[bits] = (None, False)
        return seen[bits]
      try:
        c = calibrate_c(bits)
        seen[bits] = (c, margin_met(bits, c))
      except ValueError as e:  # TargetUnreachable, OverheadExceedsDelta.
        seen[bits] = e
    return None if isinstance(seen[bits], ValueError) else seen[bits]

  if start is not None:
    found = _walk(outcome, min(max(int(start), lowest), MAX_AUTO_BITS),
                  lowest)
    if found is not None:
      return found[0], outcome(found[0])[0], True
  for bits in range(lowest, MAX_AUTO_BITS + 1):
    result = outcome(bits)
    if result is not None and result[1]:
      return bits, result[0], True
  calibrated = [b for b in seen if outcome(b) is not None]
  if not calibrated:
    raise seen[MAX_AUTO_BITS]
  largest = max(calibrated)
  c = outcome(largest)[0]
  return largest, calibrate_c(largest) if c is None else c, False


def margin_clip_ratio(bits: int) -> float:
  """The largest c that `bits` meet the margin at: sqrt(2 (b ln 2 - margin))
  (0 where even c = 0 misses it)."""
  return math.sqrt(max(0.0, 2.0 * (bits * math.log(2) - REC_MARGIN_NATS)))


def bits_for_clip_ratio(clip_ratio: float) -> int:
  """The smallest bits meeting the margin at a fixed c (`auto_bits`' start)."""
  return math.ceil((clip_ratio**2 / 2 + REC_MARGIN_NATS) / math.log(2))


def dp_rec_relative_noise(clip_ratio: float, clients_per_round: int) -> float:
  """1 / (c sqrt(B)): noise per coordinate of the mean, over the clip."""
  return 1.0 / (clip_ratio * math.sqrt(clients_per_round))


def gaussian_relative_noise(noise_multiplier: float,
                            clients_per_round: int) -> float:
  """z / B: DP-FedAvg's and DDGauss's noise on the mean over the clip."""
  return noise_multiplier / clients_per_round


def break_even(target_noise: float, population: int,
               clip_ratio_at: Callable[[int, Optional[float]], tuple],
               clients_per_round: int) -> Optional[tuple]:
  """The smallest B' <= N with 1 / (c(B') sqrt(B')) <= target_noise.

  `clip_ratio_at(B', previous_c)` returns `(c, bits)` at B' (raising
  ValueError where the target is out of reach, which counts as a miss).
  Assumption (stated, and checked where the answer is found): the relative
  noise 1 / (c(B') sqrt(B')) does not grow with B', i.e. c falls more
  slowly than 1 / sqrt(B'). It holds where sampling amplifies (there c
  falls about as B'^(-1/4)); a drop of the bits chosen from c only lowers
  the noise.

  The search brackets the answer between a miss and a hit, then narrows
  it: steps from a miss go to max(f(B'), B' + jump), with f(B') =
  1 / (target c(B'))^2 (where c no longer falls, f is the answer) and a
  jump that doubles with every step on which f moves less than it (so
  about log2 N misses at most, however slowly f moves); a hit at h is the
  answer when h - 1 misses, else the bracket is bisected.

  Returns:
    `(B', c, bits)`, or None when N itself misses the target.
  """
  validation.check_positive_number(target_noise, 'target_noise')
  validation.check_positive_int(population, 'population')
  validation.check_positive_int(clients_per_round, 'clients_per_round')
  if clients_per_round > population:
    raise ValueError(f'clients_per_round={clients_per_round!r} exceeds '
                     f'population={population!r}.')
  known = {}

  def at(b, previous=None):  # (meets, c, bits); c None where out of reach.
    if b not in known:
      try:
        c, bits = clip_ratio_at(b, previous)
        known[b] = (dp_rec_relative_noise(c, b) <= target_noise, c, bits)
      except ValueError:
        known[b] = (False, None, None)
    return known[b]

  if at(clients_per_round)[0]:
    miss, hit = 0, clients_per_round  # 0: a sentinel miss.
  else:
    miss, hit = _bracket(at, target_noise, population, clients_per_round)
    if hit is None:
      return None
  while hit - miss > 1 and at(hit - 1, at(hit)[1])[0]:
    hit -= 1  # The hit is not the smallest: bisect what is left.
    middle = (miss + hit) // 2
    if middle > miss and at(middle, at(hit)[1])[0]:
      hit = middle
    elif middle > miss:
      miss = middle
  return (hit,) + at(hit)[1:]


def _walk(outcome, start, lowest):
  """auto_bits' walk from `start`: (bits,) or None where it cannot tell."""
  here = outcome(start)
  if here is not None and here[1]:
    best = start
    for bits in range(start - 1, lowest - 1, -1):
      below = outcome(bits)
      if below is None:
        continue  # Refused: the ones below may still meet the margin.
      if not below[1]:
        break
      best = bits
    return (best,)
  if here is None:
    return None
  for bits in range(start + 1, MAX_AUTO_BITS + 1):
    above = outcome(bits)
    if above is not None and above[1]:
      return (bits,)
  return None


def _bracket(at, target_noise, population, miss):
  """(last miss, first hit) above a miss, or (N, None) when N misses."""
  jump = 1
  while miss < population:
    c = at(miss)[1]
    needed = (math.ceil(1.0 / (target_noise * c)**2 - 1e-9)
              if c is not None else miss + jump)
    trial = min(max(needed, miss + jump), population)
    if at(trial, c)[0]:
      return miss, trial
    # f moving slower than the jump: double it; f moving fast: follow f.
    jump = 2 * jump if needed - miss <= jump else 1
    miss = trial
  return population, None
