"""Tests for experiments.runner.run_cache and the history downlink's shared
replays: what runs compute alike is computed once, and is the same."""

import collections
import types
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.infra import downlink as downlink_lib
from experiments.runner import run_cache
from tff_dprec import history


def _task(make=None):
  """A task whose round input counts its calls (`make`: the inputs)."""
  calls = []

  def round_input(ids, seed):
    calls.append((tuple(ids), seed))
    return make(ids, seed) if make else [
        (np.full(3, int(i), np.int32), np.arange(2, dtype=np.int64))
        for i in ids]

  task = types.SimpleNamespace(client_data=object(), round_input=round_input)
  return task, calls


def _weights(value):
  return tff.learning.models.ModelWeights(
      trainable=[np.full([2, 3], value, np.float32),
                 np.zeros([3], np.float32)],
      non_trainable=[])


class RoundInputTest(tf.test.TestCase):

  def test_made_once_per_clients_and_seed(self):
    task, calls = _task()
    cache = run_cache.RunCache(task)
    first = cache.round_input(['1', '2'], [0xDA7A, 0, 1])
    again = cache.round_input(np.array(['1', '2']), (0xDA7A, 0, 1))
    self.assertIs(again, first)
    cache.round_input(['1', '2'], [0xDA7A, 1, 1])  # Another seed.
    cache.round_input(['2', '1'], [0xDA7A, 0, 1])  # Another order.
    self.assertLen(calls, 3)
    self.assertEqual(cache.hits['round input'], 1)

  def test_least_recently_used_out_beyond_the_budget(self):
    task, calls = _task()
    per_input = 2 * (3 * 4 + 2 * 8)  # Two clients' arrays, in bytes.
    cache = run_cache.RunCache(task, max_input_bytes=2 * per_input)
    for seed in (0, 1, 0, 2, 1):
      cache.round_input(['1', '2'], seed)
    # 0 and 1 kept; 0 used again; 2 pushes 1 out; 1 is made again.
    self.assertEqual([seed for _, seed in calls], [0, 1, 2, 1])

  def test_ids_alone_are_passed_through(self):
    task, calls = _task()
    task.client_data = None  # TFF builds the datasets from the ids.
    cache = run_cache.RunCache(task)
    cache.round_input(['1'], 0)
    cache.round_input(['1'], 0)
    self.assertLen(calls, 2)


class EvaluationTest(tf.test.TestCase):

  def test_once_per_model_bit_for_bit(self):
    task, _ = _task()
    cache = run_cache.RunCache(task)
    results = iter([{'recall_at_5': 0.25, 'loss': 1.0},
                    {'recall_at_5': 0.5, 'loss': 0.5},
                    {'recall_at_5': 0.75, 'loss': 0.25}])
    with mock.patch.object(run_cache.evaluation, 'evaluate',
                           side_effect=lambda *a, **k: next(results)) as ev:
      first = cache.evaluate(_weights(0.5), split='test')
      # Equal values in other arrays: the same model.
      self.assertEqual(cache.evaluate(_weights(0.5), split='test'), first)
      # The last bit differs: another model.
      other = _weights(0.5)
      other.trainable[0][0, 0] = np.nextafter(np.float32(0.5), np.float32(1))
      self.assertEqual(cache.evaluate(other)['recall_at_5'], 0.5)
      # Another split or size: evaluated.
      cache.evaluate(_weights(0.5), split='validation')
    self.assertEqual(first, {'recall_at_5': 0.25, 'loss': 1.0})
    self.assertEqual(ev.call_count, 3)
    self.assertEqual(cache.hits['evaluation'], 1)

  def test_a_returned_dict_is_the_caller_s(self):
    task, _ = _task()
    cache = run_cache.RunCache(task)
    with mock.patch.object(run_cache.evaluation, 'evaluate',
                           return_value={'loss': 1.0}):
      cache.evaluate(_weights(1.0)).update(loss=2.0)
      self.assertEqual(cache.evaluate(_weights(1.0)), {'loss': 1.0})


class SharedReplayTest(tf.test.TestCase):
  """HistoryDownlink replays once per starting state and history."""

  def _downlink(self):
    initial = history.ReplayState(round_num=0, weights=_weights(0.0),
                                  optimizer_state=[np.zeros(3, np.float32)])
    replay = mock.Mock()
    replay.initial_state.return_value = initial
    replay.receive.side_effect = lambda state, link, payload: (
        history.ReplayState(round_num=link.round_num,
                            weights=_weights(float(link.round_num)),
                            optimizer_state=[np.ones(3, np.float32)]))
    link = object.__new__(downlink_lib.HistoryDownlink)
    link._replay = replay  # pylint: disable=protected-access
    link._replays = collections.OrderedDict()  # pylint: disable=protected-access
    return link, replay, initial

  def test_clients_from_the_initial_model_share_one_replay(self):
    link, replay, initial = self._downlink()
    receive = link._receive  # pylint: disable=protected-access
    fresh = history.Downlink(history.HISTORY, 50, 0, 1234, 100)
    returning = history.Downlink(history.HISTORY, 50, 0, None, 100)
    a = receive(None, fresh, ['log'])
    b = receive(None, fresh, ['log'])
    # A client last seen in round 0 holds the initial model: the same.
    c = receive(initial, returning, ['log'])
    self.assertIs(a, b)
    self.assertIs(a, c)
    self.assertEqual(replay.receive.call_count, 1)
    # Another history, another state, a full downlink: replayed.
    receive(None, history.Downlink(history.HISTORY, 49, 0, 1234, 90), ['l'])
    receive(a, history.Downlink(history.HISTORY, 60, 50, None, 10), ['l'])
    receive(None, history.Downlink(history.FULL, 60, 60, None, 10), ('w',))
    self.assertEqual(replay.receive.call_count, 4)


if __name__ == '__main__':
  tf.test.main()
