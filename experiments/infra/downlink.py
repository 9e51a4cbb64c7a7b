"""Server-to-client history compression in the training loop, with checks.

Wires `tff_dprec.history` into a `tff.learning` process: the initial model
from a seed R', one `Downlink` per distinct client of each round (its bits are
what the results count), the round's messages into the log, and the replay of
a sample of clients compared bit for bit with the server's model. For an
aggregator simulated in law (no messages) the downlinks are sized
analytically: the log counts each round's messages, which is all that its
sizes depend on, and nothing is replayed.

A replay is a function of the client's state and the log's messages only,
so clients that start from the same state (the initial model, for every
tracked client first seen at the same round) and receive the same rounds
get one replay, computed once: a random tracked client is mostly first
seen at the end, and each of them would otherwise decode the whole log
again.
"""

import collections
import hashlib
from typing import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import history


def initial_model_seed(seed: int) -> int:
  """The seed R' of the initial model of a run with sampling seed `seed`."""
  return int(np.random.default_rng([seed, 0x5245]).integers(2**62))


class HistoryDownlink:
  """Decides and measures downlinks; replays tracked clients to verify.

  Tracks `verify_clients` clients drawn at random from the population (most
  are first seen at the end: the longest histories) and the first
  `verify_clients` distinct clients of round 1 (returning clients, checked at
  every later participation), and checks each replay bit for bit against the
  server's model and optimizer state.

  `analytic=True` (an aggregator simulated in law, which sends no messages):
  the same downlink decisions and sizes, from each round's message count;
  no client is tracked or replayed.
  """

  def __init__(self, *, model_fn, factory, server_optimizer, seed: int,
               client_ids: Sequence[str], verify_clients: int,
               analytic: bool = False):
    rng = np.random.default_rng([seed, 0x4849])  # Apart from sampling's.
    self.initial_seed = initial_model_seed(seed)
    self.analytic = analytic
    self._verify_clients = 0 if analytic else verify_clients
    count = min(self._verify_clients, len(client_ids))
    self.tracked = set(str(c) for c in rng.choice(
        np.asarray(client_ids), size=count, replace=False))
    self._replay = None if analytic else history.ClientReplay(
        model_fn=model_fn, factory=factory, server_optimizer=server_optimizer)
    self._server = None
    self._clients = {}
    self._replays = collections.OrderedDict()
    self.history_downlinks = 0
    self.full_downlinks = 0
    self.checks = 0
    self.mismatches = 0
    self.max_abs_diff = 0.0

  def initialize(self, process, state, message_bits: int):
    """Starts the log; the model in `state` must be the one R' gives."""
    full_bits = history.structure_bits(
        (process.get_model_weights(state), state.finalizer))
    self._server = history.HistoryServer(
        message_bits=message_bits, full_bits=full_bits,
        initial_seed=self.initial_seed)

  @property
  def full_bits(self) -> int:
    return self._server.full_bits

  @property
  def log_rounds(self) -> int:
    return self._server.log_rounds

  def before_round(self, round_index: int, client_ids, process,
                   state) -> int:
    """Downlinks of round `round_index` (0-based); returns their bits."""
    bits = 0
    distinct = sorted(set(str(c) for c in client_ids))
    if round_index == 0:
      self.tracked.update(distinct[:self._verify_clients])
    for client in distinct:
      downlink = self._server.downlink(client, round_index)
      bits += downlink.bits
      if downlink.kind == history.HISTORY:
        self.history_downlinks += 1
      else:
        self.full_downlinks += 1
      if client in self.tracked:
        self._check(client, downlink, process, state)
    return bits

  def after_round(self, round_index: int, measured: dict) -> None:
    """Logs round `round_index` from its aggregator measurements."""
    if self.analytic:
      # Rows without columns: a history's size counts the messages, and the
      # log of a simulation in law holds none.
      self._server.record_round(
          round_index, np.zeros([int(measured['num_messages']), 0], np.int64))
    else:
      self._server.record_round(round_index, measured['messages'])

  def finish(self, round_index: int, process, state) -> None:
    """Brings every tracked client to the final model and checks it."""
    for client in sorted(self.tracked):
      self._check(client, self._server.downlink(client, round_index),
                  process, state)

  def _check(self, client, downlink, process, state):
    server_weights = process.get_model_weights(state)
    if downlink.kind == history.HISTORY:
      payload = self._server.messages(downlink)
    else:
      payload = (server_weights, state.finalizer)
    replayed = self._receive(self._clients.get(client), downlink, payload)
    self._clients[client] = replayed
    self.checks += 1
    exact = (_bit_equal(replayed.weights, server_weights) and
             _bit_equal(replayed.optimizer_state, state.finalizer))
    if not exact:
      self.mismatches += 1
    for a, b in zip(tf.nest.flatten(replayed.weights),
                    tf.nest.flatten(server_weights)):
      diff = np.max(np.abs(np.asarray(a, np.float64) -
                           np.asarray(b, np.float64)), initial=0.0)
      self.max_abs_diff = max(self.max_abs_diff, float(diff))

  def _receive(self, client_state, downlink, payload):
    """`ClientReplay.receive`, once per starting state and history."""
    if downlink.kind != history.HISTORY:
      return self._replay.receive(client_state, downlink, payload)
    start = client_state
    if downlink.initial_seed is not None:
      start = self._replay.initial_state(downlink.initial_seed)
    if start is None:  # `receive` says what is wrong.
      return self._replay.receive(client_state, downlink, payload)
    key = (downlink.first_round, downlink.round_num, _state_digest(start))
    if key not in self._replays:
      self._replays[key] = self._replay.receive(client_state, downlink,
                                                payload)
      if len(self._replays) > _REPLAYS_KEPT:
        self._replays.popitem(last=False)
    return self._replays[key]

  def get_state(self) -> dict:
    """Everything needed to continue after a restart (JSON-encodable)."""
    clients = {}
    for client, replay_state in self._clients.items():
      clients[client] = dict(
          round_num=replay_state.round_num,
          trainable=[np.asarray(w) for w in replay_state.weights.trainable],
          non_trainable=[np.asarray(w)
                         for w in replay_state.weights.non_trainable],
          optimizer=[np.asarray(x) for x in
                     tf.nest.flatten(replay_state.optimizer_state)])
    return dict(
        server=self._server.get_state(), clients=clients,
        tracked=sorted(self.tracked),
        counters=[self.history_downlinks, self.full_downlinks, self.checks,
                  self.mismatches, self.max_abs_diff])

  def restore(self, state: dict) -> None:
    self._server = history.HistoryServer.from_state(state['server'])
    self.tracked = set(state['tracked'])
    (self.history_downlinks, self.full_downlinks, self.checks,
     self.mismatches, self.max_abs_diff) = state['counters']
    self._clients = {}
    for client, saved in state['clients'].items():
      self._clients[client] = history.ReplayState(
          round_num=saved['round_num'],
          weights=tff.learning.models.ModelWeights(
              trainable=list(saved['trainable']),
              non_trainable=list(saved['non_trainable'])),
          optimizer_state=self._replay.optimizer_state_from_leaves(
              saved['optimizer']))

  def summary(self) -> dict:
    return dict(
        initial_seed=self.initial_seed,
        full_state_bits=self.full_bits,
        history_downlinks=self.history_downlinks,
        full_downlinks=self.full_downlinks,
        replay_clients=len(self.tracked),
        replay_checks=self.checks,
        replay_mismatches=self.mismatches,
        replay_max_abs_diff=self.max_abs_diff,
        log_rounds_kept=self.log_rounds)


# Replays kept for clients that start where another one started.
_REPLAYS_KEPT = 16


def _state_digest(state) -> str:
  """SHA-256 of a `ReplayState`: its round and every value, bit for bit."""
  digest = hashlib.sha256(str(state.round_num).encode())
  for leaf in tf.nest.flatten((list(state.weights.trainable),
                               list(state.weights.non_trainable),
                               state.optimizer_state)):
    array = np.asarray(leaf)
    digest.update(array.dtype.str.encode())
    digest.update(str(array.shape).encode())
    digest.update(np.ascontiguousarray(array).tobytes())
  return digest.hexdigest()


def _bit_equal(a, b) -> bool:
  a, b = tf.nest.flatten(a), tf.nest.flatten(b)
  if len(a) != len(b):
    return False
  for x, y in zip(a, b):
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.dtype != y.dtype or x.tobytes() != y.tobytes():
      return False
  return True
