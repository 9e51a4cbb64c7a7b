"""`DpRecAccountantBase`: the walk over events that DP-REC's accountants share.

Each accountant (`pld_accountant`, `rdp_accountant`, `paper_accountant`)
says how one client draw composes, what a non-private event does to its
state and which sampling probabilities it accepts; this class walks
dp_accounting's composite events down to those, as dp_accounting's
`RdpAccountant._maybe_compose` does.
"""

import abc

import dp_accounting
import numpy as np

from tff_dprec.accounting import events

_NeighborRel = dp_accounting.NeighboringRelation


class DpRecAccountantBase(dp_accounting.PrivacyAccountant):
  """Base of the DP-REC accountants.

  Supports `DpRecEvent` (a release without amplification),
  `PoissonSampledDpEvent(q, DpRecEvent)` (one client draw with probability
  q; `events.dp_rec_round_event` builds a round) and `NoOpDpEvent`,
  `NonPrivateDpEvent`, `ComposedDpEvent`, `SelfComposedDpEvent` of those,
  for add/remove-one-client neighbours.
  """

  accounting: str  # The accounting's name (`accountings`).

  def __init__(self, neighboring_relation: _NeighborRel):
    if neighboring_relation is not _NeighborRel.ADD_OR_REMOVE_ONE:
      raise ValueError(
          f'{type(self).__name__} supports neighboring_relation='
          f'ADD_OR_REMOVE_ONE only, found {neighboring_relation!r}.')
    super().__init__(neighboring_relation)
    self._orders = np.zeros(0)  # Set by the subclass.

  @property
  def orders(self) -> np.ndarray:
    return np.copy(self._orders)

  @abc.abstractmethod
  def _compose_release(self, q: float, event: events.DpRecEvent,
                       count: int) -> None:
    """Composes `count` draws of `event` with probability q (1: no sampling)."""

  @abc.abstractmethod
  def _compose_non_private(self) -> None:
    """Makes every later epsilon infinite."""

  def _check_sampling(self, event: dp_accounting.PoissonSampledDpEvent):
    """None if `event`'s sampling probability is supported, else why not.

    Returns:
      None, or `CompositionErrorDetails` (a subclass that refuses some q).
    """
    del event
    return None

  def get_epsilon(self, target_delta: float) -> float:
    return self.get_epsilon_and_optimal_order(target_delta)[0]

  @abc.abstractmethod
  def get_epsilon_and_optimal_order(self, target_delta: float):
    """Returns (epsilon, optimal order) at `target_delta`."""

  def _maybe_compose(self, event, count, do_compose):
    if isinstance(event, dp_accounting.NoOpDpEvent):
      return None
    if isinstance(event, dp_accounting.NonPrivateDpEvent):
      if do_compose:
        self._compose_non_private()
      return None
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
      return self._maybe_compose(event.event, event.count * count, do_compose)
    if isinstance(event, dp_accounting.ComposedDpEvent):
      for e in event.events:
        result = self._maybe_compose(e, count, do_compose)
        if result is not None:
          return result
      return None
    if isinstance(event, events.DpRecEvent):
      if do_compose:
        self._compose_release(1.0, event, count)
      return None
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
      if not isinstance(event.event, events.DpRecEvent):
        return self.CompositionErrorDetails(
            invalid_event=event,
            error_message=f'{type(self).__name__} supports '
            'PoissonSampledDpEvent of a DpRecEvent only, found subevent '
            f'{event.event}.')
      error = self._check_sampling(event)
      if error is not None:
        return error
      q = event.sampling_probability
      if do_compose and q > 0.0:  # q = 0 releases nothing of the target.
        self._compose_release(q, event.event, count)
      return None
    return self.CompositionErrorDetails(
        invalid_event=event, error_message='Unsupported event.')
