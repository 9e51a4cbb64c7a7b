"""The DP-REC mean: the unweighted mean of client updates summed with DP-REC.

`DpRecMeanFactory` is what `tff.learning` takes as a model aggregator (see
`tff_dprec.learning.dp_rec_aggregator`). It also answers the accounting
questions about a model: its message layout, the `DpRecEvent` of one message
and epsilon after a run. `DpRecMeanBase` holds what it shares with the
simulation's mean (`dp_rec_in_law.DpRecInLawMeanFactory`, not a
`DpRecMeanFactory`).
"""

import tensorflow_federated as tff

from tff_dprec import accounting as accounting_lib
from tff_dprec.accounting import accountings
from tff_dprec import message
from tff_dprec.aggregators import creation_guard
from tff_dprec.aggregators import dp_rec


class DpRecMeanBase(tff.aggregators.UnweightedMeanFactory):
  """The unweighted mean of a DP-REC sum, with its layout and accounting.

  Not used directly: `DpRecMeanFactory` (the protocol) and
  `dp_rec_in_law.DpRecInLawMeanFactory` (SIMULATION ONLY) are the means.
  A `tff.aggregators.UnweightedMeanFactory` whose value sum is the DP-REC
  sum the subclass names in `SUM_FACTORY` (the client count goes through
  TFF's `SumFactory`: it is public, the number of messages). Measurements:
  `mean_value` (the sum's measurements: `upload_bits`, `num_messages`,
  `rejected_messages`, and `messages` with `record_messages=True`) and
  `mean_count`.

  For accounting, `layout`, `dp_event` and `epsilon` take the model (or the
  update type) and count its groups.

  A weighted call of `create` (`tff.learning.algorithms.build_fed_sgd`'s)
  is refused with a `TypeError` naming what to use instead;
  `build_weighted_fed_avg` refuses this unweighted factory in its own type
  check, before any of this code runs. A factory around it (a weighted
  `tff.aggregators.MeanFactory` would send the weights as float32 in the
  clear) is not visible to `create`: `tff_dprec.learning.check_process`
  reports what a built process sends, and
  `tff_dprec.learning.build_dp_rec_fed_avg` builds it unwrapped.
  """

  # The sum factory class the mean takes; set by each subclass.
  SUM_FACTORY = None

  def __init__(self, sum_factory):
    """Initializes the mean.

    Args:
      sum_factory: The sum of the updates, a `SUM_FACTORY`.

    Raises:
      TypeError: If `sum_factory` is not a `SUM_FACTORY` (or the mean is
        this base class, which has none).
    """
    if self.SUM_FACTORY is None:
      raise TypeError('DpRecMeanBase is not used directly: use '
                      'DpRecMeanFactory or DpRecInLawMeanFactory.')
    if not isinstance(sum_factory, self.SUM_FACTORY):
      raise TypeError(f'sum_factory must be a {self.SUM_FACTORY.__name__}, '
                      f'found {sum_factory!r}.')
    super().__init__(value_sum_factory=sum_factory)
    self._sum_factory = sum_factory

  def __repr__(self) -> str:
    return f'{type(self).__name__}({self._sum_factory!r})'

  @property
  def sum_factory(self):
    """The DP-REC sum (for `history.ClientReplay` and its settings)."""
    return self._sum_factory

  def layout(self, model) -> message.MessageLayout:
    """The message layout (groups, `num_groups`, `message_bits`) for `model`.

    Args:
      model: A `tff.learning` model function or model, or the TFF type of
        the update.
    """
    return self._sum_factory.layout(update_type(model))

  def dp_event(self, model) -> accounting_lib.DpRecEvent:
    """The `DpRecEvent` of one client's message for `model`."""
    return self._sum_factory.dp_event(update_type(model))

  def epsilon(self, model, *, population: int, clients_per_round: int,
              rounds: int, delta: float,
              accounting: str = accountings.MIN_PLD_RDP) -> float:
    """Epsilon after `rounds` rounds of training `model`.

    `tff_dprec.accounting.dp_rec_epsilon` with this aggregator's clip ratio
    and the bits and group count of `model`'s messages (`accounting` as
    there: 'min_pld_rdp', the default, is the smaller of the certified PLD
    and RDP epsilons): B = `clients_per_round` clients drawn with
    replacement from N = `population` per round.

    Raises:
      ValueError: For invalid arguments.
      tff_dprec.accounting.OverheadExceedsDeltaError: Paper accounting only.
    """
    event = self.dp_event(model)
    return accounting_lib.dp_rec_epsilon(
        clip_ratio=event.clip_ratio, population=population,
        clients_per_round=clients_per_round, rounds=rounds, delta=delta,
        bits=event.bits, num_groups=event.num_groups, accounting=accounting)

  def create(self, value_type,
             weight_type=None) -> tff.templates.AggregationProcess:
    """Returns the process of the mean; refuses a weight type.

    Args:
      value_type: As `DpRecSumFactory.create`.
      weight_type: Must be `None` (as `DpRecSumFactory.create`).

    Raises:
      TypeError: As `DpRecSumFactory.create`.
    """
    creation_guard.check_unweighted_call(self, weight_type)
    return super().create(value_type)


class DpRecMeanFactory(DpRecMeanBase):
  """The unweighted mean of client updates, summed with DP-REC.

  The DP-REC protocol's mean: `DpRecMeanFactory(sum_factory)` takes a
  `DpRecSumFactory`, whose clients send only messages, and refuses any other
  sum with a `TypeError` (the simulation in law has its own mean,
  `tff_dprec.simulation.DpRecInLawMeanFactory`). Measurements and
  accounting as `DpRecMeanBase`'s.
  """

  SUM_FACTORY = dp_rec.DpRecSumFactory


def update_type(model) -> tff.Type:
  """The TFF type of `model`'s update: its trainable weights' type.

  Args:
    model: A TFF type (returned as is), or a `tff.learning` model function
      or model (`tff.learning.models.weights_type_from_model`).
  """
  if isinstance(model, tff.Type):
    return model
  return tff.learning.models.weights_type_from_model(model).trainable
