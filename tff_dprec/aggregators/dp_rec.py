"""DP-REC: private, few-bit aggregation of client updates for TFF.

The TFF wiring of `tff_dprec.message` (the message layout and the encoding
of whole updates, plain TF): the client's encoder, the server's aggregation
of messages, and the `tff.aggregators` factories around them:
`DpRecSumFactory` (private) on `RecSumFactoryBase` (the wire it shares with
`rec_compression.RecCompressionSumFactory`, not private).
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import accounting
from tff_dprec import message
from tff_dprec import rec
from tff_dprec import validation
from tff_dprec.aggregators import creation_guard


class RecSumFactoryBase(tff.aggregators.UnweightedAggregationFactory):
  """The REC-coded sum that DP-REC and compression-only REC share.

  Not used directly: `DpRecSumFactory` (clipped, private) and
  `tff_dprec.aggregators.RecCompressionSumFactory` (not clipped, not
  private) are the factories. Each client (clips its update, for DP-REC,
  and) draws a fresh 64-bit seed R from its own randomness (independent of
  its data; the server cannot set it), and encodes each group of the
  flattened update with REC (`tff_dprec.rec`): K = 2**bits candidates from
  the prior N(0, s^2 I) with s = `noise_stddev`, one index per group drawn
  with client-private Gumbel noise. The message (R, index_1..index_M) is
  the only value that leaves the client: `64 + M * bits` bits. The server
  regenerates the chosen candidates inside `tff.federated_aggregate`'s
  accumulate step and sums them.

  Client updates containing NaN or Inf are encoded as zero updates (before
  clipping), so a broken client cannot poison the sum; this is decided on the
  client and is not reported (it would depend on client data).

  A message whose index is out of range, or of the wrong shape, is rejected by
  the server (it contributes zero) and counted in `rejected_messages`.

  The process has no state. Measurements (an `OrderedDict`, all computed from
  the messages only, never from client data):
    * `upload_bits`: total bits of the messages of the round (int64).
    * `num_messages`: number of messages received (int32).
    * `rejected_messages`: number of malformed messages (int32).
    * `messages` (only with `record_messages=True`): the round's messages as
      an int64 matrix, one row `[seed, index_1, ..., index_M]` per message,
      sorted by seed. This is what server-to-client history compression
      (`tff_dprec.history`, the paper's Algorithms 5-6) sends to returning
      clients. It carries no client identity, and its order (by the clients'
      random seeds) is independent of who sent what.

  With `record_messages=True` the server first collects the messages, sorts
  them, and decodes and sums them in that order (`messages_sum_fn`), so a
  client replaying the history reproduces the sum bit for bit. Otherwise each
  message is decoded as it arrives, in `federated_aggregate`'s accumulate step.

  `create` refuses a weight type (`creation_guard`).
  """

  def __init__(self,
               noise_stddev: float,
               *,
               l2_clip: Optional[float],
               bits: int,
               grouping: rec.Grouping,
               chunk_elements: int,
               record_messages: bool,
               insecure_test_seed: Optional[int]):
    """Checks and keeps the settings (see the subclasses' `Args`).

    `l2_clip` `None` encodes the update unclipped.

    Raises:
      TypeError: If an argument has the wrong type.
      ValueError: If an argument has an invalid value.
    """
    validation.check_positive_number(noise_stddev, 'noise_stddev')
    if l2_clip is not None:
      validation.check_positive_number(l2_clip, 'l2_clip')
    rec.check_bits(bits)
    message.check_grouping(grouping)
    validation.check_positive_int(chunk_elements, 'chunk_elements')
    validation.check_bool(record_messages, 'record_messages')
    if insecure_test_seed is not None:
      validation.check_int(insecure_test_seed, 'insecure_test_seed')
    self._noise_stddev = float(noise_stddev)
    self._l2_clip = None if l2_clip is None else float(l2_clip)
    self._bits = int(bits)
    self._grouping = grouping
    self._chunk_elements = int(chunk_elements)
    self._record_messages = bool(record_messages)
    self._insecure_test_seed = (None if insecure_test_seed is None else
                                int(insecure_test_seed) % 2**63)

  @property
  def insecure_test_seed(self) -> Optional[int]:
    """The test-only deterministic seed, or `None` (private, the default)."""
    return self._insecure_test_seed

  def __repr__(self) -> str:
    settings = [f'noise_stddev={self._noise_stddev!r}']
    if self._l2_clip is not None:
      settings.append(f'l2_clip={self._l2_clip!r}')
    settings += [f'bits={self._bits!r}', f'grouping={self._grouping!r}']
    if self._chunk_elements != rec.DEFAULT_CHUNK_ELEMENTS:
      settings.append(f'chunk_elements={self._chunk_elements!r}')
    if self.record_messages:
      settings.append('record_messages=True')
    if self._insecure_test_seed is not None:
      settings.append(f'insecure_test_seed={self._insecure_test_seed!r}')
    return f'{type(self).__name__}({", ".join(settings)})'

  @property
  def noise_stddev(self) -> float:
    return self._noise_stddev

  @property
  def bits(self) -> int:
    return self._bits

  @property
  def grouping(self) -> rec.Grouping:
    return self._grouping

  @property
  def record_messages(self) -> bool:
    return self._record_messages

  @property
  def chunk_elements(self) -> int:
    return self._chunk_elements

  def layout(self, value_type) -> message.MessageLayout:
    """Returns the `MessageLayout` (groups, bits, shapes) for `value_type`.

    Raises:
      TypeError: If `value_type` is not a tensor or structure of float
        tensors of static shapes.
      ValueError: If a group would exceed `message.MAX_GROUP_ELEMENTS`.
    """
    _check_value_type(value_type)
    return message.MessageLayout.from_value_type(
        tff.types.type_to_tf_tensor_specs(value_type), bits=self._bits,
        grouping=self._grouping)

  def num_groups(self, value_type) -> int:
    """Returns the number of groups (indices per message) for `value_type`."""
    return self.layout(value_type).num_groups

  def message_bits(self, value_type) -> int:
    """Returns the size in bits of one client message for `value_type`."""
    return self.layout(value_type).message_bits

  def messages_sum_fn(self, value_type):
    """Returns a TF function: message matrix -> (sum, rejected count).

    The function decodes the rows of an int64 matrix `[seed, indices...]` in
    order and adds them up in float32, skipping (and counting) rows with an
    index outside [0, 2**bits) (`message.sum_messages`). It is the server's
    decoder with `record_messages=True`, and the one that `tff_dprec.history`
    replays, so both compute the same sum bit for bit.
    """
    layout = self.layout(value_type)
    noise_stddev = self._noise_stddev

    @tf.autograph.experimental.do_not_convert
    def messages_sum(messages):
      return message.sum_messages(messages, layout, noise_stddev=noise_stddev)

    return messages_sum

  def create(self, value_type,
             weight_type=None) -> tff.templates.AggregationProcess:
    """Returns the process; refuses a weight type.

    Args:
      value_type: The TFF type of a client's update: a tensor or structure
        of float tensors of static shapes.
      weight_type: Must be `None`. `tff.learning.algorithms.build_fed_sgd`
        passes the client weights' type to any model aggregator; DP-REC
        refuses it with a `TypeError` that says what to use.

    Raises:
      TypeError: If `value_type` cannot be aggregated, or if `weight_type`
        is given.
    """
    creation_guard.check_unweighted_call(self, weight_type)
    client_encode = self._client_encoder(value_type)
    aggregate_messages = self._message_aggregator(value_type)

    @tff.federated_computation()
    def init_fn():
      return tff.federated_value((), tff.SERVER)

    @tff.federated_computation(
        init_fn.type_signature.result,
        tff.FederatedType(value_type, tff.CLIENTS))
    def next_fn(state, value):
      # Client computation: clip, draw a fresh seed, encode.
      messages = tff.federated_map(client_encode, value)
      # Inner aggregation: only messages cross to the server, where they are
      # decoded and summed.
      result, measurements = aggregate_messages(messages)
      return tff.templates.MeasuredProcessOutput(
          state=state, result=result, measurements=measurements)

    return tff.templates.AggregationProcess(init_fn, next_fn)

  def _client_encoder(self, value_type) -> tff.Computation:
    """The client's TF computation: update -> message (clip, seed, encode).

    The seed is drawn inside the computation from fresh randomness; the
    computation has no parameter through which it could be set.
    """
    layout = self.layout(value_type)
    settings = dict(noise_stddev=self._noise_stddev, l2_clip=self._l2_clip,
                    chunk_elements=self._chunk_elements,
                    insecure_test_seed=self._insecure_test_seed)

    @tff.tensorflow.computation(value_type)
    def client_encode(value):
      return message.encode_update(value, layout, **settings)

    return client_encode

  def _message_aggregator(self, value_type) -> tff.Computation:
    """The server side: messages@CLIENTS -> (sum, measurements)@SERVER.

    Decodes each message inside `federated_aggregate`'s accumulate step, or,
    with `record_messages=True`, collects the messages and decodes them in
    the report step with `messages_sum_fn`. A message with an index outside
    [0, 2**bits) is rejected: it contributes zero and is counted in
    `rejected_messages`. (Messages of the wrong shape or dtype are refused by
    TFF's type system before they reach this code.)
    """
    layout = self.layout(value_type)
    if self._record_messages:
      return _recording_message_aggregator(layout, self._noise_stddev)
    return _decoding_message_aggregator(value_type, layout,
                                        self._noise_stddev)


class DpRecSumFactory(RecSumFactoryBase):
  """Sums client updates privately compressed with DP-REC.

  Each client clips its whole update to `l2_clip` in L2 norm, then encodes
  it as `RecSumFactoryBase` says (fresh seed, one REC index per group); the
  server decodes and sums the messages. Measurements and `record_messages`
  as there.

  This is the protocol of Triastcyn et al., "DP-REC: Private &
  Communication-Efficient Federated Learning" (2021, Algorithms 3, 4 and 7),
  but not its privacy analysis: the paper's Theorem 1 compares a draw that
  misses a client with the prior, which does not hold when the server sees
  every message (docs/PRIVACY.md, sections 5 and 6). The privacy proven for
  this factory is that of what a client releases, the seed and its indices
  (`dp_event()`, accounted by `tff_dprec.accounting.dp_rec_epsilon`): by
  default a certified privacy loss distribution (`accounting='min_pld_rdp'`,
  docs/PRIVACY.md, section 9), which holds for adding or removing one client
  against observers who do not know who was sampled; against the server,
  which picks the clients and sees their messages, each participation costs
  the local epsilon (`tff_dprec.accounting.dp_rec_local_epsilon`,
  docs/PRIVACY.md, section 3).

  The clip is required: compression-only REC without clipping (the paper's
  Appendix D.3 ablation, no privacy) is
  `tff_dprec.aggregators.RecCompressionSumFactory`.

  This is a sum. For `tff.learning`, use the mean around it,
  `tff_dprec.learning.dp_rec_aggregator(...)`, with
  `tff_dprec.learning.build_dp_rec_fed_avg` (or
  `tff.learning.algorithms.build_unweighted_fed_avg`). `create` refuses a
  weight type (`creation_guard`). What encloses it (a weighted
  `tff.aggregators.MeanFactory` would send the weights in the clear; given
  directly to `build_unweighted_fed_avg` the server would apply the sum of
  the updates) is not visible to `create`: `tff_dprec.learning.
  check_process` reads what the built process sends.
  """

  def __init__(self,
               noise_stddev: float,
               l2_clip: float,
               bits: int = 7,
               grouping: rec.Grouping = rec.GROUPING_TENSOR,
               chunk_elements: int = rec.DEFAULT_CHUNK_ELEMENTS,
               record_messages: bool = False,
               insecure_test_seed: Optional[int] = None):
    """Initializes the factory.

    Args:
      noise_stddev: The prior standard deviation s (the paper's sigma), in the
        units of the update. Positive.
      l2_clip: The L2 norm C to clip each client's whole update to. Positive
        and required: the privacy guarantee depends on
        c = l2_clip / noise_stddev.
      bits: Index bits per group, in [1, 24]; K = 2**bits. Default 7 (the
        paper's setting).
      grouping: `'tensor'` (one index per tensor, default), `'network'` (one
        index for the whole update) or a positive int G (each tensor split
        into groups of at most G elements).
      chunk_elements: Number of candidate elements generated at once on the
        client; bounds client memory.
      record_messages: Whether to report the round's messages in the
        `messages` measurement (for `tff_dprec.history`) and sum them in a
        canonical order. Default `False`. The accumulate step then appends
        each message to a matrix, which copies O(n^2) message rows per round
        of n clients: negligible up to thousands of clients per round.
      insecure_test_seed: TESTS ONLY, NOT PRIVATE. `None` (default) draws the
        client's seed and index-selection noise from fresh OS entropy. An int
        makes both a deterministic function of this value and the client's
        clipped update, so that a rerun (e.g. a resumed run) reproduces the
        same messages bit for bit. The seed then depends on the client's data
        and is predictable by anyone who knows this value: the privacy
        guarantee does not hold. Only for reproducibility tests.

    Raises:
      TypeError: If an argument has the wrong type (`l2_clip=None` among
        them).
      ValueError: If an argument has an invalid value.
    """
    check_l2_clip(l2_clip, type(self).__name__)
    super().__init__(noise_stddev, l2_clip=l2_clip, bits=bits,
                     grouping=grouping, chunk_elements=chunk_elements,
                     record_messages=record_messages,
                     insecure_test_seed=insecure_test_seed)

  @property
  def l2_clip(self) -> float:
    return self._l2_clip

  @property
  def clip_ratio(self) -> float:
    """c = l2_clip / noise_stddev."""
    return self._l2_clip / self._noise_stddev

  def dp_event(self, value_type) -> accounting.DpRecEvent:
    """Returns the `DpRecEvent` of one client's message."""
    return accounting.DpRecEvent(
        clip_ratio=self.clip_ratio, bits=self._bits,
        num_groups=self.num_groups(value_type))


def check_l2_clip(l2_clip, factory_name: str) -> None:
  """Refuses a missing or non-positive clip of a private DP-REC factory.

  Args:
    l2_clip: The clip given to `factory_name`.
    factory_name: The factory's class name, for the message.

  Raises:
    TypeError: If `l2_clip` is `None` or not a number.
    ValueError: If `l2_clip` is not positive and finite.
  """
  if l2_clip is None:
    raise TypeError(
        f'l2_clip must be a positive number, found None: {factory_name} is '
        'private only with a clip. Compression-only REC, without a clip and '
        'without privacy, is tff_dprec.aggregators.RecCompressionSumFactory '
        '(tff_dprec.learning.rec_compression_aggregator).')
  validation.check_positive_number(l2_clip, 'l2_clip')


def message_type(num_groups: int) -> tff.StructType:
  """The TFF type of one client's message: `<seed=int64,indices=int32[M]>`.

  What `DpRecSumFactory`'s clients send to the server, the only value that
  leaves a client: the 64-bit seed R and one index per group (M =
  `num_groups`, the layout's group count).
  """
  return tff.to_type(collections.OrderedDict(
      seed=tff.TensorType(np.int64),
      indices=tff.TensorType(np.int32, [num_groups])))


def is_message_type(type_spec) -> bool:
  """Whether `type_spec` is `message_type(M)` for some group count M >= 1.

  Args:
    type_spec: Any TFF type (a member type, not a federated one).
  """
  if not isinstance(type_spec, tff.StructType):
    return False
  elements = tff.structure.to_elements(type_spec)
  if [name for name, _ in elements] != ['seed', 'indices']:
    return False
  indices = elements[1][1]
  if not isinstance(indices, tff.TensorType) or len(indices.shape) != 1:
    return False
  num_groups = indices.shape[0]
  return (isinstance(num_groups, int) and num_groups >= 1 and
          type_spec.is_equivalent_to(message_type(num_groups)))


def _decoding_message_aggregator(value_type, layout, noise_stddev):
  """Decodes each message in `federated_aggregate`'s accumulate step."""
  msg_type = message_type(layout.num_groups)
  accumulator_type = collections.OrderedDict(
      total=value_type,
      num_messages=tff.TensorType(np.int32),
      rejected_messages=tff.TensorType(np.int32))

  @tff.tensorflow.computation
  def zero():
    return collections.OrderedDict(
        total=tf.nest.map_structure(
            lambda s: tf.zeros(s.shape, s.dtype), layout.value_specs),
        num_messages=tf.constant(0, tf.int32),
        rejected_messages=tf.constant(0, tf.int32))

  @tff.tensorflow.computation(accumulator_type, msg_type)
  def accumulate(acc, msg):
    valid = message.indices_valid(msg['indices'], layout)
    update = tf.cond(
        valid,
        lambda: message.decode_message(msg['seed'], msg['indices'], layout,
                                       noise_stddev=noise_stddev),
        lambda: tf.nest.map_structure(tf.zeros_like, acc['total']))
    return collections.OrderedDict(
        total=tf.nest.map_structure(tf.add, acc['total'], update),
        num_messages=acc['num_messages'] + 1,
        rejected_messages=acc['rejected_messages'] +
        tf.cast(tf.logical_not(valid), tf.int32))

  @tff.tensorflow.computation(accumulator_type, accumulator_type)
  def merge(a, b):
    return tf.nest.map_structure(tf.add, a, b)

  @tff.tensorflow.computation(accumulator_type)
  def report(acc):
    return acc

  @tff.tensorflow.computation(accumulator_type)
  def measurements_of(acc):
    return _measurements(layout, acc['num_messages'],
                         acc['rejected_messages'])

  @tff.federated_computation(tff.FederatedType(msg_type, tff.CLIENTS))
  def aggregate_messages(messages):
    acc = tff.federated_aggregate(messages, zero(), accumulate, merge, report)
    return acc.total, tff.federated_map(measurements_of, acc)

  return aggregate_messages


def _recording_message_aggregator(layout, noise_stddev):
  """Collects the messages, sorts them by seed, decodes them in that order."""
  msg_type = message_type(layout.num_groups)
  matrix_type = _matrix_type(layout)
  num_columns = 1 + layout.num_groups

  @tff.tensorflow.computation
  def zero():
    return tf.zeros([0, num_columns], tf.int64)

  @tff.tensorflow.computation(matrix_type, msg_type)
  def accumulate(acc, msg):
    row = tf.concat([msg['seed'][tf.newaxis],
                     tf.cast(msg['indices'], tf.int64)], axis=0)
    return tf.concat([acc, row[tf.newaxis]], axis=0)

  @tff.tensorflow.computation(matrix_type, matrix_type)
  def merge(a, b):
    return tf.concat([a, b], axis=0)

  @tff.tensorflow.computation(matrix_type)
  def report(messages):
    # A canonical order: the clients' random seeds (stable for ties), so the
    # order says nothing about who sent what and the replay can sum in the
    # same order.
    return tf.gather(messages, tf.argsort(messages[:, 0], stable=True))

  @tff.tensorflow.computation(matrix_type)
  def decode_and_measure(messages):
    total, rejected = message.sum_messages(messages, layout,
                                           noise_stddev=noise_stddev)
    return total, _measurements(layout, tf.shape(messages)[0], rejected,
                                messages)

  @tff.federated_computation(tff.FederatedType(msg_type, tff.CLIENTS))
  def aggregate_messages(messages):
    collected = tff.federated_aggregate(messages, zero(), accumulate, merge,
                                        report)
    total, measurements = tff.federated_map(decode_and_measure, collected)
    return total, measurements

  return aggregate_messages


def _measurements(layout, num_messages, rejected, messages=None):
  measurements = collections.OrderedDict(
      upload_bits=tf.cast(num_messages, tf.int64) * layout.message_bits,
      num_messages=num_messages,
      rejected_messages=rejected)
  if messages is not None:
    measurements['messages'] = messages
  return measurements




def _matrix_type(layout):
  return tff.TensorType(np.int64, [None, 1 + layout.num_groups])


def _check_value_type(value_type):
  if isinstance(value_type, tff.FederatedType) or not (
      isinstance(value_type, (tff.TensorType, tff.StructType))):
    raise TypeError(
        'A REC sum can aggregate a tensor or a structure of tensors, '
        f'found {value_type!r}.')
  specs = tff.types.type_to_tf_tensor_specs(value_type)
  for spec in tf.nest.flatten(specs):
    if not isinstance(spec, tf.TensorSpec):
      raise TypeError(f'Unsupported member type {spec!r} in {value_type!r}.')
    if not spec.dtype.is_floating:
      raise TypeError(
          'A REC sum aggregates float tensors only, found dtype '
          f'{spec.dtype.name} in {value_type!r}.')
    if not spec.shape.is_fully_defined():
      raise TypeError(
          f'A REC sum needs static shapes, found {spec.shape} in '
          f'{value_type!r}.')
