"""Server-to-client compression: update history and exact client replay.

DP-REC's upload is a few bits, so the download of the model dominates total
communication. Section 2.5 and Algorithms 5-6 (Appendix B) of Triastcyn et al.,
"DP-REC: Private & Communication-Efficient Federated Learning", send a
returning client the DP-REC messages of every round since its last
participation (plus the seed R' of the initial model for a first-time client),
or the full model and server optimizer state when that is smaller. The client
replays the history: for each round it decodes the messages exactly as the
server did, averages them, and applies the same server optimizer step.

* `HistoryServer` is the server's bookkeeping (Algorithm 5): the log of round
  messages, each client's first missing round, the size decision, the reset on
  participation. It stores the log once (not one copy per client) and drops
  rounds that no client can still receive as history.
* `ClientReplay` is the client's side (Algorithm 6), in plain TensorFlow.
* `seeded_model_weights` initializes a model from the seed R'.

Exactness: the server must aggregate with
`DpRecSumFactory(record_messages=True)` inside
`tff.aggregators.UnweightedMeanFactory` (`dp_rec_aggregator(...,
record_messages=True)`) and apply the update with a `tff.learning` optimizer
through `tff.learning.templates.build_apply_optimizer_finalizer` (what
`tff.learning.algorithms.build_unweighted_fed_avg` does). The server then sorts
each round's messages by seed and decodes them in that order with
`DpRecSumFactory.messages_sum_fn`; the replay calls the same function on the
same rows, divides by the message count with the op `UnweightedMeanFactory`
uses, and runs the same optimizer step with the same non-finite rejection, so
on the same platform the replayed model equals the server's bit for bit (the
tests check this for SGD, SGD with momentum and Adam).

Differences from the paper's Algorithm 5, both deliberate:
* The round set includes the receiving client's own message. The server's
  aggregator sees messages without client identities (sorted by their random
  seeds), which is what keeps the sample secret inside the history; the cost
  is one message per participation.
* Sizes count a 32-bit message count per round, and 64 bits for R'.

Privacy: the history holds only DP-REC messages, which the server already
received, with no client identities; sending them is post-processing.
"""

import random
import threading
from typing import Any, Callable, Optional

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import sizes
from tff_dprec import validation
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import rec_compression

ROUND_HEADER_BITS = sizes.ROUND_HEADER_BITS
INITIAL_SEED_BITS = sizes.INITIAL_SEED_BITS

HISTORY = 'history'
FULL = 'full'

__all__ = [
    'ClientReplay',
    'Downlink',
    'FULL',
    'HISTORY',
    'HistoryServer',
    'INITIAL_SEED_BITS',
    'ReplayState',
    'ROUND_HEADER_BITS',
    'seeded_model_weights',
    'structure_bits',
]


def structure_bits(structure) -> int:
  """Returns the size in bits of a structure of arrays or tensors."""
  total = 0
  for leaf in tf.nest.flatten(structure):
    array = np.asarray(leaf)
    total += int(array.size) * int(array.dtype.itemsize) * 8
  return total


@attrs.frozen
class Downlink:
  """What the server sends one client at the start of a round.

  Attributes:
    kind: `'history'` (messages of rounds `[first_round, round_num)`) or
      `'full'` (the model and the server optimizer state).
    round_num: The round (0-based) the client takes part in.
    first_round: The first round of the history; `round_num` for `'full'`.
    initial_seed: The seed R' of the initial model, for a first-time client
      receiving a history; else `None`.
    bits: The size of what is sent.
  """
  kind: str
  round_num: int
  first_round: int
  initial_seed: Optional[int]
  bits: int


class HistoryServer:
  """The server side of history compression (the paper's Algorithm 5).

  Call `downlink(client_id, t)` for each distinct client of round t before the
  round runs (it decides history vs. full and marks the client as up to date
  at round t), then `record_round(t, messages)` with the round's `messages`
  measurement of `DpRecSumFactory(record_messages=True)`. Rounds are numbered
  from 0 and must be recorded in order.

  A history of rounds [s, t) has `sum(ROUND_HEADER_BITS + n_r * message_bits)`
  bits, plus `INITIAL_SEED_BITS` for a first-time client (whose s is 0). It is
  sent when it is no larger than `full_bits`; otherwise the full state is sent.
  A round is dropped from the log once the rounds from it to the newest
  exceed `full_bits`: a client that would need it gets the full state.
  History sizes are prefix-sum differences, O(1) per downlink.
  """

  def __init__(self, *, message_bits: int, full_bits: int, initial_seed: int):
    """Initializes the server's history.

    Args:
      message_bits: Size of one client message (`DpRecSumFactory.
        message_bits`).
      full_bits: Size of the full model and server optimizer state
        (`structure_bits`).
      initial_seed: The seed R' of the initial model (`seeded_model_weights`).

    Raises:
      TypeError: If an argument is not an int.
      ValueError: If a size is not positive.
    """
    validation.check_positive_int(message_bits, 'message_bits')
    validation.check_positive_int(full_bits, 'full_bits')
    validation.check_int(initial_seed, 'initial_seed')
    self._message_bits = int(message_bits)
    self._full_bits = int(full_bits)
    self._initial_seed = int(initial_seed)
    self._rounds = {}  # round -> message matrix
    # Bits of the kept rounds before round r, for oldest <= r <= num_rounds
    # (relative to the oldest kept round): a history's size in O(1).
    self._bits_before = {0: 0}
    self._num_rounds = 0  # rounds recorded so far
    self._oldest = 0  # oldest round still in the log
    self._next_round = {}  # client -> first round it has not applied

  @property
  def initial_seed(self) -> int:
    return self._initial_seed

  @property
  def full_bits(self) -> int:
    return self._full_bits

  @property
  def num_rounds(self) -> int:
    """The number of rounds recorded so far."""
    return self._num_rounds

  @property
  def log_rounds(self) -> int:
    """The number of rounds currently kept in the log."""
    return len(self._rounds)

  def history_bits(self, first_round: int, round_num: int,
                   first_time: bool = False) -> Optional[int]:
    """Bits of a history of rounds [first_round, round_num).

    Args:
      first_round: The first round of the history.
      round_num: The round the history brings the client to.
      first_time: Whether the history also carries R' (a first-time client).

    Returns:
      The size in bits, or `None` when those rounds are no longer kept (the
      full state is smaller anyway).
    """
    if first_round < self._oldest:
      return None
    bits = self._bits_before[round_num] - self._bits_before[first_round]
    if first_time:
      bits += INITIAL_SEED_BITS
    return bits

  def downlink(self, client_id, round_num: int) -> Downlink:
    """Decides what client `client_id` receives in round `round_num`.

    Marks the client as up to date at `round_num` (the reset of its history).

    Raises:
      ValueError: If `round_num` is not the next round to run.
    """
    if round_num != self._num_rounds:
      raise ValueError(
          f'round_num={round_num!r} is not the next round; '
          f'{self._num_rounds} rounds have been recorded.')
    first_time = client_id not in self._next_round
    first = self._next_round.get(client_id, 0)
    bits = self.history_bits(first, round_num, first_time)
    self._next_round[client_id] = round_num
    if bits is not None and bits <= self._full_bits:
      return Downlink(kind=HISTORY, round_num=round_num, first_round=first,
                      initial_seed=self._initial_seed if first_time else None,
                      bits=bits)
    return Downlink(kind=FULL, round_num=round_num, first_round=round_num,
                    initial_seed=None, bits=self._full_bits)

  def messages(self, downlink: Downlink) -> list[np.ndarray]:
    """The message matrices of a history downlink, oldest round first."""
    if downlink.kind != HISTORY:
      raise ValueError(f'A {downlink.kind!r} downlink carries no messages.')
    if downlink.first_round < self._oldest:
      raise ValueError(
          f'Round {downlink.first_round} has been dropped from the log.')
    return [self._rounds[r]
            for r in range(downlink.first_round, downlink.round_num)]

  def record_round(self, round_num: int, messages) -> None:
    """Appends round `round_num`'s message matrix to the log.

    Raises:
      ValueError: If rounds are recorded out of order or `messages` is not an
        integer matrix.
    """
    if round_num != self._num_rounds:
      raise ValueError(
          f'round_num={round_num!r} is out of order; expected '
          f'{self._num_rounds}.')
    messages = np.asarray(messages)
    if messages.ndim != 2 or not np.issubdtype(messages.dtype, np.integer):
      raise ValueError(
          'messages must be an integer matrix [num_messages, 1 + groups], '
          f'found dtype {messages.dtype} and shape {messages.shape}.')
    messages = messages.astype(np.int64, copy=True)
    messages.setflags(write=False)
    self._rounds[round_num] = messages
    self._bits_before[round_num + 1] = (
        self._bits_before[round_num] + ROUND_HEADER_BITS +
        messages.shape[0] * self._message_bits)
    self._num_rounds += 1
    self._prune()

  def _prune(self):
    # A client whose history starts at round s needs rounds s, ..., t. Once
    # those alone exceed the full size, it gets the full state, now and later
    # (histories only grow), so round s is never sent again.
    latest = self._bits_before[self._num_rounds]
    while (self._oldest < self._num_rounds and
           latest - self._bits_before[self._oldest] > self._full_bits):
      del self._rounds[self._oldest]
      del self._bits_before[self._oldest]
      self._oldest += 1

  def get_state(self) -> dict[str, Any]:
    """Returns the bookkeeping as plain Python/NumPy values (checkpoints)."""
    return dict(
        message_bits=self._message_bits, full_bits=self._full_bits,
        initial_seed=self._initial_seed, num_rounds=self._num_rounds,
        oldest=self._oldest,
        rounds={r: np.array(m) for r, m in self._rounds.items()},
        next_round=dict(self._next_round))

  @classmethod
  def from_state(cls, state: dict[str, Any]) -> 'HistoryServer':
    """Rebuilds a `HistoryServer` from `get_state()`."""
    server = cls(message_bits=state['message_bits'],
                 full_bits=state['full_bits'],
                 initial_seed=state['initial_seed'])
    server._restore(state)  # pylint: disable=protected-access
    return server

  def _restore(self, state):
    self._oldest = int(state['oldest'])
    self._bits_before = {self._oldest: 0}
    for r, messages in sorted(
        (int(k), v) for k, v in state['rounds'].items()):
      messages = np.asarray(messages, np.int64)
      messages.setflags(write=False)
      self._rounds[r] = messages
      if r in self._bits_before:
        self._bits_before[r + 1] = (
            self._bits_before[r] + ROUND_HEADER_BITS +
            messages.shape[0] * self._message_bits)
    self._num_rounds = int(state['num_rounds'])
    self._next_round = dict(state['next_round'])
    expected = set(range(self._oldest, self._num_rounds))
    if set(self._rounds) != expected:
      raise ValueError(
          f'Corrupt history state: rounds {sorted(self._rounds)} kept, '
          f'expected {sorted(expected)}.')


@attrs.frozen
class ReplayState:
  """What a client keeps between participations.

  Attributes:
    round_num: The next round whose update is not yet applied.
    weights: The server model after rounds [0, round_num), a
      `tff.learning.models.ModelWeights` of NumPy arrays.
    optimizer_state: The server optimizer state after those rounds.
  """
  round_num: int
  weights: Any
  optimizer_state: Any



def _server_functions(messages_sum: Callable[..., Any], num_columns: int,
                      optimizer: tff.learning.optimizers.Optimizer):
  """(decode_sum, mean, step): the server's computations, as tf.functions.

  Three functions with the same boundaries as the server's computations
  (the aggregator's decoder, the mean's division, the finalizer's step):
  inside one graph TF's optimizer may rewrite arithmetic across them (e.g.
  fold the division into Adam's scaling), which changes the last bits of
  the result.
  """

  @tf.function
  def decode_sum(messages):
    messages = tf.ensure_shape(messages, [None, num_columns])
    total, _ = messages_sum(messages)
    return tuple(tf.nest.flatten(total)), tf.shape(messages)[0]

  @tf.function
  def mean(total, count):
    # `tff.aggregators.UnweightedMeanFactory`'s division.
    return tuple(tf.math.divide(x, tf.cast(count, x.dtype)) for x in total)

  @tf.function
  def step(optimizer_state, trainable, update):
    new_state, new_trainable = optimizer.next(optimizer_state, trainable,
                                              update)
    # `tff.learning`'s finalizer rejects a non-finite update.
    finite = tf.reduce_all(
        [tf.reduce_all(tf.math.is_finite(x)) for x in update])
    return tf.cond(finite, lambda: (new_state, new_trainable),
                   lambda: (optimizer_state, trainable))

  return decode_sum, mean, step


class ClientReplay:
  """The client side of history compression (the paper's Algorithm 6).

  Reconstructs the server model from a `Downlink` and its payload: a
  first-time client initializes the model from R' and the optimizer from its
  initial state; then, for each round of the history, it decodes and sums the
  messages with the aggregator's own decoder, divides by their number, and
  applies the server optimizer step, rejecting a non-finite update as
  `tff.learning`'s finalizer does.
  """

  def __init__(self, *, model_fn: Callable[[], Any],
               factory: dp_rec.RecSumFactoryBase,
               server_optimizer: tff.learning.optimizers.Optimizer):
    """Initializes the replay.

    Args:
      model_fn: The `tff.learning` model function the server trains (used for
        the initial model from R' and the weight types).
      factory: The server's `DpRecSumFactory` (the inner sum of the mean),
        or its `RecCompressionSumFactory` (compression only, not private).
      server_optimizer: The server's `tff.learning` optimizer.

    Raises:
      TypeError: If `factory` is neither, or `server_optimizer`
        is not a `tff.learning.optimizers.Optimizer`.
    """
    if not isinstance(factory, _REPLAYABLE_SUMS):
      raise TypeError(
          'factory must be a DpRecSumFactory or a RecCompressionSumFactory, '
          f'found {factory!r}.')
    if not isinstance(server_optimizer, tff.learning.optimizers.Optimizer):
      raise TypeError(
          'server_optimizer must be a tff.learning.optimizers.Optimizer, '
          f'found {server_optimizer!r}.')
    self._model_fn = model_fn
    self._initial = None  # (R', its model) once a first-time client came.
    weights_type = tff.learning.models.weights_type_from_model(model_fn)
    trainable_type = weights_type.trainable
    self._trainable_specs = tuple(tf.nest.flatten(
        tff.types.type_to_tf_tensor_specs(trainable_type)))
    messages_sum = factory.messages_sum_fn(trainable_type)
    optimizer = server_optimizer
    num_columns = 1 + factory.num_groups(trainable_type)

    @tf.function
    def init_optimizer():
      return optimizer.initialize(self._trainable_specs)

    self._init_optimizer = init_optimizer
    # The structure of the optimizer state the step function is traced with.
    self._optimizer_template = init_optimizer()

    self._decode_sum, self._mean, self._step = _server_functions(
        messages_sum, num_columns, optimizer)

  def optimizer_state_from_leaves(self, leaves) -> Any:
    """Packs flat optimizer-state values into the optimizer's structure."""
    leaves = [np.asarray(x) for x in leaves]
    expected = len(tf.nest.flatten(self._optimizer_template))
    if len(leaves) != expected:
      raise ValueError(
          f'{len(leaves)} optimizer state values, expected {expected}.')
    return tf.nest.pack_sequence_as(self._optimizer_template, leaves)

  def initial_state(self, initial_seed: int) -> ReplayState:
    """The state of a first-time client: the model from R', round 0.

    R' always gives the same model (`seeded_model_weights`), so it is built
    once per seed here and its arrays, read-only, shared by the clients this
    replay stands for.
    """
    if self._initial is None or self._initial[0] != initial_seed:
      built = seeded_model_weights(self._model_fn, initial_seed)
      for array in built.trainable + built.non_trainable:
        array.setflags(write=False)
      self._initial = (initial_seed, built)
    built = self._initial[1]
    weights = tff.learning.models.ModelWeights(
        trainable=list(built.trainable),
        non_trainable=list(built.non_trainable))
    return ReplayState(
        round_num=0, weights=weights,
        optimizer_state=tf.nest.map_structure(
            np.asarray, self._init_optimizer()))

  def apply_round(self, state: ReplayState, messages) -> ReplayState:
    """Applies one round's message matrix to `state`."""
    trainable = tuple(
        tf.convert_to_tensor(w, s.dtype)
        for w, s in zip(state.weights.trainable, self._trainable_specs))
    total, count = self._decode_sum(
        tf.convert_to_tensor(np.asarray(messages, np.int64)))
    new_state, new_trainable = self._step(state.optimizer_state, trainable,
                                          self._mean(total, count))
    weights = tff.learning.models.ModelWeights(
        trainable=[np.asarray(w) for w in new_trainable],
        non_trainable=list(state.weights.non_trainable))
    return ReplayState(
        round_num=state.round_num + 1, weights=weights,
        optimizer_state=tf.nest.map_structure(np.asarray, new_state))

  def receive(self, state: Optional[ReplayState], downlink: Downlink,
              payload) -> ReplayState:
    """Reconstructs the model of round `downlink.round_num`.

    Args:
      state: What the client kept from its last participation, or `None` for
        a first-time client.
      downlink: The server's `Downlink`.
      payload: For a history, the list of message matrices
        (`HistoryServer.messages`); for a full downlink, a pair
        `(model_weights, optimizer_state)`.

    Returns:
      The client's `ReplayState` at `downlink.round_num`.

    Raises:
      ValueError: If the history does not continue from `state`, or does not
        have one message matrix per round.
    """
    if downlink.kind == FULL:
      weights, optimizer_state = payload
      # The same values in the structure the step is traced with (TFF may
      # hand back lists where the optimizer built tuples).
      optimizer_state = self.optimizer_state_from_leaves(
          tf.nest.flatten(optimizer_state))
      weights = tff.learning.models.ModelWeights(
          trainable=[np.asarray(w) for w in weights.trainable],
          non_trainable=[np.asarray(w) for w in weights.non_trainable])
      return ReplayState(round_num=downlink.round_num, weights=weights,
                         optimizer_state=optimizer_state)
    if downlink.initial_seed is not None:
      state = self.initial_state(downlink.initial_seed)
    if state is None or state.round_num != downlink.first_round:
      raise ValueError(
          f'The history starts at round {downlink.first_round}, but the '
          'client state is at round '
          f'{None if state is None else state.round_num}.')
    rounds = list(payload)
    expected = downlink.round_num - downlink.first_round
    if len(rounds) != expected:
      raise ValueError(
          f'The history has {len(rounds)} rounds, expected {expected}.')
    for messages in rounds:
      state = self.apply_round(state, messages)
    return state


def seeded_model_weights(model_fn: Callable[[], Any],
                         seed: int) -> tff.learning.models.ModelWeights:
  """Returns the initial weights of `model_fn()` as a function of `seed` (R').

  The model is built in a fresh graph on a fresh thread with the graph seed
  and Keras's seed source set to `seed`, so the same seed always gives the
  same weights, with the model's own initializers, and the caller's random
  state (Python, NumPy, TensorFlow, Keras) is neither used nor changed.

  Raises:
    TypeError: If `seed` is not an int.
  """
  validation.check_int(seed, 'seed')
  result = {}

  def build():
    # Keras draws initializer seeds from this thread-local source, or from
    # Python's `random` when it is unset; a fresh thread starts unset.
    python_state = random.getstate()
    try:
      random.seed(seed)
      with tf.Graph().as_default() as graph:
        tf.random.set_seed(seed % 2**31)  # The graph's seed only.
        model = model_fn()
        weights = tff.learning.models.ModelWeights.from_model(model)
        variables = (list(model.trainable_variables) +
                     list(model.non_trainable_variables))
        with tf.compat.v1.Session(graph=graph) as session:
          session.run(tf.compat.v1.variables_initializer(variables))
          result['weights'] = session.run(weights)
    except Exception as e:  # pylint: disable=broad-except
      result['error'] = e
    finally:
      random.setstate(python_state)

  thread = threading.Thread(target=build)
  thread.start()
  thread.join()
  if 'error' in result:
    raise result['error']
  weights = result['weights']
  return tff.learning.models.ModelWeights(
      trainable=[np.asarray(w) for w in weights.trainable],
      non_trainable=[np.asarray(w) for w in weights.non_trainable])


# The sums whose messages a client can replay (the simulation in law sends
# none).
_REPLAYABLE_SUMS = (dp_rec.DpRecSumFactory,
                    rec_compression.RecCompressionSumFactory)
