"""DP-REC: private, few-bit aggregation of client updates for TFF."""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import accounting
from tff_dprec import rec

# A message carries a 64-bit seed word; the codec seed is (word, domain tag).
SEED_BITS = 64
_SEED_DOMAIN = 0x44505245430001  # "DPREC" + codec version 1.
# Refuse groups larger than this many elements (memory budget: the client
# holds a group, the server decodes one, the encoder a block of candidates).
MAX_GROUP_ELEMENTS = 2**27


class DPRecSumFactory(tff.aggregators.UnweightedAggregationFactory):
  """Sums client updates privately compressed with DP-REC.

  Each client clips its whole update to `l2_clip` in L2 norm, draws a fresh
  64-bit seed R from its own randomness (independent of its data; the server
  cannot set it), and encodes each group of the flattened update with REC
  (`tff_dprec.rec`): K = 2**bits candidates from the prior N(0, s^2 I) with
  s = `noise_stddev`, one index per group drawn with client-private Gumbel
  noise. The message (R, index_1..index_M) is the only value that leaves the
  client: `64 + M * bits` bits. The server regenerates the chosen candidates
  inside `tff.federated_aggregate`'s accumulate step and sums them.

  Each decoded update is a sample from (approximately) N(clipped update, s^2 I),
  so its privacy is that of Theorem 1 of Triastcyn et al., "DP-REC: Private &
  Communication-Efficient Federated Learning" (Algorithms 3 and 4): see
  `tff_dprec.accounting` and `dp_event()`.

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

  With `l2_clip=None` no clipping happens: compression-only REC, the paper's
  Appendix D.3 ablation, which has no privacy guarantee.
  """

  def __init__(self,
               noise_stddev: float,
               l2_clip: Optional[float],
               bits: int = 7,
               grouping: rec.Grouping = rec.GROUPING_TENSOR,
               chunk_elements: int = rec.DEFAULT_CHUNK_ELEMENTS,
               record_messages: bool = False,
               insecure_test_seed: Optional[int] = None):
    """Initializes the factory.

    Args:
      noise_stddev: The prior standard deviation s (the paper's sigma), in the
        units of the update. Positive.
      l2_clip: The L2 norm C to clip each client's whole update to, or `None`
        for compression-only REC (no privacy). The privacy guarantee depends on
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
      TypeError: If an argument has the wrong type.
      ValueError: If an argument has an invalid value.
    """
    rec.check_positive_float(noise_stddev, 'noise_stddev')
    if l2_clip is not None:
      rec.check_positive_float(l2_clip, 'l2_clip')
    rec.check_bits(bits)
    rec.check_grouping(grouping)
    rec.check_positive_int(chunk_elements, 'chunk_elements')
    if insecure_test_seed is not None and (
        isinstance(insecure_test_seed, bool) or
        not isinstance(insecure_test_seed, (int, np.integer))):
      raise TypeError('insecure_test_seed must be None or an int, found '
                      f'{insecure_test_seed!r}.')
    if not isinstance(record_messages, bool):
      raise TypeError(
          f'record_messages must be a bool, found {record_messages!r}.')
    if not isinstance(grouping, str) and grouping > MAX_GROUP_ELEMENTS:
      raise ValueError(
          f'grouping={grouping!r} exceeds the memory budget of '
          f'{MAX_GROUP_ELEMENTS} elements per group.')
    self._noise_stddev = float(noise_stddev)
    self._l2_clip = None if l2_clip is None else float(l2_clip)
    self._bits = int(bits)
    self._grouping = grouping
    self._chunk_elements = int(chunk_elements)
    self._record_messages = record_messages
    self._insecure_test_seed = (None if insecure_test_seed is None else
                                int(insecure_test_seed) % 2**63)

  @property
  def insecure_test_seed(self) -> Optional[int]:
    """The test-only deterministic seed, or `None` (private, the default)."""
    return self._insecure_test_seed

  @property
  def noise_stddev(self) -> float:
    return self._noise_stddev

  @property
  def l2_clip(self) -> Optional[float]:
    return self._l2_clip

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
  def clip_ratio(self) -> Optional[float]:
    """c = l2_clip / noise_stddev, or `None` in compression-only mode."""
    if self._l2_clip is None:
      return None
    return self._l2_clip / self._noise_stddev

  def num_groups(self, value_type) -> int:
    """Returns the number of groups (indices per message) for `value_type`."""
    return len(rec.plan_groups(_flat_sizes(value_type), self._grouping))

  def message_bits(self, value_type) -> int:
    """Returns the size in bits of one client message for `value_type`."""
    return SEED_BITS + self._bits * self.num_groups(value_type)

  def _checked_groups(self, value_type):
    groups = rec.plan_groups(_flat_sizes(value_type), self._grouping)
    for start, end in groups:
      if end - start > MAX_GROUP_ELEMENTS:
        raise ValueError(
            f'A group of {end - start} elements exceeds the memory budget of '
            f'{MAX_GROUP_ELEMENTS} elements; use grouping=<int>.')
    return groups

  def dp_event(self, value_type) -> accounting.DpRecEvent:
    """Returns the `DpRecEvent` of one client's message.

    Raises:
      ValueError: In compression-only mode (`l2_clip=None`), which is not
        private.
    """
    if self._l2_clip is None:
      raise ValueError(
          'Compression-only DP-REC (l2_clip=None) has no privacy guarantee.')
    return accounting.DpRecEvent(
        clip_ratio=self.clip_ratio, bits=self._bits,
        num_groups=self.num_groups(value_type))

  def message_type(self, value_type) -> tff.StructWithPythonType:
    """The TFF type of one client message: int64 seed and int32 indices."""
    return tff.to_type(collections.OrderedDict(
        seed=tff.TensorType(np.int64),
        indices=tff.TensorType(np.int32, [self.num_groups(value_type)])))

  def client_encoder(self, value_type) -> tff.Computation:
    """The client's TF computation: update -> message (clip, seed, encode).

    The seed is drawn inside the computation from fresh randomness; the
    computation has no parameter through which it could be set.
    """
    _check_value_type(value_type)
    groups = self._checked_groups(value_type)
    noise_stddev, l2_clip, bits = self._noise_stddev, self._l2_clip, self._bits
    chunk_elements = self._chunk_elements
    test_seed = self._insecure_test_seed

    @tff.tensorflow.computation(value_type)
    def client_encode(value):
      flat = _to_flat_vector(value)
      flat = _zero_if_not_finite(flat)
      if l2_clip is not None:
        flat = _clip_l2(flat, l2_clip)
      if test_seed is None:
        # Fresh OS entropy drawn on the client, independent of its update and
        # of anything in the graph the server built.
        seed_word = rec.fresh_int64([])
        selection_seeds = [None] * len(groups)
      else:
        seed_word, selection_seeds = _insecure_test_seeds(
            flat, test_seed, len(groups))
      seed = _codec_seed(seed_word)
      indices = [
          rec.encode(flat[start:end], prior_stddev=noise_stddev, bits=bits,
                     seed=seed, selection_seed=selection_seeds[g], group=g,
                     chunk_elements=chunk_elements)
          for g, (start, end) in enumerate(groups)
      ]
      if not indices:
        indices_tensor = tf.zeros([0], tf.int32)
      else:
        indices_tensor = tf.stack(indices)
      return collections.OrderedDict(seed=seed_word, indices=indices_tensor)

    return client_encode

  def message_aggregator(self, value_type) -> tff.Computation:
    """The server side: messages@CLIENTS -> (sum, measurements)@SERVER.

    Decodes each message inside `federated_aggregate`'s accumulate step, or,
    with `record_messages=True`, collects the messages and decodes them in
    the report step with `messages_sum_fn`. A message with an index outside
    [0, 2**bits) is rejected: it contributes zero and is counted in
    `rejected_messages`. (Messages of the wrong shape or dtype are refused by
    TFF's type system before they reach this code.)
    """
    _check_value_type(value_type)
    if self._record_messages:
      return self._recording_message_aggregator(value_type)
    sizes = _flat_sizes(value_type)
    groups = self._checked_groups(value_type)
    specs = tff.types.type_to_tf_tensor_specs(value_type)
    dtypes = [s.dtype for s in tf.nest.flatten(specs)]
    shapes = [s.shape for s in tf.nest.flatten(specs)]
    message_type = self.message_type(value_type)
    message_bits = self.message_bits(value_type)
    noise_stddev, bits = self._noise_stddev, self._bits
    accumulator_type = collections.OrderedDict(
        total=value_type,
        num_messages=tff.TensorType(np.int32),
        rejected_messages=tff.TensorType(np.int32))

    @tff.tensorflow.computation
    def zero():
      return collections.OrderedDict(
          total=tf.nest.map_structure(
              lambda s: tf.zeros(s.shape, s.dtype), specs),
          num_messages=tf.constant(0, tf.int32),
          rejected_messages=tf.constant(0, tf.int32))

    @tff.tensorflow.computation(accumulator_type, message_type)
    def accumulate(acc, message):
      indices = message['indices']
      valid = tf.reduce_all(rec.index_in_range(indices, bits))
      seed = _codec_seed(message['seed'])

      def decoded():
        flat = _decode_groups(seed, indices, groups, noise_stddev, bits,
                              sum(sizes))
        return _from_flat_vector(flat, shapes, dtypes, specs)

      update = tf.cond(
          valid, decoded,
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
      return collections.OrderedDict(
          upload_bits=tf.cast(acc['num_messages'], tf.int64) * message_bits,
          num_messages=acc['num_messages'],
          rejected_messages=acc['rejected_messages'])

    @tff.federated_computation(tff.FederatedType(message_type, tff.CLIENTS))
    def aggregate_messages(messages):
      acc = tff.federated_aggregate(messages, zero(), accumulate, merge,
                                    report)
      return acc.total, tff.federated_map(measurements_of, acc)

    return aggregate_messages

  def message_matrix_type(self, value_type) -> tff.TensorType:
    """The type of the `messages` measurement: int64 [num_messages, 1 + M]."""
    return tff.TensorType(np.int64, [None, 1 + self.num_groups(value_type)])

  def messages_sum_fn(self, value_type):
    """Returns a TF function: message matrix -> (sum, rejected count).

    The function decodes the rows of an int64 matrix `[seed, indices...]` in
    order and adds them up in float32, skipping (and counting) rows with an
    index outside [0, 2**bits). It is the server's decoder with
    `record_messages=True`, and the one that `tff_dprec.history` replays, so
    both compute the same sum bit for bit.
    """
    _check_value_type(value_type)
    sizes = _flat_sizes(value_type)
    total = sum(sizes)
    groups = self._checked_groups(value_type)
    specs = tff.types.type_to_tf_tensor_specs(value_type)
    flat_specs = tf.nest.flatten(specs)
    shapes = [s.shape for s in flat_specs]
    dtypes = [s.dtype for s in flat_specs]
    noise_stddev, bits = self._noise_stddev, self._bits
    num_groups = len(groups)

    # Plain graph code (explicit while_loop and cond): nothing for AutoGraph
    # to convert when a caller's tf.function traces it.
    @tf.autograph.experimental.do_not_convert
    def messages_sum(messages):
      messages = tf.convert_to_tensor(messages, tf.int64)
      messages = tf.ensure_shape(messages, [None, 1 + num_groups])

      def body(i, acc, rejected):
        row = messages[i]
        indices = row[1:]
        valid = tf.reduce_all(rec.index_in_range(indices, bits))
        seed = _codec_seed(row[0])
        acc = tf.cond(
            valid,
            lambda: acc + _decode_groups(seed, tf.cast(indices, tf.int32),
                                         groups, noise_stddev, bits, total),
            lambda: acc)
        return i + 1, acc, rejected + tf.cast(tf.logical_not(valid), tf.int32)

      _, acc, rejected = tf.while_loop(
          lambda i, acc, rejected: i < tf.shape(messages)[0], body,
          (tf.constant(0), tf.zeros([total], tf.float32),
           tf.constant(0, tf.int32)))
      return _from_flat_vector(acc, shapes, dtypes, specs), rejected

    return messages_sum

  def _recording_message_aggregator(self, value_type) -> tff.Computation:
    message_type = self.message_type(value_type)
    matrix_type = self.message_matrix_type(value_type)
    message_bits = self.message_bits(value_type)
    num_columns = 1 + self.num_groups(value_type)
    messages_sum = self.messages_sum_fn(value_type)

    @tff.tensorflow.computation
    def zero():
      return tf.zeros([0, num_columns], tf.int64)

    @tff.tensorflow.computation(matrix_type, message_type)
    def accumulate(acc, message):
      row = tf.concat([message['seed'][tf.newaxis],
                       tf.cast(message['indices'], tf.int64)], axis=0)
      return tf.concat([acc, row[tf.newaxis]], axis=0)

    @tff.tensorflow.computation(matrix_type, matrix_type)
    def merge(a, b):
      return tf.concat([a, b], axis=0)

    @tff.tensorflow.computation(matrix_type)
    def report(messages):
      # A canonical order: the clients' random seeds (stable for ties), so
      # the order says nothing about who sent what and the replay can sum in
      # the same order.
      return tf.gather(messages, tf.argsort(messages[:, 0], stable=True))

    @tff.tensorflow.computation(matrix_type)
    def decode_and_measure(messages):
      total, rejected = messages_sum(messages)
      num_messages = tf.shape(messages)[0]
      return total, collections.OrderedDict(
          upload_bits=tf.cast(num_messages, tf.int64) * message_bits,
          num_messages=num_messages,
          rejected_messages=rejected,
          messages=messages)

    @tff.federated_computation(tff.FederatedType(message_type, tff.CLIENTS))
    def aggregate_messages(messages):
      collected = tff.federated_aggregate(messages, zero(), accumulate, merge,
                                          report)
      total, measurements = tff.federated_map(decode_and_measure, collected)
      return total, measurements

    return aggregate_messages

  def create(self, value_type) -> tff.templates.AggregationProcess:
    client_encode = self.client_encoder(value_type)
    aggregate_messages = self.message_aggregator(value_type)

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


def dp_rec_aggregator(
    noise_stddev: float,
    l2_clip: Optional[float],
    bits: int = 7,
    grouping: rec.Grouping = rec.GROUPING_TENSOR,
    chunk_elements: int = rec.DEFAULT_CHUNK_ELEMENTS,
    record_messages: bool = False,
    insecure_test_seed: Optional[int] = None,
) -> tff.aggregators.UnweightedMeanFactory:
  """Returns the DP-REC mean, ready for `tff.learning` algorithm builders.

  An unweighted mean (`tff.aggregators.UnweightedMeanFactory`) whose sum is a
  `DPRecSumFactory`; pass it as `model_aggregator` to
  `tff.learning.algorithms.build_unweighted_fed_avg`. Arguments as in
  `DPRecSumFactory`. Measurements are nested under `mean_value`.
  """
  return tff.aggregators.UnweightedMeanFactory(
      value_sum_factory=DPRecSumFactory(
          noise_stddev=noise_stddev, l2_clip=l2_clip, bits=bits,
          grouping=grouping, chunk_elements=chunk_elements,
          record_messages=record_messages,
          insecure_test_seed=insecure_test_seed))


def no_client_metrics(metric_finalizers, local_unfinalized_metrics_type=None):
  """A `tff.learning` metrics aggregator that takes nothing from clients.

  `tff.learning` algorithms by default sum each client's training metrics
  (loss, example counts) in the clear, outside any DP mechanism. With DP-REC
  the client's message should be the only value that leaves it: pass
  `metrics_aggregator=no_client_metrics` to the algorithm builder. The round's
  `client_work` metrics are then empty.
  """
  del metric_finalizers, local_unfinalized_metrics_type

  @tff.federated_computation
  def aggregate(client_metrics):
    del client_metrics
    return tff.federated_value(collections.OrderedDict(), tff.SERVER)

  return aggregate


def decode_message(seed_word, indices, *, value_type, noise_stddev: float,
                   bits: int, grouping: rec.Grouping = rec.GROUPING_TENSOR):
  """Decodes one client message outside TFF (history replay, audits).

  Args:
    seed_word: The message's int64 seed.
    indices: The message's int32 indices, one per group.
    value_type: The TFF type of the aggregated value.
    noise_stddev: The prior standard deviation of the aggregator.
    bits: The index bits per group of the aggregator.
    grouping: The grouping of the aggregator.

  Returns:
    The decoded update, a structure of tensors matching `value_type`.
  """
  sizes = _flat_sizes(value_type)
  groups = rec.plan_groups(sizes, grouping)
  specs = tff.types.type_to_tf_tensor_specs(value_type)
  flat_specs = tf.nest.flatten(specs)
  flat = _decode_groups(
      _codec_seed(tf.constant(seed_word, tf.int64)),
      tf.constant(indices, tf.int32), groups, noise_stddev, bits, sum(sizes))
  return _from_flat_vector(flat, [s.shape for s in flat_specs],
                           [s.dtype for s in flat_specs], specs)


def _decode_groups(seed, indices, groups, noise_stddev, bits, total):
  parts = [
      rec.decode(indices[g], prior_stddev=noise_stddev, bits=bits,
                 dim=end - start, seed=seed, group=g)
      for g, (start, end) in enumerate(groups)
  ]
  if not parts:
    return tf.zeros([total], tf.float32)
  return tf.concat(parts, axis=0)


def _insecure_test_seeds(flat, test_seed, num_groups):
  """Test mode: seed word and selection seeds from `test_seed` and `flat`."""
  fingerprint = tf.fingerprint(
      tf.reshape(tf.bitcast(flat, tf.uint8), [1, -1]))
  word = tf.bitcast(tf.reshape(fingerprint, [8]), tf.int64)
  key = tf.stack([tf.constant(test_seed, tf.int64), word])
  seed_word = tf.random.stateless_uniform(
      [], seed=key, minval=None, maxval=None, dtype=tf.int64, alg='philox')
  selection_seeds = [
      tf.cast(tf.random.experimental.stateless_fold_in(key, g + 1,
                                                       alg='philox'),
              tf.int64)
      for g in range(num_groups)]
  return seed_word, selection_seeds


def _codec_seed(seed_word):
  return tf.stack([seed_word, tf.constant(_SEED_DOMAIN, tf.int64)])


def _to_flat_vector(value):
  parts = [tf.reshape(tf.cast(t, tf.float32), [-1])
           for t in tf.nest.flatten(value)]
  if not parts:
    return tf.zeros([0], tf.float32)
  return tf.concat(parts, axis=0)


def _from_flat_vector(flat, shapes, dtypes, structure):
  tensors = []
  offset = 0
  for shape, dtype in zip(shapes, dtypes):
    size = int(np.prod(shape.as_list(), dtype=np.int64))
    tensors.append(tf.cast(tf.reshape(flat[offset:offset + size], shape), dtype))
    offset += size
  return tf.nest.pack_sequence_as(structure, tensors)


def _zero_if_not_finite(flat):
  finite = tf.reduce_all(tf.math.is_finite(flat))
  return tf.where(finite, flat, tf.zeros_like(flat))


def _clip_l2(flat, l2_clip):
  # Norm in float64: float32 squares overflow for enormous updates.
  norm = tf.norm(tf.cast(flat, tf.float64))
  factor = tf.minimum(tf.constant(1.0, tf.float64),
                      l2_clip / tf.maximum(norm, 1e-300))
  return tf.cast(tf.cast(flat, tf.float64) * factor, tf.float32)


def _flat_sizes(value_type):
  specs = tff.types.type_to_tf_tensor_specs(value_type)
  return [int(np.prod(s.shape.as_list(), dtype=np.int64))
          for s in tf.nest.flatten(specs)]


def _check_value_type(value_type):
  if isinstance(value_type, tff.FederatedType) or not (
      isinstance(value_type, (tff.TensorType, tff.StructType))):
    raise TypeError(
        'DPRecSumFactory can aggregate a tensor or a structure of tensors, '
        f'found {value_type!r}.')
  specs = tff.types.type_to_tf_tensor_specs(value_type)
  for spec in tf.nest.flatten(specs):
    if not isinstance(spec, tf.TensorSpec):
      raise TypeError(f'Unsupported member type {spec!r} in {value_type!r}.')
    if not spec.dtype.is_floating:
      raise TypeError(
          'DPRecSumFactory aggregates float tensors only, found dtype '
          f'{spec.dtype.name} in {value_type!r}.')
    if not spec.shape.is_fully_defined():
      raise TypeError(
          f'DPRecSumFactory needs static shapes, found {spec.shape} in '
          f'{value_type!r}.')
