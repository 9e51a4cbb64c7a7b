"""`DpRecPldAccountant`: a privacy loss distribution of DP-REC's release.

`accounting='pld'`, the default; docs/PRIVACY.md, Section 9. Certified
profiles of one message (`message_profile`), the exact Poisson-subsampling
forms of the substitution pair in both directions, a pessimistic
connect-the-dots PLD per draw, composed as dp_accounting composes PLDs
(`loss_pmf`). It also composes the Renyi bounds of `rdp_accountant`, and
returns the smaller epsilon (both are upper bounds).
"""

import functools
from typing import Optional, Sequence, Tuple

import dp_accounting
import numpy as np

from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import message_profile
from tff_dprec.accounting import rdp_accountant

_NeighborRel = dp_accounting.NeighboringRelation


class DpRecPldAccountant(rdp_accountant.DpRecRdpAccountant):
  """PLD accountant for DP-REC (`accounting='pld'`), never above the RDP one.

  Events as `DpRecAccountantBase`, except `PoissonSampledDpEvent` with
  q >= 1: the PLD models a draw against another client's message; compose
  a `DpRecEvent` for a known participant. `get_epsilon` returns the smaller
  of the PLD epsilon and the Renyi one (`rdp`, `orders` as there).
  """

  accounting = accountings.PLD

  def __init__(self,
               orders: Optional[Sequence[int]] = None,
               neighboring_relation: _NeighborRel = _NeighborRel
               .ADD_OR_REMOVE_ONE,
               discretization: float = message_profile.DEFAULT_DISCRETIZATION):
    """Initializes the accountant.

    Args:
      orders: Renyi orders of the RDP bound, integers >= 2 (default
        `rdp_bounds.SOUND_ORDERS`).
      neighboring_relation: Must be `ADD_OR_REMOVE_ONE`.
      discretization: The loss grid of one draw's PLD (coarser where one
        draw's losses spread wider than 40,000 steps).

    Raises:
      ValueError: For invalid arguments.
    """
    super().__init__(orders, neighboring_relation)
    validation.check_positive_number(discretization, 'discretization')
    self._discretization = float(discretization)
    # Draw counts per (q, c, bits, groups), composed on demand.
    self._draws = {}
    self._non_private = False

  def _check_sampling(self, event):
    q = event.sampling_probability
    if q >= 1.0:
      # The PLD models a draw against another client's message, which a
      # draw that always picks the target (population 1) does not have;
      # a known participant is a DpRecEvent (the local pair).
      return self.CompositionErrorDetails(
          invalid_event=event,
          error_message="accounting='pld' needs a sampling probability "
          f'below 1, found {q!r}; compose a DpRecEvent for a release '
          'without sampling.')
    return None

  def _compose_release(self, q, event, count):
    rdp = count * self._release_rdp(q, event)
    if event.clip_ratio > 0:
      key = (min(float(q), 1.0), float(event.clip_ratio), event.bits,
             event.num_groups)
      # Checks the arguments (and warms the cache) before any state
      # changes; the composition itself waits for get_epsilon.
      message_profile.draw_pld(q=key[0], clip_ratio=key[1], bits=key[2],
                               num_groups=key[3],
                               discretization=self._discretization)
      self._draws[key] = self._draws.get(key, 0) + count
    self._rdp += rdp

  def _compose_non_private(self):
    self._non_private = True
    super()._compose_non_private()

  def get_epsilon_and_optimal_order(self, target_delta: float):
    """Returns (epsilon, optimal order) at `target_delta`.

    The order is None where the PLD gives the smaller epsilon.

    Raises:
      ValueError: If target_delta is not in (0, 1).
    """
    eps, order = super().get_epsilon_and_optimal_order(target_delta)
    if not np.any(self._rdp) or not self._draws or self._non_private:
      return eps, order  # Nothing released, or no PLD to compare.
    pld_eps = composed_epsilon(tuple(sorted(self._draws.items())),
                               self._discretization, float(target_delta))
    if pld_eps < eps:
      return float(pld_eps), None
    return eps, order


@functools.lru_cache(maxsize=1024)
def composed_epsilon(draws: Tuple[Tuple[tuple, int], ...],
                     discretization: float, delta: float) -> float:
  """The PLD epsilon at `delta` of `draws`: ((q, c, bits, groups), count).

  Each draw's PLD is built on `discretization` or coarser
  (`message_profile.draw_pld`); PLDs compose on one grid only, so all are
  rebuilt on the coarsest step any of them needs (none needs a coarser
  one at a coarser step: fewer points fit the limit). Kept per argument:
  a calibration and its callers ask for the same epsilons again.
  """
  step = discretization
  while True:
    built = [(message_profile.draw_pld(
        q=q, clip_ratio=c, bits=b, num_groups=m, discretization=step), count)
             for (q, c, b, m), count in draws]
    coarsest = max(got for (got, _), _ in built)
    if all(got == coarsest for (got, _), _ in built):
      break
    step = coarsest
  composed = None
  for (_, pld), count in built:
    pld = pld.self_compose(count)
    composed = pld if composed is None else composed.compose(pld)
  return float(composed.get_epsilon_for_delta(delta))
