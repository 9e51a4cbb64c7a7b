"""Tests for tff_dprec.history."""

import collections
import random
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import history
from tff_dprec import message
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import dp_rec_in_law
from tff_dprec.aggregators import rec_compression

_FEATURES = 4
_OUTPUTS = 3


def _keras_model():
  return tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(_FEATURES,)),
      tf.keras.layers.Dense(5, activation='tanh'),
      tf.keras.layers.Dense(_OUTPUTS),
  ])


_SPEC = (tf.TensorSpec([None, _FEATURES], tf.float32),
         tf.TensorSpec([None, _OUTPUTS], tf.float32))


def _model_fn():
  return tff.learning.models.from_keras_model(
      _keras_model(), loss=tf.keras.losses.MeanSquaredError(),
      input_spec=_SPEC)


def _client_data(num_clients, seed=0):
  rng = np.random.default_rng(seed)
  true_w = rng.normal(size=(_FEATURES, _OUTPUTS)).astype(np.float32)
  data = []
  for _ in range(num_clients):
    n = int(rng.integers(3, 12))
    x = rng.normal(size=(n, _FEATURES)).astype(np.float32)
    y = (x @ true_w + 0.1 * rng.normal(size=(n, _OUTPUTS))).astype(np.float32)
    data.append(tf.data.Dataset.from_tensor_slices((x, y)).batch(4))
  return data


def _bits_equal(a, b):
  a, b = tf.nest.flatten(a), tf.nest.flatten(b)
  if len(a) != len(b):
    return False
  for x, y in zip(a, b):
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.dtype != y.dtype:
      return False
    if x.tobytes() != y.tobytes():
      return False
  return True


class SeededModelWeightsTest(tf.test.TestCase):

  def test_same_seed_same_weights_different_seed_different(self):
    a = history.seeded_model_weights(_model_fn, 7)
    b = history.seeded_model_weights(_model_fn, 7)
    c = history.seeded_model_weights(_model_fn, 8)
    self.assertTrue(_bits_equal(a, b))
    self.assertFalse(_bits_equal(a.trainable, c.trainable))
    # The model's own initializers: Glorot-uniform kernels, zero biases.
    kernel, bias = a.trainable[0], a.trainable[1]
    self.assertAllEqual(bias, np.zeros_like(bias))
    limit = np.sqrt(6 / (_FEATURES + 5))
    self.assertLessEqual(np.max(np.abs(kernel)), limit)
    self.assertGreater(np.std(kernel), 0.1 * limit)

  def test_leaves_callers_random_state_alone(self):
    random.seed(3)
    np.random.seed(3)
    tf.keras.utils.set_random_seed(3)
    expected = (random.random(), np.random.rand(),
                float(tf.random.uniform([])),
                tf.keras.initializers.GlorotUniform()([2, 2]).numpy())
    random.seed(3)
    np.random.seed(3)
    tf.keras.utils.set_random_seed(3)
    history.seeded_model_weights(_model_fn, 11)
    got = (random.random(), np.random.rand(), float(tf.random.uniform([])),
           tf.keras.initializers.GlorotUniform()([2, 2]).numpy())
    self.assertEqual(expected[:3], got[:3])
    self.assertAllEqual(expected[3], got[3])

  def test_independent_of_callers_seeds(self):
    tf.keras.utils.set_random_seed(1)
    a = history.seeded_model_weights(_model_fn, 5)
    tf.keras.utils.set_random_seed(2)
    b = history.seeded_model_weights(_model_fn, 5)
    self.assertTrue(_bits_equal(a, b))

  def test_bad_seed(self):
    with self.assertRaisesRegex(TypeError, 'seed'):
      history.seeded_model_weights(_model_fn, 1.5)


class HistoryServerTest(tf.test.TestCase, parameterized.TestCase):

  def _messages(self, n, groups=2):
    return np.arange(n * (1 + groups), dtype=np.int64).reshape(n, 1 + groups)

  @parameterized.named_parameters(
      ('message_bits_zero', dict(message_bits=0), ValueError, 'message_bits'),
      ('full_bits_negative', dict(full_bits=-5), ValueError, 'full_bits'),
      ('message_bits_float', dict(message_bits=1.5), TypeError,
       'message_bits'),
      ('seed_str', dict(initial_seed='1'), TypeError, 'initial_seed'),
      ('full_bits_bool', dict(full_bits=True), TypeError, 'full_bits'),
  )
  def test_bad_arguments(self, kwargs, error, name):
    args = dict(message_bits=10, full_bits=1000, initial_seed=1)
    args.update(kwargs)
    with self.assertRaisesRegex(error, name):
      history.HistoryServer(**args)

  def test_sizes_reset_and_first_time_seed(self):
    server = history.HistoryServer(message_bits=10, full_bits=10**6,
                                   initial_seed=42)
    first = server.downlink('a', 0)
    self.assertEqual(first.kind, history.HISTORY)
    self.assertEqual(first.initial_seed, 42)
    self.assertEqual(first.bits, history.INITIAL_SEED_BITS)
    self.assertEqual(server.messages(first), [])
    server.record_round(0, self._messages(3))
    server.record_round(1, self._messages(2))
    # 'a' got round 0's model: it needs rounds 0 and 1.
    again = server.downlink('a', 2)
    self.assertEqual((again.kind, again.first_round, again.initial_seed),
                     (history.HISTORY, 0, None))
    self.assertEqual(again.bits, 2 * history.ROUND_HEADER_BITS + 5 * 10)
    self.assertLen(server.messages(again), 2)
    self.assertAllEqual(server.messages(again)[1], self._messages(2))
    # A newcomer needs R' and every round.
    new = server.downlink('b', 2)
    self.assertEqual(new.initial_seed, 42)
    self.assertEqual(new.bits, again.bits + history.INITIAL_SEED_BITS)
    server.record_round(2, self._messages(4))
    # The reset: 'a' now needs round 2 only.
    third = server.downlink('a', 3)
    self.assertEqual((third.first_round, third.bits),
                     (2, history.ROUND_HEADER_BITS + 40))

  def test_switches_to_full_when_history_is_longer(self):
    round_bits = history.ROUND_HEADER_BITS + 4 * 10
    server = history.HistoryServer(message_bits=10,
                                   full_bits=3 * round_bits,
                                   initial_seed=1)
    server.downlink('old', 0)
    kinds = []
    for t in range(6):
      server.record_round(t, self._messages(4))
      d = server.downlink('old' if t % 2 else 'x%d' % t, t + 1)
      kinds.append(d.kind)
    self.assertEqual(server.downlink('old', 6).kind, history.HISTORY)
    # A client last seen 3 rounds ago fits exactly; 4 rounds ago does not.
    server.record_round(6, self._messages(4))
    server.record_round(7, self._messages(4))
    server.record_round(8, self._messages(4))
    fits = server.downlink('old', 9)
    self.assertEqual((fits.kind, fits.bits), (history.HISTORY, 3 * round_bits))
    newcomer = server.downlink('never_seen', 9)
    self.assertEqual((newcomer.kind, newcomer.bits),
                     (history.FULL, 3 * round_bits))
    with self.assertRaisesRegex(ValueError, 'no messages'):
      server.messages(newcomer)
    # The log keeps only what some client could still receive as history.
    self.assertLessEqual(server.log_rounds, 4)
    self.assertIn(history.FULL, kinds)

  def test_decisions_match_a_naive_reference(self):
    # Random cohorts and round sizes; the reference keeps every round and
    # sums sizes directly. Pruning and prefix sums must not change anything.
    rng = np.random.default_rng(4)
    message_bits, full_bits = 50, 3000
    server = history.HistoryServer(message_bits=message_bits,
                                   full_bits=full_bits, initial_seed=3)
    sizes, last = [], {}
    kinds = collections.Counter()
    for t in range(300):
      for client in set(rng.integers(0, 40, size=rng.integers(1, 6))):
        first = last.get(client, 0)
        naive = sum(history.ROUND_HEADER_BITS + n * message_bits
                    for n in sizes[first:t])
        if client not in last:
          naive += history.INITIAL_SEED_BITS
        d = server.downlink(client, t)
        kinds[d.kind] += 1
        if naive <= full_bits:
          self.assertEqual((d.kind, d.bits, d.first_round),
                           (history.HISTORY, naive, first))
          self.assertLen(server.messages(d), t - first)
        else:
          self.assertEqual((d.kind, d.bits), (history.FULL, full_bits))
        last[client] = t
      n = int(rng.integers(1, 6))
      sizes.append(n)
      server.record_round(t, self._messages(n))
    self.assertGreater(kinds[history.HISTORY], 100)
    self.assertGreater(kinds[history.FULL], 100)
    # The log holds no more rounds than fit in the full size.
    self.assertLessEqual(
        server.log_rounds,
        full_bits // (history.ROUND_HEADER_BITS + message_bits) + 1)

  def test_order_and_matrix_checks(self):
    server = history.HistoryServer(message_bits=10, full_bits=100,
                                   initial_seed=1)
    with self.assertRaisesRegex(ValueError, 'out of order'):
      server.record_round(1, self._messages(1))
    with self.assertRaisesRegex(ValueError, 'integer matrix'):
      server.record_round(0, np.zeros([3], np.int64))
    with self.assertRaisesRegex(ValueError, 'integer matrix'):
      server.record_round(0, np.zeros([3, 2], np.float32))
    with self.assertRaisesRegex(ValueError, 'next round'):
      server.downlink('a', 4)

  def test_state_round_trip(self):
    server = history.HistoryServer(message_bits=10, full_bits=500,
                                   initial_seed=9)
    for t in range(5):
      server.downlink(f'c{t % 2}', t)
      server.record_round(t, self._messages(t + 1))
    restored = history.HistoryServer.from_state(server.get_state())
    for client in ('c0', 'c1', 'new'):
      a, b = server.downlink(client, 5), restored.downlink(client, 5)
      self.assertEqual(a, b)
      if a.kind == history.HISTORY:
        for x, y in zip(server.messages(a), restored.messages(b)):
          self.assertAllEqual(x, y)
    state = server.get_state()
    del state['rounds'][max(state['rounds'])]
    with self.assertRaisesRegex(ValueError, 'Corrupt'):
      history.HistoryServer.from_state(state)


class RecordedMessagesTest(tf.test.TestCase):

  def test_messages_measurement_sorted_and_sum_matches_decoder(self):
    value_type = tff.TensorType(np.float32, [6])
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.5, l2_clip=1.0, bits=5,
                                     grouping=4, record_messages=True)
    process = factory.create(value_type)
    values = [np.full([6], v, np.float32) for v in (0.1, -0.2, 0.3, 0.0)]
    output = process.next(process.initialize(), values)
    messages = output.measurements['messages']
    self.assertEqual(messages.shape, (4, 1 + 2))
    self.assertAllEqual(np.argsort(messages[:, 0], kind='stable'),
                        np.arange(4))
    self.assertEqual(output.measurements['num_messages'], 4)
    self.assertEqual(output.measurements['rejected_messages'], 0)
    self.assertEqual(output.measurements['upload_bits'], 4 * (64 + 10))
    expected = np.zeros([6], np.float32)
    for row in messages:
      expected += message.decode_message(
          row[0], row[1:].astype(np.int32), factory.layout(value_type),
          noise_stddev=0.5).numpy()
    self.assertAllClose(output.result, expected, rtol=1e-6, atol=1e-6)
    total, rejected = factory.messages_sum_fn(value_type)(messages)
    self.assertTrue(_bits_equal(total, output.result))
    self.assertEqual(int(rejected), 0)

  def test_malformed_rows_rejected_and_counted(self):
    value_type = tff.TensorType(np.float32, [3])
    factory = dp_rec.DpRecSumFactory(noise_stddev=1.0, l2_clip=1.0, bits=3,
                                     record_messages=True)
    good = collections.OrderedDict(seed=np.int64(5),
                                   indices=np.array([2], np.int32))
    bad = [collections.OrderedDict(seed=np.int64(s),
                                   indices=np.array([i], np.int32))
           for s, i in ((1, 8), (2, -1))]
    # Malformed messages reach the server's aggregator directly.
    total, measurements = factory._message_aggregator(value_type)(  # pylint: disable=protected-access
        [bad[0], good, bad[1]])
    self.assertEqual(measurements['rejected_messages'], 2)
    self.assertEqual(measurements['num_messages'], 3)
    self.assertAllEqual(measurements['messages'][:, 0], [1, 2, 5])
    self.assertAllClose(total, message.decode_message(
        5, [2], factory.layout(value_type), noise_stddev=1.0))

  def test_record_messages_must_be_bool(self):
    with self.assertRaisesRegex(TypeError, 'record_messages'):
      dp_rec.DpRecSumFactory(noise_stddev=1.0, l2_clip=1.0,
                             record_messages=1)


def _optimizer(name):
  if name == 'sgd':
    return tff.learning.optimizers.build_sgdm(0.5)
  if name == 'sgdm':
    return tff.learning.optimizers.build_sgdm(0.3, momentum=0.9)
  return tff.learning.optimizers.build_adam(0.05)


class ReplayTest(tf.test.TestCase, parameterized.TestCase):
  """The client's replay equals the server's model bit for bit."""

  def _replay_setup(self, optimizer_name, full_fraction, private):
    """(process, state, server, replay, initial_seed) for the replay test."""
    coding = dict(noise_stddev=0.05, bits=4, grouping=8, record_messages=True)
    factory = (dp_rec.DpRecSumFactory(l2_clip=0.2, **coding) if private else
               rec_compression.RecCompressionSumFactory(**coding))
    server_optimizer = _optimizer(optimizer_name)
    process = tff.learning.algorithms.build_unweighted_fed_avg(
        _model_fn,
        client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.1),
        server_optimizer_fn=server_optimizer,
        model_aggregator=tff.aggregators.UnweightedMeanFactory(factory))
    initial_seed = 1234
    state = process.initialize()
    state = process.set_model_weights(
        state, history.seeded_model_weights(_model_fn, initial_seed))
    trainable_type = tff.learning.models.weights_type_from_model(
        _model_fn).trainable
    full_bits = history.structure_bits(
        (process.get_model_weights(state), state.finalizer))
    server = history.HistoryServer(
        message_bits=factory.message_bits(trainable_type),
        full_bits=max(1, int(full_fraction * full_bits)),
        initial_seed=initial_seed)
    replay = history.ClientReplay(model_fn=_model_fn, factory=factory,
                                  server_optimizer=server_optimizer)
    return process, state, server, replay, initial_seed

  @parameterized.named_parameters(
      # A large full size: every downlink is a history.
      ('sgd', 'sgd', 100.0), ('sgdm', 'sgdm', 100.0), ('adam', 'adam', 100.0),
      # The real full size, and a small one: long absences switch to it.
      ('adam_real_full', 'adam', 1.0), ('adam_small_full', 'adam', 0.1),
      # Compression-only REC (not private) sends the same messages.
      ('compression_only', 'sgd', 100.0, False))
  def test_replay_is_bit_exact(self, optimizer_name, full_fraction,
                               private=True):
    num_clients, cohort, rounds = 7, 3, 12
    process, state, server, replay, initial_seed = self._replay_setup(
        optimizer_name, full_fraction, private)
    data = _client_data(num_clients)
    rng = np.random.default_rng(0)
    clients = {}
    checks = collections.Counter()

    def check(client, t, state):
      downlink = server.downlink(client, t)
      payload = (server.messages(downlink) if downlink.kind == history.HISTORY
                 else (process.get_model_weights(state), state.finalizer))
      clients[client] = replay.receive(clients.get(client), downlink,
                                       payload)
      checks[downlink.kind] += 1
      self.assertEqual(clients[client].round_num, t)
      self.assertTrue(
          _bits_equal(clients[client].weights,
                      process.get_model_weights(state)),
          f'client {client} round {t} ({downlink.kind})')
      self.assertTrue(_bits_equal(clients[client].optimizer_state,
                                  state.finalizer))

    # Client 6 never takes part until the end: the longest absence.
    for t in range(rounds):
      ids = rng.choice(num_clients - 1, size=cohort, replace=True)
      for client in sorted(set(int(i) for i in ids)):
        check(client, t, state)
      output = process.next(state, [data[i] for i in ids])
      state = output.state
      messages = output.metrics['aggregator']['mean_value']['messages']
      self.assertEqual(messages.shape[0], cohort)
      server.record_round(t, messages)
    for client in range(num_clients):
      check(client, rounds, state)
    # The model moved, so the replay had real work to do.
    self.assertFalse(_bits_equal(
        process.get_model_weights(state).trainable,
        history.seeded_model_weights(_model_fn, initial_seed).trainable))
    self.assertGreater(checks[history.HISTORY], 0)
    # At the real full size either kind may win a downlink; only the sizes
    # far from it fix which.
    if full_fraction < 1:
      self.assertGreater(checks[history.FULL], 0)
    elif full_fraction > 1:
      self.assertEqual(checks[history.FULL], 0)

  def test_history_must_continue_from_client_state(self):
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.05, l2_clip=0.2, bits=4,
                                     record_messages=True)
    replay = history.ClientReplay(model_fn=_model_fn, factory=factory,
                                  server_optimizer=_optimizer('sgd'))
    downlink = history.Downlink(kind=history.HISTORY, round_num=5,
                                first_round=3, initial_seed=None, bits=1)
    with self.assertRaisesRegex(ValueError, 'starts at round 3'):
      replay.receive(None, downlink, [])

  def test_first_time_clients_share_one_read_only_model_per_seed(self):
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.05, l2_clip=0.2, bits=4,
                                     record_messages=True)
    replay = history.ClientReplay(model_fn=_model_fn, factory=factory,
                                  server_optimizer=_optimizer('sgd'))
    with mock.patch.object(history, 'seeded_model_weights',
                           wraps=history.seeded_model_weights) as built:
      first, second = replay.initial_state(7), replay.initial_state(7)
      self.assertEqual(built.call_count, 1)
      other = replay.initial_state(8)
      self.assertEqual(built.call_count, 2)
    want = history.seeded_model_weights(_model_fn, 7)
    for state in (first, second):
      self.assertEqual(state.round_num, 0)
      for got, expected in zip(state.weights.trainable, want.trainable):
        self.assertAllEqual(got, expected)
        with self.assertRaisesRegex(ValueError, 'read-only'):
          got += 1.0
    self.assertNotAllEqual(other.weights.trainable[0],
                           first.weights.trainable[0])
    # Each state has lists of its own.
    first.weights.trainable.pop()
    self.assertLen(second.weights.trainable, len(want.trainable))

  def test_bad_arguments(self):
    for factory in (object(), dp_rec_in_law.DpRecInLawSumFactory(
        noise_stddev=0.05, l2_clip=0.2)):
      with self.assertRaisesRegex(
          TypeError, '^factory must be a DpRecSumFactory or a '
          'RecCompressionSumFactory, found'):
        history.ClientReplay(model_fn=_model_fn, factory=factory,
                             server_optimizer=_optimizer('sgd'))
    factory = dp_rec.DpRecSumFactory(noise_stddev=0.05, l2_clip=0.2)
    with self.assertRaisesRegex(TypeError, 'server_optimizer'):
      history.ClientReplay(model_fn=_model_fn, factory=factory,
                           server_optimizer=tf.keras.optimizers.SGD())


class StructureBitsTest(tf.test.TestCase):

  def test_counts_dtype_sizes(self):
    self.assertEqual(
        history.structure_bits(
            [np.zeros([3, 2], np.float32), np.int64(1),
             collections.OrderedDict(a=tf.zeros([5], tf.float64))]),
        6 * 32 + 64 + 5 * 64)
