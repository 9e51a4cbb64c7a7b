"""The fast round path computes the reference path's model, bit for bit.

Reference: the clients' datasets built in Python and TFF's default client
loop (`DATASET_REDUCE`). Fast (what runs): the clients' tensors turned into
datasets inside the round, and the `DATASET_ITERATOR` loop. With the same
clients and example orders, both must give the same model after every round.
DP-FedAvg runs at noise 0 (its noise is fresh, and the fast path does not
touch the aggregator), DP-REC in its insecure test mode (deterministic seeds
and selections): the clipping, coding and decoding are then compared
exactly.
"""

import os

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import history as tff_history

from experiments.infra import compile_cache
from experiments.data import stackoverflow_arrays
from experiments.data import stackoverflow_data
from experiments.data import tasks
from experiments.data import stackoverflow_task
from experiments.runner import execution
from experiments.runner import registry
from experiments.runner import sampling
from experiments.studies import bench
from experiments.studies import throughput

_TINY = dict(seed=2, train_clients=12, heldout_clients=4, test_clients=4,
             num_words=300, num_tags=30, num_topics=5, mean_examples=30.0,
             std_examples=60.0, max_examples=300)


class _Aggregator:
  """What `execution.build_process` reads of a calibrated aggregator."""

  def __init__(self, factory, private):
    self.factory = factory
    self.private = self.private_setting = private


class FastPathIsBitIdenticalTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    data_dir = os.path.join(tf.compat.v1.test.get_temp_dir(), 'so_fast')
    stackoverflow_data.generate(data_dir, _TINY)
    cls.task = tasks.create_task('stackoverflow_lr', data_dir,
                                 embedded_config=_TINY, population='stored')
    # Clients with more examples than a batch: several local steps.
    sizes = np.diff(cls.task.arrays['train'].example_offsets)
    order = np.argsort(-sizes)
    ids = [cls.task.arrays['train'].client_ids[i] for i in order]
    cls.rounds = [ids[:3], ids[2:5]]
    assert sizes[order[0]] > cls.task.defaults.batch_size

  def _models(self, aggregator, path):
    task = self.task
    optimizer = tff.learning.optimizers.build_sgdm(0.5, momentum=0.9)
    if path == 'fast':
      process = task.learning_process(
          execution.build_process(task, aggregator, 0.3, optimizer))
      make_input = task.round_input
    else:
      process = execution.build_process(
          task, aggregator, 0.3, optimizer,
          loop_implementation=tff.learning.LoopImplementation.DATASET_REDUCE)
      make_input = stackoverflow_arrays.ClientDatasets(
          task.client_data.source, task.defaults.batch_size,
          stackoverflow_task.TRAIN_MAX_ELEMENTS)
    # Both start from the same model (TFF's initializer is unseeded).
    initial = tff_history.seeded_model_weights(task.baseline.model_fn, 4)
    state = process.set_model_weights(process.initialize(), initial)
    models = [initial.trainable]
    for round_num, ids in enumerate(self.rounds, start=1):
      state = process.next(
          state, make_input(ids, sampling.client_data_seed(0, round_num))
      ).state
      models.append(process.get_model_weights(state).trainable)
    return models

  def _assert_identical(self, aggregator):
    fast = self._models(aggregator, 'fast')
    reference = self._models(aggregator, 'reference')
    for f, r in zip(fast, reference):
      for a, b in zip(f, r):
        np.testing.assert_array_equal(a, b)
    # Every round trained: the model moved from the one before.
    for before, after in zip(fast, fast[1:]):
      self.assertGreater(np.abs(np.asarray(after[0]) -
                                np.asarray(before[0])).max(), 0.0)

  def test_fedavg(self):
    self._assert_identical(
        _Aggregator(tff.aggregators.UnweightedMeanFactory(), private=False))

  def test_dp_fedavg_clipping_without_noise(self):
    self._assert_identical(_Aggregator(
        tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
            noise_multiplier=0.0, clients_per_round=3, clip=0.05),
        private=True))

  def test_dp_rec_in_insecure_test_mode(self):
    value_type = tff.learning.models.weights_type_from_model(
        self.task.baseline.model_fn).trainable
    aggregator = registry.build(
        'dp_rec', value_type=value_type, population=self.task.population,
        clients_per_round=3, rounds=2, target_epsilon=8.0, delta=1e-3,
        bits=4, grouping='network', noise_stddev=0.05, l2_clip=None,
        insecure_test_seed=11)
    self._assert_identical(aggregator)


class BenchmarkTest(tf.test.TestCase):

  def test_rows_and_floors_on_tiny_data(self):
    data_dir = os.path.join(tf.compat.v1.test.get_temp_dir(), 'so_bench')
    stackoverflow_data.generate(data_dir, _TINY)
    lines = []
    cache_setting = os.environ.get(compile_cache.ENV)
    out = throughput.run(aggregators=('dp_rec',), rounds=2,
                         clients_per_round=3, data_dir=data_dir,
                         embedded_config=_TINY, print_fn=lines.append)
    self.assertEqual([(r['path'], r['aggregator']) for r in out['rows']],
                     [('reference', 'dp_rec'), ('fast', 'dp_rec')])
    for row in out['rows']:
      self.assertGreater(row['seconds_per_round'], 0.0)
      self.assertGreater(row['worker_cpu_ms_per_client'], 0.0)
    self.assertGreater(out['local_training_floor'], 0.0)
    self.assertGreater(out['encode_floor'], 0.0)
    self.assertTrue(any('overhead ratio' in line for line in lines))
    # The reference path compiles without the cache; the fast path's
    # initialize and next go through it (compiled, or found).
    reference, fast = out['rows']
    self.assertEqual((reference['compiled'], reference['compiled_from_cache']),
                     (0, 0))
    self.assertGreaterEqual(fast['compiled'] + fast['compiled_from_cache'], 2)
    self.assertEqual(os.environ.get(compile_cache.ENV), cache_setting)
    with self.assertRaisesRegex(ValueError, 'rounds=1'):
      throughput.run(rounds=1, data_dir=data_dir)
    with self.assertRaisesRegex(ValueError, "paths: unknown 'slow'"):
      throughput.run(paths=('slow',), data_dir=data_dir)

  def test_in_law_table_gives_the_ratios(self):
    steady = {(40, 'dp_fedavg'): 0.2, (40, 'dp_rec_in_law'): 0.25,
              (40, 'dp_rec'): 1.0, (640, 'dp_fedavg'): 2.0,
              (640, 'dp_rec_in_law'): 2.4, (640, 'dp_rec'): 12.0}
    lines = bench.in_law_table(steady).splitlines()
    self.assertEqual(lines[2], '| 40 | 0.200 | 0.250 | 1.000 | 1.25x | 4.0x |')
    self.assertEqual(lines[3],
                     '| 640 | 2.000 | 2.400 | 12.000 | 1.20x | 5.0x |')


if __name__ == '__main__':
  tf.test.main()
