"""`DpRecRdpAccountant`: Renyi DP of what a DP-REC client releases.

`accounting='rdp'`; docs/PRIVACY.md, Sections 2-3. The
seed and its M indices, for add/remove-one-client neighbours:

* one message: eps(a) = max over the two directions of the worst case,
  over splits sum_g c_g^2 <= c^2, of the per-group divergences summed over
  groups (`channel.message_rdp`: exact reverse divergence, upper bounds on
  the forward one);
* one client draw with probability q (`events.DpRecRoundEvent`, Algorithm
  7: q = 1/N per draw, B draws per round): a draw that misses the target
  holds another client's message, so the base RDP is the substitution
  bound `channel.substitution_rdp`, amplified by the general subsampling
  bound of Zhu and Wang (ICML 2019, Theorem 6) for the mixture
  (1 - q) P_y + q P_v: `rdp_bounds.proven_rdp`;
* composition over draws and rounds by adding RDP; conversion to
  (epsilon, delta) with dp_accounting's conversion (Canonne, Kamath,
  Steinke 2020, Prop. 12), valid for any pair of distributions.

The amplified epsilon protects against observers who do not know who was
sampled; against the server, a participation costs the local epsilon
(`dp_rec_local_epsilon`). No delta overhead.
"""

from typing import Optional, Sequence

import dp_accounting
from dp_accounting.rdp import rdp_privacy_accountant
import numpy as np

from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import base_accountant
from tff_dprec.accounting import channel
from tff_dprec.accounting import rdp_bounds

_NeighborRel = dp_accounting.NeighboringRelation


class DpRecRdpAccountant(base_accountant.DpRecAccountantBase):
  """Renyi DP accountant for DP-REC (`accounting='rdp'`).

  Events as `DpRecAccountantBase`; each release adds
  `rdp_bounds.proven_rdp` to the RDP vector over `orders`. The state counts
  the releases of each kind (probability, message), so composing in steps
  gives the RDP of one composition of the total count, to the last bit.
  """

  accounting = accountings.RDP
  composes_exactly = True

  def __init__(self,
               orders: Optional[Sequence[int]] = None,
               neighboring_relation: _NeighborRel = _NeighborRel
               .ADD_OR_REMOVE_ONE):
    """Initializes the accountant.

    Args:
      orders: Renyi orders, integers >= 2 (default
        `rdp_bounds.PROVEN_ORDERS`).
      neighboring_relation: Must be `ADD_OR_REMOVE_ONE`.

    Raises:
      ValueError: For invalid arguments.
    """
    super().__init__(neighboring_relation)
    self._orders = channel.check_orders(
        rdp_bounds.PROVEN_ORDERS if orders is None else orders)
    # (q, DpRecEvent) -> [releases, RDP of one release], in the order first
    # composed.
    self._releases = {}
    self._non_private = False

  @property
  def rdp(self) -> np.ndarray:
    """The composed RDP, one value per order.

    The sum, over the kinds of release in the order first composed, of
    the count times one release's RDP (+inf after a non-private event).
    """
    rdp = np.zeros(len(self._orders))
    for count, release_rdp in self._releases.values():
      rdp += count * release_rdp
    if self._non_private:
      rdp += np.inf
    return rdp

  def _release_rdp(self, q, event):
    return rdp_bounds.proven_rdp(q, event.clip_ratio, event.bits,
                                event.num_groups, self._orders)

  def _compose_release(self, q, event, count):
    self._count_releases(q, event, count, self._release_rdp(q, event))

  def _count_releases(self, q, event, count, release_rdp):
    """Adds `count` releases of `event` with probability q, whose RDP each
    is `release_rdp`."""
    key = (float(q), event)
    if key in self._releases:
      self._releases[key][0] += count
    else:
      self._releases[key] = [count, release_rdp]

  def _compose_non_private(self):
    self._non_private = True

  def get_epsilon_and_optimal_order(self, target_delta: float):
    """Returns (epsilon, optimal order) at `target_delta`.

    Raises:
      ValueError: If target_delta is not in (0, 1).
    """
    validation.check_probability(target_delta, 'target_delta')
    rdp = self.rdp
    if not np.any(rdp):
      return 0.0, float(self._orders[0])
    eps, order = rdp_privacy_accountant.compute_epsilon(
        self._orders.astype(np.float64), rdp, target_delta)
    return float(eps), float(order)
