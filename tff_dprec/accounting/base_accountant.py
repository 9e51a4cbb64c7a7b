"""`DpRecAccountantBase`: the walk over events that DP-REC's accountants share.

Each accountant (`pld_accountant`, `rdp_accountant`, `paper_accountant`)
says how releases of one message compose and what a non-private event does
to its state; this class walks dp_accounting's composite events down to
DP-REC's (`events`), as dp_accounting's `RdpAccountant._maybe_compose`
does, and hands each release to the accountant with the probability that
it involves the target and a count.
"""

import abc

import dp_accounting
import numpy as np

from tff_dprec import validation
from tff_dprec.accounting import events

_NeighborRel = dp_accounting.NeighboringRelation


class DpRecAccountantBase(dp_accounting.PrivacyAccountant):
  """Base of the DP-REC accountants.

  Supports, for add/remove-one-client neighbours:

  * `DpRecRoundEvent`: a round, B releases per composition, each holding
    the target's message with probability q = 1/N;
  * `DpRecEvent`: a known participant's release, one per composition,
    holding the target's message (q = 1);
  * `NoOpDpEvent`, `NonPrivateDpEvent`, and `ComposedDpEvent`,
    `SelfComposedDpEvent` of supported events.

  Other events, `PoissonSampledDpEvent` of a `DpRecEvent` among them (it
  means independent inclusion, which is not how DP-REC samples), are
  unsupported: `supports` is False and `compose` raises
  `UnsupportedEventError`.

  Attributes:
    accounting: The accounting's name (`accountings`).
    composes_exactly: Whether composing an event in steps leaves the state
      that one composition of the total count leaves, to the last bit (the
      state is a count of each kind of release).
  """

  accounting: str
  composes_exactly = False

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
    """Composes `count` releases of `event`, each with the target's message
    with probability q (1: a known participant), count >= 1."""

  @abc.abstractmethod
  def _compose_non_private(self) -> None:
    """Makes every later epsilon infinite."""

  def compose(self, event: dp_accounting.DpEvent,
              count: int = 1) -> 'DpRecAccountantBase':
    """Composes `event` `count` times (dp_accounting's `compose`).

    Raises:
      TypeError: If event is not a `DpEvent` or count not an int.
      ValueError: If count is not positive, or for a message the accounting
        cannot bound (no state changes).
      UnsupportedEventError: For an event the accountant does not support.
    """
    validation.check_positive_int(count, 'count')
    return super().compose(event, int(count))

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
      if (isinstance(event.count, bool) or
          not isinstance(event.count, (int, np.integer)) or event.count < 1):
        return self.CompositionErrorDetails(
            invalid_event=event,
            error_message='SelfComposedDpEvent count must be a positive int, '
            f'found {event.count!r}.')
      return self._maybe_compose(event.event, event.count * count, do_compose)
    if isinstance(event, dp_accounting.ComposedDpEvent):
      for e in event.events:
        result = self._maybe_compose(e, count, do_compose)
        if result is not None:
          return result
      return None
    if isinstance(event, events.DpRecRoundEvent):
      if do_compose:
        self._compose_release(event.draw_rate, event.message_event,
                              event.clients_per_round * count)
      return None
    if isinstance(event, events.DpRecEvent):
      if do_compose:
        self._compose_release(1.0, event, count)
      return None
    return self.CompositionErrorDetails(
        invalid_event=event, error_message=_unsupported_message(self, event))


def _unsupported_message(accountant, event) -> str:
  """Why `accountant` does not support `event`: what it supports."""
  return (f'{type(accountant).__name__} supports DpRecRoundEvent (a round of '
          'draws with replacement: events.dp_rec_round_event), DpRecEvent, '
          'NoOpDpEvent, NonPrivateDpEvent and their compositions, found '
          f'{type(event).__name__}.')
