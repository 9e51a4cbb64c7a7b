"""DP-REC's sum drawn in law: a simulation aggregator, not a protocol.

`DpRecInLawSumFactory` trains exactly as `DpRecSumFactory` does in law, at
K + d normals per group and client instead of K * d (`tff_dprec.in_law`),
so that studies can afford DP-REC at thousands of clients per round. Its
clients send their decoded updates as floats: it is not deployable.
`DpRecInLawMeanFactory` is its mean, a type of its own (not a
`DpRecMeanFactory`), so that `isinstance` tells a simulation from the
protocol. Users reach both through `tff_dprec.simulation`.
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import accounting
from tff_dprec import in_law
from tff_dprec import message
from tff_dprec import rec
from tff_dprec.aggregators import creation_guard
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import dp_rec_mean


class DpRecInLawSumFactory(tff.aggregators.UnweightedAggregationFactory):
  """SIMULATION ONLY: DP-REC's decoded sum, drawn in law; clients send floats.

  Each client prepares its update as DP-REC's client does (a non-finite
  update becomes zero; the whole update is clipped to `l2_clip`) and, with
  fresh randomness of its own, draws for each group what the DP-REC server
  would decode from its message: s (xi_{k*} u + g - <g, u> u), with
  xi_1..xi_K ~ N(0, 1), k* drawn by float64 Gumbel-max on
  (|v_g| / s) xi_k, g ~ N(0, I) and u = v_g / |v_g| (`tff_dprec.in_law`,
  docs/PRIVACY.md section 10). The server sums the draws.

  The sum has exactly the law of `DpRecSumFactory`'s with the same
  settings (the idealised codec, whose candidates are i.i.d. normals), so a
  training run has DP-REC's law, and DP-REC's accounting (`dp_event`) is
  that of the decoded updates: the simulation releases what the real server
  decodes, a post-processing of the messages.

  What it does not simulate is the wire. Its clients send float32 updates,
  not messages: it is not a protocol to deploy, and it records no messages
  (no history compression). The `upload_bits` measurement is the analytic
  size of the messages the real protocol would send (`num_messages` x
  `message_bits`), not what crossed this simulation's wire.

  The process has no state. Measurements, as `DpRecSumFactory`'s:
  `upload_bits` (analytic, int64), `num_messages` (int32) and
  `rejected_messages` (int32, always 0: there are no messages to reject).
  """

  def __init__(self,
               noise_stddev: float,
               l2_clip: float,
               bits: int = 7,
               grouping: rec.Grouping = rec.GROUPING_TENSOR,
               insecure_test_seed: Optional[int] = None):
    """Initializes the factory.

    Args:
      noise_stddev: The prior standard deviation s of the simulated DP-REC.
        Positive.
      l2_clip: The L2 norm to clip each client's whole update to. Positive
        and required, as in `DpRecSumFactory`.
      bits: Index bits per group of the simulated DP-REC, in [1, 24].
      grouping: `'tensor'`, `'network'` or a positive int G, as in
        `DpRecSumFactory`.
      insecure_test_seed: TESTS ONLY, NOT PRIVATE: an int makes every draw a
        function of this value and the client's clipped update.

    Raises:
      TypeError: If an argument has the wrong type (`l2_clip=None` among
        them).
      ValueError: If an argument has an invalid value.
    """
    dp_rec.check_l2_clip(l2_clip, type(self).__name__)
    self._protocol = dp_rec.DpRecSumFactory(
        noise_stddev=noise_stddev, l2_clip=l2_clip, bits=bits,
        grouping=grouping, insecure_test_seed=insecure_test_seed)

  def __repr__(self) -> str:
    protocol = repr(self._protocol)
    return type(self).__name__ + protocol[protocol.index('('):]

  @property
  def protocol(self) -> dp_rec.DpRecSumFactory:
    """The `DpRecSumFactory` whose decoded sum this factory simulates."""
    return self._protocol

  @property
  def noise_stddev(self) -> float:
    return self._protocol.noise_stddev

  @property
  def l2_clip(self) -> float:
    return self._protocol.l2_clip

  @property
  def bits(self) -> int:
    return self._protocol.bits

  @property
  def grouping(self) -> rec.Grouping:
    return self._protocol.grouping

  @property
  def clip_ratio(self) -> float:
    return self._protocol.clip_ratio

  @property
  def insecure_test_seed(self) -> Optional[int]:
    return self._protocol.insecure_test_seed

  @property
  def record_messages(self) -> bool:
    """Always False: a simulation in law has no messages to record."""
    return False

  def layout(self, value_type) -> message.MessageLayout:
    """The layout of the simulated messages (see `DpRecSumFactory`)."""
    return self._protocol.layout(value_type)

  def dp_event(self, value_type) -> accounting.DpRecEvent:
    """The `DpRecEvent` of the simulated DP-REC (see `DpRecSumFactory`)."""
    return self._protocol.dp_event(value_type)

  def create(self, value_type,
             weight_type=None) -> tff.templates.AggregationProcess:
    """Returns the process; refuses a weight type.

    Args:
      value_type: As `DpRecSumFactory.create`.
      weight_type: Must be `None` (as `DpRecSumFactory.create`).

    Raises:
      TypeError: As `DpRecSumFactory.create`.
    """
    creation_guard.check_unweighted_call(self, weight_type)
    layout = self.layout(value_type)
    client_sample = self._client_sampler(value_type)
    count_type = tff.TensorType(np.int32)

    @tff.tensorflow.computation(count_type)
    def measurements_of(count):
      return collections.OrderedDict(
          upload_bits=tf.cast(count, tf.int64) * layout.message_bits,
          num_messages=count,
          rejected_messages=tf.constant(0, tf.int32))

    @tff.federated_computation()
    def init_fn():
      return tff.federated_value((), tff.SERVER)

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS))
    def next_fn(state, value):
      # Client computation: prepare, then draw the decoded update in law.
      drawn = tff.federated_map(client_sample, value)
      # Inner aggregation: the draws (floats, not messages) are summed.
      total = tff.federated_sum(drawn.update)
      count = tff.federated_sum(drawn.count)
      return tff.templates.MeasuredProcessOutput(
          state=state, result=total,
          measurements=tff.federated_map(measurements_of, count))

    return tff.templates.AggregationProcess(init_fn, next_fn)

  def _client_sampler(self, value_type) -> tff.Computation:
    """The client's TF computation: update -> its decoded update, in law."""
    layout = self.layout(value_type)
    settings = dict(noise_stddev=self.noise_stddev, l2_clip=self.l2_clip,
                    insecure_test_seed=self.insecure_test_seed)

    @tff.tensorflow.computation(value_type)
    def client_sample(value):
      return collections.OrderedDict(
          update=in_law.sample_update(value, layout, **settings),
          count=tf.constant(1, tf.int32))

    return client_sample


class DpRecInLawMeanFactory(dp_rec_mean.DpRecMeanBase):
  """SIMULATION ONLY: the DP-REC mean over `DpRecInLawSumFactory`.

  `DpRecInLawMeanFactory(sum_factory)` takes a `DpRecInLawSumFactory` and
  refuses any other sum with a `TypeError`. It trains as
  `DpRecMeanFactory` does in law and answers the same questions (`layout`,
  `dp_event`, `epsilon`: those of the protocol it simulates), but its
  clients send floats: it is not a `DpRecMeanFactory`, and
  `tff_dprec.learning.check_process` reports its floats as client data
  outside DP-REC. Measurements as `DpRecMeanBase`'s (`upload_bits`
  analytic, no `messages`).
  """

  SUM_FACTORY = DpRecInLawSumFactory
