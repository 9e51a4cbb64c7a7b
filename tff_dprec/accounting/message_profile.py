"""Privacy profiles of one DP-REC message, and the PLD of one client draw.

From the Renyi bounds of `channel` (docs/PRIVACY.md, Section 2), for a
message of `num_groups` groups of `bits` bits at clip ratio c:

* forward, H(P_v || P_0): Prop. 12 of Canonne, Kamath, Steinke (2020) per
  order, and 0 at eps >= M b log 2 (P_v / P_0 <= 2^(M b): each group's
  index has probability at most K times its uniform one);
* reverse, H(P_0 || P_v): the same conversion of the exact reverse RDP;
* substitution, sup over |v|, |y| <= c s of H(P_v || P_y) (symmetric): the
  smaller of the conversion of `channel.substitution_rdp` and the
  hockey-stick triangle inequality through P_0 (forward then reverse).

`draw_pld` is one client draw with probability q (Algorithm 7, q = 1/N)
against the other clients' messages (docs/PRIVACY.md, Sections 3 and 9):
the subsampled profiles of the substitution pair in both directions, as a
pessimistic PLD. With q = 1 it is one participation against the message of
the same client with no data (the local pair (P_v, P_0)).
"""

import functools
import math
from typing import Dict, Tuple


from tff_dprec import validation
from tff_dprec.accounting import channel
from tff_dprec.accounting import loss_pmf
from tff_dprec.accounting import profile
from tff_dprec.accounting import worst_pair

# Integer orders of the Renyi bounds that the profiles are converted from.
PROFILE_ORDERS = tuple(range(2, 65))
# Grid step of the message profiles (in epsilon): PROFILE_STEP, or coarser
# so that a profile has at most PROFILE_POINTS points.
PROFILE_STEP = 1e-3
PROFILE_POINTS = 20000
# The PLD's loss grid: at most this fine, and at most this many points on
# each side of 0 (coarser where the losses spread wider, e.g. q = 1).
DEFAULT_DISCRETIZATION = 1e-4
MAX_GRID_POINTS = 40000
# Per-draw profile value at which the loss grid ends; what lies beyond goes
# to the PLD's infinity mass, so T draws add at most T * TINY to delta.
TINY = 1e-18
# Clipping and encoding run in float32: allow the norm 2^-20 above c.
_FLOAT32_SLACK = 1.0 + 2.0**-20


def message_profiles(*, clip_ratio: float, bits: int, num_groups: int,
                     max_epsilon: float
                     ) -> Tuple[profile.Profile, profile.Profile,
                                profile.Profile]:
  """(forward, reverse, substitution) profile bounds of one message.

  On the grid epsilon = i * step up to `max_epsilon` (their last value holds
  beyond), step = max(PROFILE_STEP, max_epsilon / PROFILE_POINTS). The clip
  ratio is raised by 2^-20 for float32 clipping, as in the Renyi
  accounting.
  """
  validation.check_nonnegative_number(clip_ratio, 'clip_ratio')
  validation.check_int_in_range(bits, 'bits', 1, 64)
  validation.check_positive_int(num_groups, 'num_groups')
  validation.check_positive_number(max_epsilon, 'max_epsilon')
  return _message_profiles(float(clip_ratio), int(bits), int(num_groups),
                           float(max_epsilon))


@functools.lru_cache(maxsize=256)
def _message_profiles(clip_ratio, bits, num_groups, max_epsilon):
  forward, reverse = _local_profiles(clip_ratio, bits, num_groups,
                                     max_epsilon)
  substitution = profile.minimum(*substitution_bounds(
      clip_ratio, bits, num_groups, max_epsilon).values())
  return forward, reverse, substitution


@functools.lru_cache(maxsize=256)
def _local_profiles(clip_ratio, bits, num_groups, max_epsilon):
  """(forward, reverse): the pairs (P_v, P_0) and (P_0, P_v)."""
  c = clip_ratio * _FLOAT32_SLACK
  step = max(PROFILE_STEP, max_epsilon / PROFILE_POINTS)
  forward_rdp, reverse_rdp = channel.message_rdp(
      clip_ratio=c, bits=bits, num_groups=num_groups, orders=PROFILE_ORDERS)
  forward = profile.from_rdp(PROFILE_ORDERS, forward_rdp, step, max_epsilon)
  values = forward.values
  values[forward.epsilons() >= _cap(bits, num_groups)] = 0.0  # D_inf.
  forward = profile.Profile(step, values)
  reverse = profile.from_rdp(PROFILE_ORDERS, reverse_rdp, step, max_epsilon)
  return forward, reverse


def _cap(bits, num_groups):
  """D_inf(P_v || P_0) <= M b log 2."""
  return num_groups * bits * math.log(2.0)


def uses_worst_pair(*, clip_ratio: float, bits: int,
                    num_groups: int) -> bool:
  """Whether step 3 takes the worst pair's profile (bound (c)) at a setting.

  It does for one group (Theorem 11.1 is proven for M = 1), a positive clip
  ratio and at most `worst_pair.MAX_BITS` bits; elsewhere step 3 is the
  smaller of the RDP and triangle bounds alone.
  """
  return num_groups == 1 and clip_ratio > 0 and bits <= worst_pair.MAX_BITS


def worst_pair_cell(clip_ratio: float) -> Tuple[float, float]:
  """The clip ratios (start, end] that share the worst-pair profile of
  `clip_ratio` (up to round-off at the ends): it is computed at c rounded
  up to `worst_pair`'s lattice, so epsilon may step up at the ends.
  """
  end = worst_pair.lattice_ceiling(clip_ratio * _FLOAT32_SLACK)
  return (end / (1 + worst_pair.C_LATTICE) / _FLOAT32_SLACK,
          end / _FLOAT32_SLACK)


def substitution_bounds(clip_ratio: float, bits: int, num_groups: int,
                        max_epsilon: float) -> Dict[str, profile.Profile]:
  """Step 3's bounds on the substitution profile, by name (docs/PRIVACY.md,
  Section 9.2): 'rdp' (a), 'triangle' (b) and, for one group,
  'worst_pair' (c). The profile used is their minimum."""
  c = clip_ratio * _FLOAT32_SLACK
  step = max(PROFILE_STEP, max_epsilon / PROFILE_POINTS)
  forward, reverse = _local_profiles(clip_ratio, bits, num_groups,
                                     max_epsilon)
  substitution_rdp = channel.substitution_rdp(
      clip_ratio=c, bits=bits, num_groups=num_groups, orders=PROFILE_ORDERS)
  bounds = {
      'rdp': profile.from_rdp(PROFILE_ORDERS, substitution_rdp, step,
                              max_epsilon),
      'triangle': profile.triangle(forward, reverse,
                                   first_cap=_cap(bits, num_groups))}
  if uses_worst_pair(clip_ratio=c, bits=bits, num_groups=num_groups):
    # The antipodal pair at full norm is the worst pair (Theorem 11.1).
    bounds['worst_pair'] = worst_pair.antipodal_profile(
        clip_ratio=c, bits=bits, step=step, max_epsilon=max_epsilon)
  return bounds


def draw_pld(*, q: float, clip_ratio: float, bits: int, num_groups: int,
             discretization: float = DEFAULT_DISCRETIZATION
             ) -> Tuple[float,
                        loss_pmf.PrivacyLoss]:
  """(loss grid step, PLD) dominating one DP-REC client draw with prob. q.

  The step is `discretization`, or coarser where the losses spread over
  more than MAX_GRID_POINTS steps on a side (PLDs compose only on one grid).

  q < 1: the pair ((1 - q) P_y + q P_v, P_y) for the worst other client y,
  both directions, from the substitution profile (joint convexity over the
  other clients' mixture, docs/PRIVACY.md Section 9). q = 1: the local pair
  (P_v, P_0), forward profile for removal and reverse for addition.
  """
  if not 0.0 < q <= 1.0:
    raise ValueError(f'q must be in (0, 1], found {q!r}.')
  validation.check_nonnegative_number(clip_ratio, 'clip_ratio')
  validation.check_int_in_range(bits, 'bits', 1, 64)
  validation.check_positive_int(num_groups, 'num_groups')
  validation.check_positive_number(discretization, 'discretization')
  return _draw_pld(float(q), float(clip_ratio), int(bits), int(num_groups),
                   float(discretization))


@functools.lru_cache(maxsize=64)
def _draw_pld(q, clip_ratio, bits, num_groups, discretization):
  max_epsilon = 8.0
  while True:
    forward, reverse, substitution = message_profiles(
        clip_ratio=clip_ratio, bits=bits, num_groups=num_groups,
        max_epsilon=max_epsilon)
    if q < 1.0:
      remove_base = add_base = substitution
    else:
      remove_base, add_base = forward, reverse
    # The bases must fall below TINY / q within their grids, or the last
    # value (which holds beyond) would swell the infinity mass.
    if (max(remove_base.values[-1], add_base.values[-1]) * q <= TINY or
        max_epsilon >= 512.0):
      break
    max_epsilon *= 2.0
  step = discretization
  while True:
    lo, hi, remove, add = profile.subsampled(remove_base, add_base, q, step,
                                             TINY)
    if hi <= MAX_GRID_POINTS:
      break
    step = step * hi / MAX_GRID_POINTS * 1.01
  return step, profile.pessimistic_pld(step, lo, hi, remove, add)
