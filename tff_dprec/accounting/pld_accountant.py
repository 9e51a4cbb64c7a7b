"""`DpRecPldAccountant`: a privacy loss distribution of DP-REC's release.

`accounting='min_pld_rdp'`, the default; docs/PRIVACY.md, Section 9. Certified
profiles of one message (`message_profile`), the exact Poisson-subsampling
forms of the substitution pair in both directions, a pessimistic
connect-the-dots PLD per draw, composed as dp_accounting composes PLDs
(`loss_pmf`). It also composes the Renyi bounds of `rdp_accountant`, and
returns the smaller epsilon (both are upper bounds).
"""

import collections
import threading
from typing import Optional, Sequence, Tuple

import dp_accounting
import numpy as np

from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import loss_pmf
from tff_dprec.accounting import message_profile
from tff_dprec.accounting import rdp_accountant

_NeighborRel = dp_accounting.NeighboringRelation
# A kind of draw: (q, clip ratio, bits, groups).
DrawKind = Tuple[float, float, int, int]


class DpRecPldAccountant(rdp_accountant.DpRecRdpAccountant):
  """DP-REC's PLD accountant, never above the RDP one ('min_pld_rdp').

  Events as `DpRecAccountantBase`. As dp_accounting's `PLDAccountant`, it
  keeps the PLD of what it has composed (`pld`, a `ComposedPld`) and
  composes each event into it, so its epsilon after each round's
  composition is that round's. `get_epsilon` returns the smaller of the
  PLD epsilon and the Renyi one (`rdp`, `orders` as there).
  """

  accounting = accountings.MIN_PLD_RDP

  def __init__(self,
               orders: Optional[Sequence[int]] = None,
               neighboring_relation: _NeighborRel = _NeighborRel
               .ADD_OR_REMOVE_ONE,
               discretization: float = message_profile.DEFAULT_DISCRETIZATION):
    """Initializes the accountant.

    Args:
      orders: Renyi orders of the RDP bound, integers >= 2 (default
        `rdp_bounds.PROVEN_ORDERS`).
      neighboring_relation: Must be `ADD_OR_REMOVE_ONE`.
      discretization: The loss grid of one draw's PLD (coarser where one
        draw's losses spread wider than 40,000 steps).

    Raises:
      ValueError: For invalid arguments.
    """
    super().__init__(orders, neighboring_relation)
    validation.check_positive_number(discretization, 'discretization')
    self._pld = ComposedPld(float(discretization))

  @property
  def pld(self) -> 'ComposedPld':
    """The PLD of the releases composed so far (those with c > 0: c = 0
    releases nothing)."""
    return self._pld

  def _compose_release(self, q, event, count):
    # Both bounds are built (and their arguments checked) before any state
    # changes.
    release_rdp = self._release_rdp(q, event)
    if event.clip_ratio > 0:
      self._pld = self._pld.compose(
          (float(q), float(event.clip_ratio), event.bits, event.num_groups),
          count)
    self._count_releases(q, event, count, release_rdp)

  def get_epsilon_and_optimal_order(self, target_delta: float):
    """Returns (epsilon, optimal order) at `target_delta`.

    The order is None where the PLD gives the smaller epsilon.

    Raises:
      ValueError: If target_delta is not in (0, 1).
    """
    eps, order = super().get_epsilon_and_optimal_order(target_delta)
    if self._non_private or not self._pld.draws or not np.any(self.rdp):
      return eps, order  # Nothing released, or no PLD to compare.
    pld_eps = self._pld.get_epsilon_for_delta(float(target_delta))
    if pld_eps < eps:
      return float(pld_eps), None
    return eps, order


class ComposedPld:
  """The PLD of composed DP-REC draws: each kind's draw PLD to its count.

  Immutable, as dp_accounting's `PrivacyLossDistribution`: `compose`
  returns the PLD with more draws. Draws of one kind (q, c, bits, groups)
  compose as one self-composition of the draw's PLD
  (`message_profile.draw_pld`) to their total count, which is what
  dp_accounting's `self_compose` does for a count, so composing in steps
  gives the PLD of one composition of the total, to the last bit. Kinds
  compose by convolution in the order of their keys, all on the coarsest
  loss grid any of them needs (PLDs compose on one grid only; none needs a
  coarser one at a coarser step: fewer points fit the limit).

  The composed PLD is built when first asked (`privacy_loss`) and kept;
  the transforms of each kind's draw PLD (`loss_pmf.SelfComposer`) are
  kept and shared by the PLDs composed from this one, so a PLD one round
  later costs one power and one inverse FFT per kind.
  """

  def __init__(self, discretization: float):
    """An empty composition (no draws) on the loss grid `discretization`."""
    self._discretization = discretization
    self._counts = {}  # DrawKind -> draws.
    self._composers = {}  # (DrawKind, step) -> (remove, add) SelfComposers.
    self._privacy_loss = None

  @property
  def discretization(self) -> float:
    return self._discretization

  @property
  def draws(self) -> Tuple[Tuple[DrawKind, int], ...]:
    """((q, c, bits, groups), count) of every kind of draw, sorted."""
    return tuple(sorted(self._counts.items()))

  def compose(self, kind: DrawKind, count: int) -> 'ComposedPld':
    """This PLD composed with `count` draws of `kind` (q, c, bits, groups).

    Raises:
      ValueError: If the draw's PLD cannot be built for these arguments.
    """
    q, c, bits, groups = kind
    # Checks the arguments (and warms draw_pld's cache).
    message_profile.draw_pld(q=q, clip_ratio=c, bits=bits, num_groups=groups,
                             discretization=self._discretization)
    validation.check_positive_int(count, 'count')
    composed = ComposedPld(self._discretization)
    composed._counts = dict(self._counts)
    composed._counts[kind] = self._counts.get(kind, 0) + count
    composed._composers = self._composers  # Shared: the same draw PLDs.
    return composed

  def get_epsilon_for_delta(self, delta: float) -> float:
    """The composed PLD's epsilon at `delta` (remembered across PLDs with
    the same draws: a calibration and its callers ask for the same
    epsilons again)."""
    key = (self.draws, self._discretization, float(delta))
    epsilon = _EPSILONS.get(key)
    if epsilon is None:
      epsilon = float(self.privacy_loss().get_epsilon_for_delta(delta))
      _EPSILONS.put(key, epsilon)
    return epsilon

  def privacy_loss(self) -> loss_pmf.PrivacyLoss:
    """The composed PLD (at least one draw)."""
    if not self._counts:
      raise ValueError('An empty composition has no privacy loss.')
    if self._privacy_loss is None:
      draws = self.draws
      step, plds = _on_one_grid([kind for kind, _ in draws],
                                self._discretization)
      composed = None
      for (kind, count), pld in zip(draws, plds):
        pld = self._self_compose(kind, step, pld, count)
        composed = pld if composed is None else composed.compose(pld)
      self._privacy_loss = composed
    return self._privacy_loss

  def _self_compose(self, kind, step, pld, count):
    """`pld.self_compose(count)` from the kept transforms of `kind`."""
    if (kind, step) not in self._composers:
      self._composers[kind, step] = (loss_pmf.SelfComposer(pld.remove),
                                     loss_pmf.SelfComposer(pld.add))
    remove, add = self._composers[kind, step]
    return loss_pmf.PrivacyLoss(remove.compose(count), add.compose(count))


def _on_one_grid(kinds, discretization):
  """(step, [draw PLD of each kind]), all on the coarsest step any needs.

  Each draw's PLD is built on `discretization` or coarser
  (`message_profile.draw_pld`); all are rebuilt on the coarsest.
  """
  step = discretization
  while True:
    built = [message_profile.draw_pld(q=q, clip_ratio=c, bits=b,
                                      num_groups=m, discretization=step)
             for q, c, b, m in kinds]
    coarsest = max(got for got, _ in built)
    if all(got == coarsest for got, _ in built):
      return step, [pld for _, pld in built]
    step = coarsest


class Memo:
  """A thread-safe memo of at most `size` values, least recently used out."""

  def __init__(self, size: int):
    self._size = size
    self._values = collections.OrderedDict()
    self._lock = threading.Lock()

  def get(self, key):
    with self._lock:
      if key not in self._values:
        return None
      self._values.move_to_end(key)
      return self._values[key]

  def put(self, key, value):
    with self._lock:
      self._values[key] = value
      self._values.move_to_end(key)
      while len(self._values) > self._size:
        self._values.popitem(last=False)

  def clear(self):
    with self._lock:
      self._values.clear()


# Epsilons by (draws, discretization, delta), across accountants.
_EPSILONS = Memo(1024)
