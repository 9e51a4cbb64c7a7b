"""DP-REC for `tff.learning`: the mean aggregator, its privacy, history setup.

* `dp_rec_aggregator(...)` returns a `DPRecMeanFactory`: pass it as
  `model_aggregator` to `tff.learning.algorithms.build_unweighted_fed_avg`,
  and ask it for the message layout, the `DpRecEvent` and epsilon of your own
  model (`layout(model)`, `dp_event(model)`, `epsilon(model, ...)`).
* `dp_rec_in_law_aggregator(...)`: SIMULATION ONLY, the same mean with the
  decoded updates drawn exactly in law at a fraction of the cost (floats
  are sent: a tool for studies, not a protocol).
* `message_layout(model, bits=..., grouping=...)`: the group count before the
  clip is known (to calibrate it).
* `no_client_metrics`: a metrics aggregator that releases no client metrics.
* `start_history(...)` and `round_messages(...)`: server-to-client history
  compression (`tff_dprec.history`) for a learning process.

`model` is a `tff.learning` model function (or model), or the TFF type of the
aggregated update (the trainable weights).

DP-REC averages without client weights: a client's message depends on its
update only. `tff.learning.algorithms.build_weighted_fed_avg` and
`tff.aggregators.MeanFactory` are refused, and so is any other TFF factory
wrapped around DP-REC (see `tff_dprec.aggregators.creation_guard`). A
builder given a private DP-REC aggregator without
`metrics_aggregator=no_client_metrics` warns (`ClientMetricsWarning`): TFF
would sum the clients' training metrics in the clear. Where TFF's internals
differ from those the guard relies on, it raises `TffInternalsError` rather
than let the creation pass unchecked.
"""

import collections
import sys
from typing import Any, Callable, Optional

import numpy as np
import tensorflow_federated as tff

from tff_dprec import accounting as accounting_lib
from tff_dprec import history
from tff_dprec import message
from tff_dprec import rec
from tff_dprec.accounting import accountings
from tff_dprec.aggregators import creation_guard
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import dp_rec_in_law

ClientMetricsWarning = creation_guard.ClientMetricsWarning
TffInternalsError = creation_guard.TffInternalsError


class DPRecMeanFactory(tff.aggregators.UnweightedMeanFactory):
  """The unweighted mean of client updates, summed with DP-REC.

  A `tff.aggregators.UnweightedMeanFactory` whose value sum is a
  `DPRecSumFactory` (the client count goes through TFF's `SumFactory`: it
  is public, the number of messages). Measurements: `mean_value` (the
  `DPRecSumFactory` measurements: `upload_bits`, `num_messages`,
  `rejected_messages`, and `messages` with `record_messages=True`) and
  `mean_count`.

  For accounting, `layout`, `dp_event` and `epsilon` take the model (or the
  update type) and count its groups.

  Weighted use is refused with a `TypeError` naming what to use instead:
  inside `tff.aggregators.MeanFactory` the weights would reach the server as
  float32 in the clear. `build_weighted_fed_avg` itself refuses this
  unweighted factory in its own type check, before any of this code runs.
  """

  def __init__(self, sum_factory):
    """Initializes the mean.

    Args:
      sum_factory: The `DPRecSumFactory` that sums the updates, or, for
        simulations only, a `DPRecInLawSumFactory`.

    Raises:
      TypeError: If `sum_factory` is neither.
    """
    if not isinstance(sum_factory, _SUM_FACTORIES):
      raise TypeError(
          'sum_factory must be a DPRecSumFactory or a DPRecInLawSumFactory, '
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
    """The `DpRecEvent` of one client's message for `model`.

    Raises:
      ValueError: In compression-only mode (`l2_clip=None`).
    """
    return self._sum_factory.dp_event(update_type(model))

  def epsilon(self, model, *, population: int, clients_per_round: int,
              rounds: int, delta: float,
              accounting: str = accountings.PLD) -> float:
    """Epsilon after `rounds` rounds of training `model`.

    `tff_dprec.accounting.dp_rec_epsilon` with this aggregator's clip ratio
    and the bits and group count of `model`'s messages (`accounting` as
    there: 'pld', the default, is the smaller of the certified PLD and RDP
    epsilons): B =
    `clients_per_round` clients drawn with replacement from N = `population`
    per round.

    Raises:
      ValueError: In compression-only mode, or for invalid arguments.
      tff_dprec.accounting.OverheadExceedsDeltaError: Paper accounting only.
    """
    event = self.dp_event(model)
    return accounting_lib.dp_rec_epsilon(
        clip_ratio=event.clip_ratio, population=population,
        clients_per_round=clients_per_round, rounds=rounds, delta=delta,
        bits=event.bits, num_groups=event.num_groups, accounting=accounting)

  def create(self, value_type, *weight_type) -> tff.templates.AggregationProcess:
    creation_guard.check_unweighted_call(self, weight_type)
    creation_guard.check_unweighted_creator(
        self, sys._getframe(1), is_mean=True)  # pylint: disable=protected-access
    return super().create(value_type)


def dp_rec_aggregator(
    noise_stddev: float,
    l2_clip: Optional[float],
    bits: int = 7,
    grouping: rec.Grouping = rec.GROUPING_TENSOR,
    chunk_elements: int = rec.DEFAULT_CHUNK_ELEMENTS,
    record_messages: bool = False,
    insecure_test_seed: Optional[int] = None,
) -> DPRecMeanFactory:
  """Returns the DP-REC mean, ready for `tff.learning` algorithm builders.

  Pass it as `model_aggregator` to
  `tff.learning.algorithms.build_unweighted_fed_avg` (with
  `metrics_aggregator=no_client_metrics` for private training). Arguments as
  in `DPRecSumFactory`. Measurements are nested under `mean_value`.

  Raises:
    TypeError, ValueError: For invalid arguments.
  """
  return DPRecMeanFactory(dp_rec.DPRecSumFactory(
      noise_stddev=noise_stddev, l2_clip=l2_clip, bits=bits,
      grouping=grouping, chunk_elements=chunk_elements,
      record_messages=record_messages,
      insecure_test_seed=insecure_test_seed))


def dp_rec_in_law_aggregator(
    noise_stddev: float,
    l2_clip: Optional[float],
    bits: int = 7,
    grouping: rec.Grouping = rec.GROUPING_TENSOR,
    insecure_test_seed: Optional[int] = None,
) -> DPRecMeanFactory:
  """SIMULATION ONLY: the DP-REC mean with its decoded updates drawn in law.

  `dp_rec_aggregator`'s mean, with the sum drawn exactly in law at K + d
  normals per group and client (`DPRecInLawSumFactory`): the same training
  in law, clipping, groups, bits and `epsilon`, at a fraction of the cost.
  Its clients send floats, not messages: use it to study DP-REC, never to
  deploy it. `upload_bits` is the real protocol's, analytic. It records no
  messages, so history compression (`start_history`) refuses it.

  Raises:
    TypeError, ValueError: For invalid arguments.
  """
  return DPRecMeanFactory(dp_rec_in_law.DPRecInLawSumFactory(
      noise_stddev=noise_stddev, l2_clip=l2_clip, bits=bits,
      grouping=grouping, insecure_test_seed=insecure_test_seed))


def message_layout(model, *, bits: int = 7,
                   grouping: rec.Grouping = rec.GROUPING_TENSOR
                   ) -> message.MessageLayout:
  """The message layout of `model`'s updates, e.g. to calibrate the clip.

  Raises:
    TypeError, ValueError: For an invalid model type, `bits` or `grouping`.
  """
  # The layout does not depend on the noise or the clip.
  sum_factory = dp_rec.DPRecSumFactory(noise_stddev=1.0, l2_clip=None,
                                       bits=bits, grouping=grouping)
  return sum_factory.layout(update_type(model))


_SUM_FACTORIES = (dp_rec.DPRecSumFactory,
                  dp_rec_in_law.DPRecInLawSumFactory)


def update_type(model) -> tff.Type:
  """The TFF type of `model`'s update: its trainable weights' type.

  Args:
    model: A TFF type (returned as is), or a `tff.learning` model function
      or model (`tff.learning.models.weights_type_from_model`).
  """
  if isinstance(model, tff.Type):
    return model
  return tff.learning.models.weights_type_from_model(model).trainable


def no_client_metrics(metric_finalizers, local_unfinalized_metrics_type=None):
  """A `tff.learning` metrics aggregator that takes nothing from clients.

  `tff.learning` algorithms by default sum each client's training metrics
  (loss, example counts) in the clear, outside any DP mechanism. With DP-REC
  the client's message should be the only value that leaves it: pass
  `metrics_aggregator=no_client_metrics` to the algorithm builder.

  This removes ALL client training metrics: the round's
  `metrics['client_work']['train']` is empty, and there is no training loss
  to report. Evaluate on held-out data on the server instead.
  """
  del metric_finalizers, local_unfinalized_metrics_type

  @tff.federated_computation
  def aggregate(client_metrics):
    del client_metrics
    return tff.federated_value(collections.OrderedDict(), tff.SERVER)

  return aggregate


def start_history(process: tff.learning.templates.LearningProcess, *,
                  aggregator: DPRecMeanFactory, model_fn: Callable[[], Any],
                  initial_seed: int) -> tuple[Any, history.HistoryServer]:
  """Starts server-to-client history compression for a learning process.

  Sets the initial model to the one the seed R' = `initial_seed` gives
  (`history.seeded_model_weights`, so a first-time client can rebuild it from
  64 bits) and returns the server's `history.HistoryServer`, whose full size
  is that of the model and the server optimizer state.

  Each round t: `server.downlink(client_id, t)` for each distinct client
  (the payload is `server.messages(downlink)` for a history, else the model
  weights and `state.finalizer`), then, after `process.next`,
  `server.record_round(t, round_messages(output))`. Clients replay with
  `history.ClientReplay(model_fn=..., factory=aggregator.sum_factory,
  server_optimizer=...)`.

  Args:
    process: A process from `tff.learning.algorithms.
      build_unweighted_fed_avg(model_fn, ..., model_aggregator=aggregator)`.
    aggregator: Its `DPRecMeanFactory`, with `record_messages=True`.
    model_fn: The process's model function.
    initial_seed: The seed R' of the initial model (an int).

  Returns:
    `(state, server)`: the process's initial state with the model from R',
    and the `history.HistoryServer`.

  Raises:
    TypeError: If `aggregator` is not a `DPRecMeanFactory`.
    ValueError: If `aggregator` does not record its messages.
  """
  if not isinstance(aggregator, DPRecMeanFactory):
    raise TypeError('aggregator must be a DPRecMeanFactory '
                    f'(tff_dprec.learning.dp_rec_aggregator), found '
                    f'{aggregator!r}.')
  if isinstance(aggregator.sum_factory, dp_rec_in_law.DPRecInLawSumFactory):
    raise ValueError(
        'History compression replays the real messages; an aggregator from '
        'dp_rec_in_law_aggregator (a simulation in law) sends none. Use '
        'dp_rec_aggregator(..., record_messages=True).')
  if not aggregator.sum_factory.record_messages:
    raise ValueError('aggregator must record its messages: use '
                     'dp_rec_aggregator(..., record_messages=True).')
  state = process.set_model_weights(
      process.initialize(),
      history.seeded_model_weights(model_fn, initial_seed))
  full_bits = history.structure_bits(
      (process.get_model_weights(state), state.finalizer))
  server = history.HistoryServer(
      message_bits=aggregator.layout(model_fn).message_bits,
      full_bits=full_bits, initial_seed=initial_seed)
  return state, server


def round_messages(output) -> np.ndarray:
  """The round's message matrix from a `process.next` output (or metrics).

  Raises:
    ValueError: If the metrics carry no messages (the aggregator was not a
      `dp_rec_aggregator(..., record_messages=True)`).
  """
  metrics = getattr(output, 'metrics', output)
  try:
    return np.asarray(metrics['aggregator']['mean_value']['messages'])
  except (KeyError, TypeError) as e:
    raise ValueError(
        'The round metrics carry no DP-REC messages; build the process with '
        'model_aggregator=dp_rec_aggregator(..., record_messages=True).'
    ) from e
