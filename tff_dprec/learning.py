"""DP-REC for `tff.learning`: the mean aggregator, its privacy, history setup.

* `build_dp_rec_fed_avg(model_fn, client_optimizer_fn, ...,
  aggregator=...)`: unweighted FedAvg whose clients send DP-REC messages and
  nothing else (`build_unweighted_fed_avg` with the DP-REC mean and
  `metrics_aggregator=no_client_metrics`, checked with `check_process`).
* `dp_rec_aggregator(noise_stddev, l2_clip, ...)` returns a
  `DpRecMeanFactory` (`tff_dprec.aggregators`): pass it as `aggregator` to
  `build_dp_rec_fed_avg`, or as `model_aggregator` to
  `tff.learning.algorithms.build_unweighted_fed_avg`, and ask it for the
  message layout, the `DpRecEvent` and epsilon of your own model
  (`layout(model)`, `dp_event(model)`, `epsilon(model, ...)`).
* `dp_rec_aggregator_for_epsilon(target_epsilon, model=..., ...)`: the
  same, with the clip calibrated so that epsilon meets the target (and the
  bits chosen from it, as the planner does).
* `rec_compression_aggregator(noise_stddev, ...)`: NOT PRIVATE, the mean of
  compression-only REC (the same messages from unclipped updates; a plain
  `tff.aggregators.UnweightedMeanFactory`).
* `check_process(process, strict=...)`: every value a built process moves
  from the clients to the server, with its TFF type, and whether it is a
  DP-REC message (`tff_dprec.process_check`).
* `message_layout(model, bits=..., grouping=...)`: the group count before the
  clip is known (to calibrate it).
* `no_client_metrics`: a metrics aggregator that releases no client metrics.
* `start_history(...)` and `round_messages(...)`: server-to-client history
  compression (`tff_dprec.history`) for a learning process.

The simulation in law, whose clients send floats, is not here:
`tff_dprec.simulation.dp_rec_in_law_aggregator`.

`model` is a `tff.learning` model function (or model), or the TFF type of the
aggregated update (the trainable weights).

DP-REC averages without client weights: a client's message depends on its
update only. What is checked where:

* `DpRecSumFactory.create` and `DpRecMeanFactory.create` refuse a weight
  type (`tff.learning.algorithms.build_fed_sgd` passes one), and
  `build_weighted_fed_avg` refuses the unweighted DP-REC mean itself.
* `build_dp_rec_fed_avg` refuses any aggregator but a DP-REC mean (or the
  simulation's), and builds without client metrics.
* `check_process` reads a built process and reports what else reaches the
  server: the client metrics a builder sums without
  `metrics_aggregator=no_client_metrics`, the weights of a
  `tff.aggregators.MeanFactory` around DP-REC, the counts of
  `clipping_factory` or `zeroing_factory` around it. `create` sees none of
  these (it is told the value type only), so nothing refuses them at
  creation: run `check_process(process, strict=True)` on a process you build
  yourself. Nor does anything refuse `DpRecSumFactory` given to
  `build_unweighted_fed_avg` as the model aggregator (the server would apply
  the sum of the updates, not their mean); `build_dp_rec_fed_avg` does.
"""

import collections
import math
from typing import Any, Callable, Optional

import numpy as np
import tensorflow_federated as tff

from tff_dprec import accounting as accounting_lib
from tff_dprec import history
from tff_dprec import message
from tff_dprec import process_check
from tff_dprec import rec
from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import calibration
from tff_dprec.accounting import events
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import dp_rec_in_law
from tff_dprec.aggregators import dp_rec_mean
from tff_dprec.aggregators import rec_compression
from tff_dprec.plan import search as plan_search

# Index bits per group where the caller gives none (the paper's setting).
_DEFAULT_BITS = 7

__all__ = [
    'build_dp_rec_fed_avg',
    'check_process',
    'ClientDataOutsideDpRecError',
    'ClientUpload',
    'dp_rec_aggregator',
    'dp_rec_aggregator_for_epsilon',
    'message_layout',
    'no_client_metrics',
    'rec_compression_aggregator',
    'round_messages',
    'start_history',
    'UploadReport',
]

ClientUpload = process_check.ClientUpload
UploadReport = process_check.UploadReport
ClientDataOutsideDpRecError = process_check.ClientDataOutsideDpRecError
check_process = process_check.check_process


def dp_rec_aggregator(
    noise_stddev: float,
    l2_clip: float,
    bits: int = 7,
    grouping: rec.Grouping = rec.GROUPING_TENSOR,
    chunk_elements: int = rec.DEFAULT_CHUNK_ELEMENTS,
    record_messages: bool = False,
    insecure_test_seed: Optional[int] = None,
) -> dp_rec_mean.DpRecMeanFactory:
  """Returns the DP-REC mean, ready for `tff.learning` algorithm builders.

  Pass it as `aggregator` to `build_dp_rec_fed_avg`, or as
  `model_aggregator` to `tff.learning.algorithms.build_unweighted_fed_avg`
  (with `metrics_aggregator=no_client_metrics` for private training; check
  the process with `check_process`). Arguments as in `DpRecSumFactory`:
  `l2_clip` is required (for compression only, without privacy, use
  `rec_compression_aggregator`); `dp_rec_aggregator_for_epsilon`
  calibrates it to a target epsilon. Measurements are nested under
  `mean_value`.

  Raises:
    TypeError, ValueError: For invalid arguments.
  """
  return dp_rec_mean.DpRecMeanFactory(dp_rec.DpRecSumFactory(
      noise_stddev=noise_stddev, l2_clip=l2_clip, bits=bits,
      grouping=grouping, chunk_elements=chunk_elements,
      record_messages=record_messages,
      insecure_test_seed=insecure_test_seed))


def dp_rec_aggregator_for_epsilon(
    target_epsilon: float,
    *,
    model,
    population: int,
    clients_per_round: int,
    rounds: int,
    noise_stddev: float,
    delta: Optional[float] = None,
    bits: Optional[int] = None,
    grouping: rec.Grouping = rec.GROUPING_TENSOR,
    accounting: str = accountings.DEFAULT_ACCOUNTING,
    chunk_elements: int = rec.DEFAULT_CHUNK_ELEMENTS,
    record_messages: bool = False,
    insecure_test_seed: Optional[int] = None,
) -> dp_rec_mean.DpRecMeanFactory:
  """The DP-REC mean calibrated to `target_epsilon` for `model`, in one call.

  Calibrates the clip ratio c = l2_clip / noise_stddev: the largest c
  (`tff_dprec.accounting.calibrate_clip_ratio`, rounded down to 6
  significant digits, as the planner does) whose epsilon after `rounds`
  rounds of B = `clients_per_round` draws with replacement from N =
  `population` clients, at `delta`, for the bits and groups of `model`'s
  messages, is at most `target_epsilon`; then returns
  `dp_rec_aggregator(noise_stddev, c * noise_stddev, bits, ...)`. Its
  `epsilon(model, population=..., clients_per_round=..., rounds=...,
  delta=..., accounting=...)` with these arguments is at most
  `target_epsilon`; its `sum_factory` holds the `clip_ratio`, `l2_clip` and
  `bits` chosen.

  With `bits=None` (the default) the bits are chosen from c as
  `python -m tff_dprec.plan` chooses them (`_calibrate`).

  Args:
    target_epsilon: The epsilon to meet after `rounds` rounds. Positive.
    model: A `tff.learning` model function or model, or the TFF type of the
      update: its groups are counted.
    population: N, the clients sampled from (at least 2).
    clients_per_round: B, the draws per round (at most N).
    rounds: T, the rounds of training. Positive.
    noise_stddev: The prior standard deviation s (the units of the update;
      the clip is c * s). Positive.
    delta: The delta of the guarantee; `None` (default) is
      `tff_dprec.accounting.default_delta(population)`, N^-1.1.
    bits: Index bits per group, in [1, 24], or `None` to choose them from c.
    grouping: As in `dp_rec_aggregator` (default `'tensor'`).
    accounting: `'min_pld_rdp'` (default), `'rdp'` or `'paper'`, as in
      `tff_dprec.accounting.dp_rec_epsilon`; pass the same to `epsilon`.
    chunk_elements: As in `dp_rec_aggregator`.
    record_messages: As in `dp_rec_aggregator`.
    insecure_test_seed: TESTS ONLY, NOT PRIVATE, as in `dp_rec_aggregator`.

  Returns:
    The calibrated `DpRecMeanFactory`.

  Raises:
    TypeError, ValueError: For invalid arguments (checked before any
      calibration).
    tff_dprec.accounting.TargetUnreachableError: If no clip ratio in the
      search range meets the target (at any bits tried).
    tff_dprec.accounting.OverheadExceedsDeltaError: Paper accounting, if the
      bits cannot reach `delta`.
  """
  validation.check_positive_number(target_epsilon, 'target_epsilon')
  validation.check_positive_int(rounds, 'rounds')
  events.draw_rate(population, clients_per_round)  # 2 <= N, 1 <= B <= N.
  if delta is None:
    delta = accounting_lib.default_delta(population)
  validation.check_probability(delta, 'delta')
  accounting = accountings.resolve(accounting)
  num_groups = _checked_num_groups(
      model, noise_stddev, bits=bits, grouping=grouping,
      chunk_elements=chunk_elements, record_messages=record_messages,
      insecure_test_seed=insecure_test_seed)

  bits, clip_ratio = _calibrate(
      bits, target_epsilon=target_epsilon, population=population,
      clients_per_round=clients_per_round, rounds=rounds, delta=delta,
      num_groups=num_groups, accounting=accounting)
  return dp_rec_aggregator(
      noise_stddev, _clip_at_most(clip_ratio, noise_stddev), bits=bits,
      grouping=grouping, chunk_elements=chunk_elements,
      record_messages=record_messages,
      insecure_test_seed=insecure_test_seed)


def _calibrate(bits, **federation):
  """(bits, c): c calibrated at `bits`, or both chosen when bits is None.

  c is `tff_dprec.accounting.calibrate_clip_ratio`'s, rounded down to 6
  significant digits. With `bits=None` the bits are
  `tff_dprec.plan.search.auto_bits`': the fewest, at most `MAX_AUTO_BITS` =
  8, whose 2**bits candidates meet the coding margin bits ln 2 >= c^2 / 2 +
  2 nats, c calibrated at each width (c falls as the bits grow); when none
  meets it, the largest width that calibrates.
  """

  def clip_ratio_at(b):
    return calibration.round_down(
        accounting_lib.calibrate_clip_ratio(bits=b, **federation))

  if bits is None:
    bits, clip_ratio, _ = plan_search.auto_bits(clip_ratio_at)
    return bits, clip_ratio
  return bits, clip_ratio_at(bits)


def _checked_num_groups(model, noise_stddev, *, bits, **settings) -> int:
  """The groups of `model`'s messages; checks the coding settings.

  The groups do not depend on the bits (checked here when given).
  """
  factory = rec_compression.RecCompressionSumFactory(
      noise_stddev, bits=_DEFAULT_BITS if bits is None else bits, **settings)
  return factory.num_groups(dp_rec_mean.update_type(model))


def rec_compression_aggregator(
    noise_stddev: float,
    bits: int = 7,
    grouping: rec.Grouping = rec.GROUPING_TENSOR,
    chunk_elements: int = rec.DEFAULT_CHUNK_ELEMENTS,
    record_messages: bool = False,
    insecure_test_seed: Optional[int] = None,
) -> tff.aggregators.UnweightedMeanFactory:
  """NOT PRIVATE: the mean of compression-only REC, for `tff.learning`.

  A `tff.aggregators.UnweightedMeanFactory` over
  `tff_dprec.aggregators.RecCompressionSumFactory`: clients send DP-REC's
  messages (a seed and one index per group) of their unclipped updates, the
  paper's Appendix D.3 ablation. It has no privacy guarantee, no
  `dp_event` and no `epsilon`; `build_dp_rec_fed_avg` refuses it (pass it
  as `model_aggregator` to `build_unweighted_fed_avg`). Arguments as in
  `RecCompressionSumFactory`; `message_layout` gives its layout.

  Raises:
    TypeError, ValueError: For invalid arguments.
  """
  return tff.aggregators.UnweightedMeanFactory(
      value_sum_factory=rec_compression.RecCompressionSumFactory(
          noise_stddev, bits=bits, grouping=grouping,
          chunk_elements=chunk_elements, record_messages=record_messages,
          insecure_test_seed=insecure_test_seed))


def message_layout(model, *, bits: int = 7,
                   grouping: rec.Grouping = rec.GROUPING_TENSOR
                   ) -> message.MessageLayout:
  """The message layout of `model`'s updates, e.g. to calibrate the clip.

  Raises:
    TypeError, ValueError: For an invalid model type, `bits` or `grouping`.
  """
  # The layout does not depend on the noise or the clip.
  sum_factory = rec_compression.RecCompressionSumFactory(
      noise_stddev=1.0, bits=bits, grouping=grouping)
  return sum_factory.layout(dp_rec_mean.update_type(model))


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


def build_dp_rec_fed_avg(
    model_fn,
    client_optimizer_fn: tff.learning.optimizers.Optimizer,
    server_optimizer_fn: Optional[tff.learning.optimizers.Optimizer] = None,
    *,
    aggregator: dp_rec_mean.DpRecMeanBase,
    model_distributor: Optional[
        tff.learning.templates.DistributionProcess] = None,
    loop_implementation: tff.learning.LoopImplementation = (
        tff.learning.LoopImplementation.DATASET_REDUCE),
) -> tff.learning.templates.LearningProcess:
  """Unweighted FedAvg whose clients send DP-REC messages and nothing else.

  `tff.learning.algorithms.build_unweighted_fed_avg` with
  `model_aggregator=aggregator`, unwrapped, and
  `metrics_aggregator=no_client_metrics` (the round's
  `metrics['client_work']['train']` is empty). The built process is then
  checked with `check_process(process, strict=True)`: only the DP-REC
  messages, and the count of messages (a 1 from each client), leave the
  clients. A `DpRecInLawMeanFactory` from
  `tff_dprec.simulation.dp_rec_in_law_aggregator` (SIMULATION ONLY, its
  clients send floats) is built the same way, and not checked.

  Args:
    model_fn: The `tff.learning` model function (or functional model), as
      for `build_unweighted_fed_avg`.
    client_optimizer_fn: The clients' `tff.learning.optimizers.Optimizer`.
    server_optimizer_fn: The server's optimizer; `None` (default) is TFF's
      default, `tff.learning.optimizers.build_sgdm(1.0)`.
    aggregator: The DP-REC mean: a `DpRecMeanFactory` from
      `dp_rec_aggregator(...)` (or, simulating, a `DpRecInLawMeanFactory`
      from `tff_dprec.simulation.dp_rec_in_law_aggregator(...)`).
    model_distributor: An optional `tff.learning.templates.
      DistributionProcess`; `None` (default) broadcasts the model.
    loop_implementation: The clients' training loop, as for
      `build_unweighted_fed_avg` (default `DATASET_REDUCE`).

  Returns:
    The `tff.learning.templates.LearningProcess`.

  Raises:
    TypeError: If `aggregator` is neither (`rec_compression_aggregator`'s
      mean, not private, among them), or for an argument
      `build_unweighted_fed_avg` refuses.
    ClientDataOutsideDpRecError: If the built process sends client data
      outside DP-REC messages (a check of what TFF built: TFF 0.87 sends
      none there).
  """
  simulated = _is_simulation(aggregator)
  process = tff.learning.algorithms.build_unweighted_fed_avg(
      model_fn, client_optimizer_fn=client_optimizer_fn,
      server_optimizer_fn=server_optimizer_fn,
      model_distributor=model_distributor, model_aggregator=aggregator,
      metrics_aggregator=no_client_metrics,
      loop_implementation=loop_implementation)
  if not simulated:
    check_process(process, strict=True)
  return process


def _is_simulation(aggregator) -> bool:
  """Whether `aggregator`, a DP-REC mean, is the simulation in law.

  Raises:
    TypeError: If it is neither DP-REC mean factory.
  """
  if isinstance(aggregator, dp_rec_in_law.DpRecInLawMeanFactory):
    return True
  if isinstance(aggregator, dp_rec_mean.DpRecMeanFactory):
    return False
  raise TypeError(
      'aggregator must be a DP-REC mean factory (a DpRecMeanFactory from '
      'tff_dprec.learning.dp_rec_aggregator(...), or a '
      'DpRecInLawMeanFactory from '
      'tff_dprec.simulation.dp_rec_in_law_aggregator(...)), unwrapped, '
      f'found {aggregator!r}.')


def start_history(process: tff.learning.templates.LearningProcess, *,
                  aggregator: dp_rec_mean.DpRecMeanFactory,
                  model_fn: Callable[[], Any],
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
    process: A process from `build_dp_rec_fed_avg(model_fn, ...,
      aggregator=aggregator)` (or `tff.learning.algorithms.
      build_unweighted_fed_avg(model_fn, ..., model_aggregator=aggregator)`).
    aggregator: Its `DpRecMeanFactory`, with `record_messages=True`.
    model_fn: The process's model function.
    initial_seed: The seed R' of the initial model (an int).

  Returns:
    `(state, server)`: the process's initial state with the model from R',
    and the `history.HistoryServer`.

  Raises:
    TypeError: If `aggregator` is not a `DpRecMeanFactory`.
    ValueError: If `aggregator` does not record its messages, or is the
      simulation's `DpRecInLawMeanFactory` (which sends none).
  """
  if isinstance(aggregator, dp_rec_in_law.DpRecInLawMeanFactory):
    raise ValueError(
        'History compression replays the real messages; a '
        'DpRecInLawMeanFactory (tff_dprec.simulation, a simulation in law) '
        'sends none. Use dp_rec_aggregator(..., record_messages=True).')
  if not isinstance(aggregator, dp_rec_mean.DpRecMeanFactory):
    raise TypeError('aggregator must be a DpRecMeanFactory '
                    f'(tff_dprec.learning.dp_rec_aggregator), found '
                    f'{aggregator!r}.')
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


def _clip_at_most(clip_ratio: float, noise_stddev: float) -> float:
  """The largest l2_clip near c * s whose l2_clip / s is at most c.

  c * s / s can exceed c by a rounding; the calibrated c is the bound.
  """
  l2_clip = clip_ratio * noise_stddev
  while l2_clip / noise_stddev > clip_ratio:
    l2_clip = math.nextafter(l2_clip, 0.0)
  return l2_clip
