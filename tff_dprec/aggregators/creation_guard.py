"""Refuses a weighted call of DP-REC's `create`: what TFF hands it, checked.

DP-REC averages without client weights: a client's message depends on its
update only. `tff.learning.algorithms.build_fed_sgd` calls its model
aggregator's `create(value_type, weight_type)` without checking that the
factory is a weighted one, so the DP-REC factories (`DpRecSumFactory`,
`DpRecMeanFactory`, `RecCompressionSumFactory` and the simulation's
`DpRecInLawSumFactory` and `DpRecInLawMeanFactory`) take an optional
`weight_type` and refuse it here, with a `TypeError` that says what to use.
(`build_weighted_fed_avg` refuses the unweighted `DpRecMeanFactory` in its
own type check, before any DP-REC code runs.)

What `create` cannot see is not checked here: `create` is told the value
type only, not which factory or builder called it. So

* a factory wrapped around DP-REC, such as a weighted
  `tff.aggregators.MeanFactory` (which sends the weights to the server in the
  clear) or `tff.aggregators.clipping_factory` and `zeroing_factory` (which
  sum a clipped or zeroed count from every client), creates DP-REC as any
  caller would;
* the client metrics that a `tff.learning` builder sums beside its model
  aggregator (unless given `metrics_aggregator=no_client_metrics`) never
  reach DP-REC;
* `DpRecSumFactory` passed as a model aggregator, whose sum the server would
  apply instead of a mean, is created as a sum is anywhere else.

These are caught where they can be seen: `tff_dprec.learning.
build_dp_rec_fed_avg` builds the safe configuration and refuses any other
aggregator than a DP-REC mean, and `tff_dprec.learning.check_process` (the
`tff_dprec.process_check` module) reads every value a built process moves
from the clients to the server and reports, or in strict mode refuses, all
but the DP-REC messages.
"""

from typing import Optional

import tensorflow_federated as tff


def check_unweighted_call(factory, weight_type: Optional[tff.Type]) -> None:
  """Raises TypeError if `create` was called with a weight type.

  Args:
    factory: The DP-REC factory whose `create` is running (for the message).
    weight_type: The weight type `create` was given, or `None`.

  Raises:
    TypeError: If `weight_type` is not `None`.
  """
  if weight_type is not None:
    raise TypeError(
        f'{type(factory).__name__}.create takes the value type only; it was '
        f'called with a weight type too ({weight_type!r}), as a weighted '
        'aggregator is (tff.learning.algorithms.build_fed_sgd does so). '
        'DP-REC averages without weights: use '
        'tff_dprec.learning.build_dp_rec_fed_avg(..., '
        'aggregator=tff_dprec.learning.dp_rec_aggregator(...)), or '
        'tff.learning.algorithms.build_unweighted_fed_avg with '
        'model_aggregator=tff_dprec.learning.dp_rec_aggregator(...).')
