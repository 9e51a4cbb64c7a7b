"""End-to-end tests of the experiments: data, tasks, aggregators, CLI."""

import collections
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.studies import audit
from experiments.infra import compile_cache
from experiments.runner import config as config_lib
from experiments.runner import execution
from experiments.runner import planning
from experiments.runner import registry
from experiments.runner import report
from experiments.runner import sampling
from experiments.data import stackoverflow_data
from experiments.data import tasks
from experiments.runner import training
from tests import support
from tff_dprec.accounting import baselines

_TINY = dict(seed=3, train_clients=40, heldout_clients=5, test_clients=15,
             num_words=300, num_tags=30, num_topics=6, mean_examples=12.0,
             std_examples=30.0, max_examples=200)
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class StackOverflowDataTest(tf.test.TestCase):

  def test_round_trips_through_tff_loader(self):
    data_dir = self.create_tempdir().full_path
    stamp = stackoverflow_data.generate(data_dir, _TINY)
    train, heldout, test = tff.simulation.datasets.stackoverflow.load_data(
        cache_dir=data_dir)
    self.assertLen(train.client_ids, 40)
    self.assertLen(heldout.client_ids, 5)
    self.assertLen(test.client_ids, 15)
    num_examples = sum(
        int(train.create_tf_dataset_for_client(c).reduce(0, lambda n, _: n + 1))
        for c in train.client_ids)
    self.assertEqual(num_examples, stamp['stats']['train_examples'])
    example = next(iter(train.create_tf_dataset_for_client(
        train.client_ids[0])))
    self.assertCountEqual(
        example.keys(),
        ['creation_date', 'score', 'tags', 'title', 'tokens', 'type'])
    tags = example['tags'].numpy().decode().split('|')
    self.assertTrue(all(t.startswith('tag') for t in tags))
    with open(os.path.join(data_dir, 'datasets',
                           stackoverflow_data.WORD_COUNT_NAME)) as f:
      counts = [int(line.split()[1]) for line in f]
    self.assertEqual(counts, sorted(counts, reverse=True))
    self.assertLessEqual(max(counts), 40)  # distinct training users

  def test_deterministic_and_cached(self):
    a = self.create_tempdir().full_path
    b = self.create_tempdir().full_path
    stackoverflow_data.generate(a, _TINY)
    stackoverflow_data.generate(b, _TINY)
    ta = tff.simulation.datasets.stackoverflow.load_data(cache_dir=a)[0]
    tb = tff.simulation.datasets.stackoverflow.load_data(cache_dir=b)[0]
    first = lambda d: next(iter(d.create_tf_dataset_for_client(  # pylint: disable=g-long-lambda
        d.client_ids[7])))['tokens'].numpy()
    self.assertEqual(first(ta), first(tb))
    mtime = os.path.getmtime(os.path.join(a, stackoverflow_data.SQLITE_NAME))
    stackoverflow_data.generate(a, _TINY)  # Same config: not rewritten.
    self.assertEqual(
        mtime, os.path.getmtime(os.path.join(a, stackoverflow_data.SQLITE_NAME)))

  def test_heavy_tailed_client_sizes(self):
    data_dir = self.create_tempdir().full_path
    stamp = stackoverflow_data.generate(
        data_dir, dict(_TINY, train_clients=300, test_clients=2,
                       heldout_clients=2))
    stats = stamp['stats']
    # Log-normal sizes: the spread exceeds the mean, like the real data.
    self.assertGreater(stats['std_examples_per_client'],
                       stats['mean_examples_per_client'])

  def test_unknown_setting(self):
    with self.assertRaisesRegex(ValueError, 'Unknown embedded-data setting'):
      stackoverflow_data.generate(self.create_tempdir().full_path,
                                  dict(clients=3))


class DirichletSplitTest(tf.test.TestCase):

  def test_partition(self):
    labels = np.repeat(np.arange(10), 50)
    parts = tasks.dirichlet_split(labels, 20, 1.0, seed=0)
    self.assertLen(parts, 20)
    joined = np.sort(np.concatenate(parts))
    np.testing.assert_array_equal(joined, np.arange(500))
    self.assertTrue(all(len(p) > 0 for p in parts))


class EvaluationTest(tf.test.TestCase):

  def test_the_reused_model_evaluates_as_a_fresh_one(self):
    # `evaluate` keeps one model and traced forward pass per task. After TFF
    # has built and run a process (graphs traced from other models), and for
    # weights that differ, it must still equal a fresh model's evaluation.
    task = tasks.create_task('digits', self.create_tempdir().full_path)

    def fresh(weights):
      model = task.baseline.model_fn()
      weights.assign_weights_to(model)
      metric = tf.keras.metrics.SparseCategoricalAccuracy()
      loss_sum, count = 0.0, 0
      for x, y in task.baseline.datasets.get_centralized_test_data():
        output = model.forward_pass((x, y), training=False)
        loss_sum += float(output.loss) * int(output.num_examples)
        count += int(output.num_examples)
        metric.update_state(y, output.predictions)
      return {'accuracy': float(metric.result()),
              'loss': loss_sum / count, 'num_examples': count}

    initial = tff.learning.models.ModelWeights.from_model(
        task.baseline.model_fn())
    before = tasks.evaluate(task, initial)
    process = tff.learning.algorithms.build_weighted_fed_avg(
        task.baseline.model_fn,
        client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.5))
    state = process.initialize()
    data = task.baseline.datasets
    clients = [data.train_data.create_tf_dataset_for_client(c).apply(
        data.train_preprocess_fn) for c in data.train_data.client_ids[:4]]
    state = process.next(state, clients).state
    trained = process.get_model_weights(state)
    after = tasks.evaluate(task, trained)
    self.assertNotEqual(after['loss'], before['loss'])
    for got, weights in ((after, trained),
                         (tasks.evaluate(task, initial), initial)):
      want = fresh(weights)
      self.assertEqual(got['num_examples'], want['num_examples'])
      self.assertAllClose(got, want, rtol=1e-6, atol=0)
    self.assertEqual(tasks.evaluate(task, initial), before)


class DigitsSplitTest(tf.test.TestCase):

  def test_clients_validation_and_test_partition_the_dataset(self):
    from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top
    task = tasks.create_task('digits', self.create_tempdir().full_path)
    data = task.baseline.datasets

    def rows(dataset):
      return [(e['x'].tobytes(), int(e['y']))
              for e in dataset.as_numpy_iterator()]

    train = [r for client in data.train_data.client_ids
             for r in rows(data.train_data.create_tf_dataset_for_client(
                 client))]
    validation = rows(
        data.validation_data.create_tf_dataset_from_all_clients())
    test = rows(data.test_data)
    self.assertLen(data.train_data.client_ids, 100)
    self.assertEqual((len(train), len(validation), len(test)),
                     (1257, 180, 360))
    digits = sk_datasets.load_digits()
    everything = [
        ((x.astype(np.float32) / 16.0)[..., None].tobytes(), int(y))
        for x, y in zip(digits.images, digits.target)]
    self.assertCountEqual(train + validation + test, everything)
    weights = tff.learning.models.ModelWeights.from_model(
        task.baseline.model_fn())
    self.assertEqual(
        tasks.evaluate(task, weights, split='validation')['num_examples'],
        180)

  def test_tasks_of_one_key_share_their_dataset_computation(self):
    data_dir = self.create_tempdir().full_path
    first, again = (tasks.create_task('digits', data_dir) for _ in range(2))
    other = tasks.create_task('digits', data_dir, seed=1)
    self.assertIs(again.dataset_computation, first.dataset_computation)
    self.assertIsNot(other.dataset_computation, first.dataset_computation)
    # The shared one gives the clients' datasets that the second task's own
    # computation gives (batches, order and all).
    data = again.baseline.datasets
    own = data.train_data.preprocess(
        data.train_preprocess_fn).dataset_computation
    for client in ('client_000', 'client_042', 'client_099'):
      shared = list(first.dataset_computation(client).as_numpy_iterator())
      want = list(own(client).as_numpy_iterator())
      self.assertNotEmpty(want)
      self.assertLen(shared, len(want))
      for (x, y), (want_x, want_y) in zip(shared, want):
        self.assertAllEqual(x, want_x)
        self.assertAllEqual(y, want_y)
    self.assertIsNone(tasks.create_task(
        'stackoverflow_lr', data_dir, embedded_config=_TINY).dataset_key)


class ClientSamplingTest(tf.test.TestCase):
  """Each aggregator's sampler is the scheme its accountant assumes."""

  def test_each_aggregator_names_its_scheme(self):
    self.assertEqual(registry.get('dp_rec').sampling, registry.WITH_REPLACEMENT)
    self.assertEqual(registry.get('dp_fedavg').sampling, registry.POISSON)
    self.assertEqual(registry.get('ddgauss16').sampling, registry.FIXED_SIZE)

  def test_poisson_includes_each_client_with_probability_b_over_n(self):
    rng = np.random.default_rng(3)
    ids = [f'c{i}' for i in range(50)]
    rounds, b = 4000, 5
    counts = collections.Counter()
    sizes = []
    for _ in range(rounds):
      sample = sampling.sample_clients(rng, ids, b, registry.POISSON)
      self.assertLen(set(sample), len(sample))  # No client twice.
      sizes.append(len(sample))
      counts.update(sample)
    q = b / len(ids)
    # Round sizes: Binomial(50, 0.1), mean 5, variance 4.5.
    self.assertAllClose(np.mean(sizes), b,
                        atol=4 * np.sqrt(len(ids) * q * (1 - q) / rounds))
    self.assertAllClose(np.var(sizes), len(ids) * q * (1 - q), rtol=0.1)
    # Empty rounds happen (0.9^50 = 0.5%: about 21 of 4000).
    self.assertBetween(sizes.count(0), 1, 60)
    # Each client: Binomial(4000, 0.1) inclusions, sd 19.
    for i in ids:
      self.assertAllClose(counts[i], rounds * q,
                          atol=5 * np.sqrt(rounds * q * (1 - q)))

  def test_fixed_size_and_with_replacement(self):
    rng = np.random.default_rng(4)
    ids = [f'c{i}' for i in range(6)]
    for _ in range(50):
      fixed = sampling.sample_clients(rng, ids, 6, registry.FIXED_SIZE)
      self.assertCountEqual(fixed, ids)
    repeats = [len(set(sampling.sample_clients(
        rng, ids, 6, registry.WITH_REPLACEMENT))) < 6 for _ in range(50)]
    self.assertGreater(sum(repeats), 40)  # P(no repeat) = 6!/6^6 = 0.015.

  def test_unknown_scheme(self):
    with self.assertRaisesRegex(ValueError, "sampling must be.*'bogus'"):
      sampling.sample_clients(np.random.default_rng(0), ['a'], 1, 'bogus')


class MissingDataTest(parameterized.TestCase):

  @parameterized.parameters(('mnist', 'mnist.npz'),
                            ('emnist', 'emnist_all.sqlite'),
                            ('shakespeare', 'shakespeare.sqlite'))
  def test_clear_error(self, task, filename):
    with self.assertRaisesRegex(tasks.MissingDataError, filename):
      tasks.create_task(task, '/nonexistent/dir')


def _check_outputs(test, task_dir, records, rounds, target_epsilon):
  summary = json.load(open(os.path.join(task_dir, 'summary.json')))
  test.assertEqual([(r['aggregator'], r['seed']) for r in summary],
                   [(r['aggregator'], r['seed']) for r in records])
  for record in summary:
    test.assertEqual(record['rounds'], rounds)
    test.assertBetween(record['final_metric'], 0.0, 1.0)
    if record['aggregator'] in registry.private_names():
      test.assertLessEqual(record['epsilon'], target_epsilon)
      test.assertGreater(record['epsilon'], 0.0)
    else:
      test.assertIsNone(record['epsilon'])
    test.assertGreater(record['upload_bits_total'], 0)
    with open(os.path.join(task_dir, record['aggregator'],
                           f"seed{record['seed']}", 'metrics.csv')) as f:
      rows = list(csv.DictReader(f))
    test.assertLen(rows, rounds)
    test.assertEqual([int(r['round']) for r in rows],
                     list(range(1, rounds + 1)))
  table = open(os.path.join(task_dir, 'table.md')).read()
  for record in records:
    test.assertIn(f"| {report.display_name(record['aggregator'])} |", table)
  for name in ('metric_vs_round.png', 'metric_vs_communication.png',
               'epsilon_vs_round.png'):
    test.assertGreater(os.path.getsize(os.path.join(task_dir, name)), 1000)


class MainJobPipelineTest(tf.test.TestCase):
  """The main job's pipeline (`make run`) at a tiny size."""

  def test_seeds_baselines_table_curves_and_tensorboard(self):
    data_dir = self.create_tempdir().full_path
    output_dir = self.create_tempdir().full_path
    names = _MAIN_JOB
    records = training.run_experiment(
        task_name='stackoverflow_lr', aggregators=names, data_dir=data_dir,
        output_dir=output_dir, rounds=3, clients_per_round=4, num_seeds=2,
        seed=5, target_epsilon=8.0, eval_every=2, progress=False, bits=4,
        embedded_config=_TINY, print_fn=lambda *a: None)
    task_dir = os.path.join(output_dir, 'stackoverflow_lr')
    self.assertEqual([(r['aggregator'], r['seed']) for r in records],
                     [(n, s) for n in names for s in (5, 6)])
    _check_outputs(self, task_dir, records, 3, 8.0)
    self._check_read_back(data_dir, output_dir, names, records)
    self._check_paired_seeds(task_dir, records, names)
    self._check_table(task_dir, data_dir, names)
    self._check_curves_and_tensorboard(task_dir, names)
    self._check_traffic(records)

  def _check_traffic(self, records):
    """DP-REC's upload is its messages, its downlink their history."""
    by_name = {r['aggregator']: r for r in records if r['seed'] == 5}
    rec = by_name['dp_rec']
    self.assertEqual(rec['data_source'], 'embedded')
    # The 64-bit seed plus the index bits per client.
    self.assertEqual(rec['upload_bits_per_client_round'],
                     64 + rec['params']['total_bits'])
    self.assertLess(rec['upload_bits_total'],
                    by_name['dp_fedavg']['upload_bits_total'] / 100)
    # R' for newcomers and the missed rounds' messages, against the model.
    self.assertEqual(rec['downlink'], 'history')
    self.assertLess(rec['download_bits_total'],
                    by_name['dp_fedavg']['download_bits_total'] / 100)
    for name in ('dp_fedavg', 'fedavg'):
      self.assertEqual(by_name[name]['downlink'], 'full')

  def _check_read_back(self, data_dir, output_dir, names, records):
    """`finished_records` reads the runs back, trains and writes nothing."""
    # Read back without training: the finished runs of the same setting
    # (seed 7 never ran), none under another one.
    config = config_lib.RunConfig(
        task='stackoverflow_lr', aggregators=tuple(names), data_dir=data_dir,
        output_dir=output_dir, rounds=3, clients_per_round=4, num_seeds=3,
        seed=5, target_epsilon=8.0, eval_every=2, progress=False, bits=4,
        embedded_config=_TINY)
    self.assertEqual(
        [(r['aggregator'], r['seed'], r['final_metric'])
         for r in training.finished_records(config)],
        [(r['aggregator'], r['seed'], r['final_metric']) for r in records])
    self.assertEqual(training.finished_records(config_lib.RunConfig(
        **{**config.asdict(), 'rounds': 4})), [])
    elsewhere = os.path.join(output_dir, 'never_trained')
    self.assertEqual(training.finished_records(config_lib.RunConfig(
        **{**config.asdict(), 'output_dir': elsewhere})), [])
    self.assertFalse(os.path.exists(elsewhere))  # Nothing written.

  def _check_paired_seeds(self, task_dir, records, names):
    """Seeds differ; the aggregators of one seed share its initial model."""
    # The two seeds are different runs: the initial model differs between
    # seeds and is shared by every aggregator of a seed (paired runs).
    # Private runs draw fresh noise, so only FedAvg's final metric is a
    # function of the seed alone.
    initial = {}
    for r in records:
      with open(os.path.join(task_dir, r['aggregator'], f"seed{r['seed']}",
                             'record.json')) as f:
        curve = json.load(f)['curve']
      self.assertEqual(curve[0]['round'], 0)
      initial[r['aggregator'], r['seed']] = curve[0]['metric']
    for name in names:
      self.assertEqual(initial[name, 5], initial['fedavg', 5])
      self.assertEqual(initial[name, 6], initial['fedavg', 6])
    self.assertNotEqual(initial['fedavg', 5], initial['fedavg', 6])
    a, b = (r for r in records if r['aggregator'] == 'fedavg')
    self.assertNotEqual(a['final_metric'], b['final_metric'])

  def _check_table(self, task_dir, data_dir, names):
    """table.md: mean +- SE per aggregator and the baselines; table.csv."""
    table = open(os.path.join(task_dir, 'table.md')).read()
    for name in names:
      row = next(line for line in table.splitlines()
                 if line.startswith(f'| {name} |'))
      self.assertRegex(row, r'\| \d+\.\d\d ± \d+\.\d\d \|')
    task = tasks.create_task('stackoverflow_lr', data_dir,
                             embedded_config=_TINY)
    frequent = tasks.frequent_tags_recall_at_5(task)
    self.assertIn(f'| frequent tags (5 most frequent) | {100 * frequent:.2f}',
                  table)
    self.assertIn('| initial model |', table)
    with open(os.path.join(task_dir, 'table.csv')) as f:
      rows = list(csv.DictReader(f))
    self.assertEqual([r['aggregator'] for r in rows], names)
    self.assertEqual({r['n_seeds'] for r in rows}, {'2'})

  def _check_curves_and_tensorboard(self, task_dir, names):
    """curves.csv at rounds 0, 2 and 3; TensorBoard folders."""
    # Learning curves: rounds 0 (initial model), 2 (eval_every) and 3
    # (final) for every aggregator and seed, cumulative bits growing.
    with open(os.path.join(task_dir, 'curves.csv')) as f:
      points = list(csv.DictReader(f))
    for name in names:
      for seed in ('5', '6'):
        mine = [p for p in points
                if p['aggregator'] == name and p['seed'] == seed]
        self.assertEqual([int(p['round']) for p in mine], [0, 2, 3])
        bits = [int(p['upload_bits']) + int(p['download_bits'])
                for p in mine]
        self.assertEqual(bits[0], 0)
        self.assertLess(bits[1], bits[2])
        if name != 'fedavg':
          self.assertLessEqual(float(mine[-1]['epsilon']), 8.0)
    # The initial model's point is the same model for every aggregator.
    initial = {p['metric'] for p in points
               if p['round'] == '0' and p['seed'] == '5'}
    self.assertLen(initial, 1)
    # TensorBoard event files, one folder per aggregator and seed.
    for name in names:
      for seed in (5, 6):
        folder = os.path.join(task_dir, 'tensorboard', name, f'seed{seed}')
        self.assertTrue(any('tfevents' in f for f in os.listdir(folder)),
                        folder)

# Every aggregator runs on one of the two tasks, and one of the no-noise
# controls (they share one builder; tests/controls_test.py covers each).
# StackOverflow takes those its checks compare; digits (a model of several
# tensors, so several DP-REC groups) takes DP-REC and the rest.
# MainJobPipelineTest trains these on SO-LR; SmokeTest the others on digits.
_MAIN_JOB = ['dp_rec', 'dp_fedavg', 'fedavg']
_SMOKE_DIGITS = ['dp_rec'] + [
    n for n in registry.names()
    if registry.control_of(n) is None and n not in _MAIN_JOB
] + ['dp_rec_no_noise']


class SmokeTest(tf.test.TestCase):
  """A few rounds of every aggregator on tiny data (MainJobPipelineTest
  trains the main job's on SO-LR)."""

  def test_full_downlink_for_dp_rec(self):
    output_dir = self.create_tempdir().full_path
    records = training.run_experiment(
        task_name='digits', aggregators=['dp_rec'],
        data_dir=self.create_tempdir().full_path, output_dir=output_dir,
        rounds=2, clients_per_round=4, target_epsilon=8.0, eval_every=10,
        progress=False, downlink='full', print_fn=lambda *a: None)
    record = records[0]
    self.assertEqual(record['downlink'], 'full')
    self.assertEqual(record['download_bits_total'],
                     2 * 4 * record['download_bits_per_client_round'])
    self.assertNotIn('replay_checks', record)

  def test_bad_downlink_arguments(self):
    for kwargs, message in ((dict(downlink='broadcast'), 'downlink'),
                            (dict(verify_clients=-1), 'verify_clients')):
      with self.assertRaisesRegex(ValueError, message):
        training.run_experiment(
            task_name='digits', aggregators=['dp_rec'], data_dir='/tmp',
            output_dir=self.create_tempdir().full_path, print_fn=print,
            **kwargs)

  def test_digits_the_other_aggregators(self):
    output_dir = self.create_tempdir().full_path
    records = training.run_experiment(
        task_name='digits', aggregators=_SMOKE_DIGITS,
        data_dir=self.create_tempdir().full_path, output_dir=output_dir,
        rounds=3, clients_per_round=4, target_epsilon=8.0, eval_every=1,
        progress=False, verify_clients=2, print_fn=lambda *a: None)
    _check_outputs(self, os.path.join(output_dir, 'digits'), records, 3, 8.0)
    by_name = {r['aggregator']: r for r in records}
    # REC-based aggregators send histories; the replayed clients' models
    # equal the server's bit for bit.
    for name in ('dp_rec', 'rec'):
      record = by_name[name]
      self.assertEqual(record['downlink'], 'history')
      self.assertEqual(record['replay_mismatches'], 0)
      self.assertGreaterEqual(record['replay_checks'], 2)
      self.assertEqual(record['replay_max_abs_diff'], 0.0)
      self.assertEqual(record['full_downlinks'], 0)
    for name in ('ddgauss16', 'dp_fedavg_rdp'):
      self.assertEqual(by_name[name]['downlink'], 'full')
    self._check_history_bits(output_dir, by_name['dp_rec'])

  def _check_history_bits(self, output_dir, record):
    """Each round's download bits come from the messages sent."""
    message = record['upload_bits_per_client_round']
    with open(os.path.join(output_dir, 'digits', 'dp_rec', 'seed0',
                           'metrics.csv')) as f:
      rows = list(csv.DictReader(f))
    downloads = [int(r['download_bits']) for r in rows]
    # Round 1: each distinct client gets R' (64 bits) only.
    self.assertEqual(downloads[0] % 64, 0)
    self.assertBetween(downloads[0], 64, 4 * 64)
    # Later rounds: R' for newcomers, plus a 32-bit count and 4 messages per
    # missed round.
    for t, bits in enumerate(downloads[1:], start=1):
      rest = bits % (32 + 4 * message)
      self.assertEqual(rest % 64, 0, f'round {t + 1}: {bits}')
      self.assertGreater(bits, 0)
    self.assertEqual(sum(downloads), record['download_bits_total'])

  def test_embedded_stackoverflow_is_learnable(self):
    # FedAvg beats always predicting the most frequent tags, clearly.
    data_dir = self.create_tempdir().full_path
    config = dict(_TINY, train_clients=150, num_words=400, mean_examples=30.0,
                  test_clients=30)
    records = training.run_experiment(
        task_name='stackoverflow_lr', aggregators=['fedavg'],
        data_dir=data_dir, output_dir=self.create_tempdir().full_path,
        rounds=15, clients_per_round=20, eval_every=100, progress=False,
        embedded_config=config, print_fn=lambda *a: None)
    task = tasks.create_task('stackoverflow_lr', data_dir,
                             embedded_config=config)
    frequent = tasks.frequent_tags_recall_at_5(task)
    self.assertGreater(records[0]['final_metric'], frequent + 0.1)


class DDGaussAccountingMatchesTffTest(tf.test.TestCase):

  def test_parameters_equal_what_tff_runs(self):
    # The accountant's DDGauss parameters must be those of the aggregator that
    # actually runs: compare with TFF's own round measurements.
    from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
    execution.allow_oversize_protos()
    tff.backends.test.set_sync_test_cpp_execution_context()
    try:
      value_type = tff.to_type([tff.TensorType(np.float32, [30, 10]),
                                tff.TensorType(np.float32, [10])])
      plan = registry.build(
          'ddgauss16', value_type=value_type, population=500,
          clients_per_round=5, rounds=20, target_epsilon=4.0, delta=1e-4,
          bits=7, grouping='tensor', noise_stddev=0.1, l2_clip=0.3)
      process = plan.factory.create(value_type)
      values = [[np.full((30, 10), 0.01, np.float32),
                 np.full(10, 0.01, np.float32)] for _ in range(5)]
      measured = process.next(process.initialize(),
                              values).measurements['mean_value']
    finally:
      tff.backends.native.set_sync_local_cpp_execution_context()
    params = baselines.ddgauss_params(
        noise_multiplier=plan.params['noise_multiplier'], l2_clip=0.3,
        bits=16, clients_per_round=5, dimension=310)
    self.assertEqual(int(measured['padded_dim']), params.padded_dim)
    self.assertAllClose(measured['scale_factor'], params.scale, rtol=1e-5)
    self.assertAllClose(measured['scaled_local_stddev'],
                        params.scaled_local_stddev, rtol=1e-5)
    self.assertAllClose(measured['scaled_inflated_l2'],
                        params.l2_sensitivity, rtol=1e-4)


class AuditTest(tf.test.TestCase):

  def test_lower_bound_detects_leakage_but_stays_below_accountant(self):
    result = audit.run_audit(clip_ratio=2.0, trials=3000, seed=1)
    # A grouped release: 4 groups of 7 bits.
    self.assertEqual(result['total_bits'], 4 * 7)
    # A clipped update at c = 2 is clearly distinguishable from zero...
    self.assertGreater(result['empirical_epsilon_lower_bound'], 1.0)
    # ...but never beyond what the sound accountant allows.
    self.assertLess(result['empirical_epsilon_lower_bound'],
                    result['accountant_epsilon'])

  def test_no_signal_gives_no_leakage(self):
    # c = 0: both inputs are zero, so the bound is 0 up to the 95% level.
    result = audit.run_audit(clip_ratio=0.0, trials=3000, seed=2)
    self.assertLess(result['empirical_epsilon_lower_bound'], 0.3)


def _count_lines(path):
  if not os.path.exists(path):
    return 0
  with open(path) as f:
    return sum(1 for _ in f)


def _run_cli(args, env_extra=None, timeout=600):
  return support.run_cli(args, env_extra, timeout)


def _summary(output_dir, task='digits'):
  with open(os.path.join(output_dir, task, 'summary.json')) as f:
    return {r['aggregator']: r for r in json.load(f)}


def _corrupt(checkpoint):
  """Flips bytes in the middle of every data file of a checkpoint."""
  data_files = [os.path.join(root, f) for root, _, files in os.walk(checkpoint)
                for f in files]
  assert data_files, checkpoint
  for path in data_files:
    with open(path, 'r+b') as f:
      size = os.path.getsize(path)
      f.seek(size // 2)
      chunk = f.read(16)
      f.seek(size // 2)
      f.write(bytes(b ^ 0xFF for b in chunk))


_COMPARED = ('final_metric', 'final_metrics', 'epsilon', 'rounds',
             'upload_bits_total', 'download_bits_total', 'lost_rounds')


class PrivacyOfTheTrainingProcessTest(tf.test.TestCase):

  def test_dp_rec_process_moves_only_integer_messages(self):
    task = tasks.create_task('digits', self.create_tempdir().full_path)
    value_type = tff.learning.models.weights_type_from_model(
        task.baseline.model_fn).trainable
    for record_messages in (False, True):
      plan = registry.build(
          'dp_rec', value_type=value_type, population=task.population,
          clients_per_round=5, rounds=3, target_epsilon=8.0, delta=1e-3,
          bits=7, grouping='tensor', noise_stddev=0.02, l2_clip=0.5,
          record_messages=record_messages)
      process = execution.build_process(
          task, plan, 0.05, tff.learning.optimizers.build_sgdm(1.0))
      moved = support.clients_to_server_value_types(process.next)
      self.assertNotEmpty(moved)
      for _, moved_type in moved:
        for dtype in support.tensor_dtypes(moved_type.member):
          self.assertTrue(np.issubdtype(dtype, np.integer),
                          msg=str(moved_type))
    # FedAvg (not private) keeps TFF's client metrics: floats move.
    fedavg = registry.build(
        'fedavg', value_type=value_type, population=task.population,
        clients_per_round=5, rounds=3, target_epsilon=8.0, delta=1e-3,
        bits=7, grouping='tensor', noise_stddev=0.02, l2_clip=0.5)
    process = execution.build_process(
        task, fedavg, 0.05, tff.learning.optimizers.build_sgdm(1.0))
    dtypes = [d for _, t in support.clients_to_server_value_types(
        process.next) for d in support.tensor_dtypes(t.member)]
    self.assertTrue(any(np.issubdtype(d, np.floating) for d in dtypes))


  def test_fixed_build_seed_reaches_no_random_op(self):
    # execution.build_process fixes Python's `random` while TFF traces (for
    # Keras's initializer seeds). Every stateful random op of the private
    # processes must still seed itself at run time (seed = seed2 = 0), so
    # that no noise is a constant of the build.
    task = tasks.create_task('digits', self.create_tempdir().full_path)
    value_type = tff.learning.models.weights_type_from_model(
        task.baseline.model_fn).trainable
    execution.allow_oversize_protos()
    for name in ('dp_rec', 'dp_fedavg', 'ddgauss16'):
      plan = registry.build(
          name, value_type=value_type, population=task.population,
          clients_per_round=5, rounds=3, target_epsilon=8.0, delta=1e-3,
          bits=7, grouping='tensor', noise_stddev=0.02, l2_clip=0.5)
      process = execution.build_process(
          task, plan, 0.05, tff.learning.optimizers.build_sgdm(1.0))
      ops = _stateful_random_ops(
          tff.framework.ConcreteComputation.get_proto(process.next))
      # DDGauss's noise is drawn by stateless samplers whose seeds come from
      # stateful ops (tfp's sanitize_seed); its rounding's seeds come from
      # a timestamp.
      self.assertNotEmpty(ops, name)
      for op, seeds in ops:
        self.assertEqual(seeds, (0, 0), f'{name}: {op}')


_STATEFUL_RANDOM_OPS = frozenset({
    'RandomStandardNormal', 'RandomUniform', 'RandomUniformInt',
    'TruncatedNormal', 'RandomShuffle', 'Multinomial', 'RandomGamma',
    'RandomPoisson', 'RandomPoissonV2', 'ParameterizedTruncatedNormal'})


def _stateful_random_ops(proto):
  """[(op name, (seed, seed2))] of every TF graph in a computation proto."""
  found = []

  def visit(message):
    if message.DESCRIPTOR.full_name == 'tensorflow_federated.v0.TensorFlow':
      graph = tf.compat.v1.GraphDef()
      message.graph_def.Unpack(graph)
      nodes = list(graph.node) + [n for f in graph.library.function
                                  for n in f.node_def]
      found.extend((n.name, (n.attr['seed'].i, n.attr['seed2'].i))
                   for n in nodes if n.op in _STATEFUL_RANDOM_OPS)
      return
    for field, value in message.ListFields():
      if field.type != field.TYPE_MESSAGE:
        continue
      for item in (value if field.label == field.LABEL_REPEATED else
                   [value]):
        visit(item)

  visit(proto)
  return found


class FixedNoiseMultiplierTest(tf.test.TestCase):
  """DP-FedAvg at a given noise multiplier (the local-DP comparison)."""

  _SETTING = dict(value_type=tff.to_type([tff.TensorType(np.float32, [3])]),
                  population=100, clients_per_round=10, rounds=5, delta=1e-3,
                  bits=7, grouping='tensor', noise_stddev=0.1, l2_clip=0.3)

  def test_given_noise_is_used_and_its_epsilon_reported(self):
    from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
    plan = registry.build('dp_fedavg', target_epsilon=50.0, noise_multiplier=0.9,
                      **self._SETTING)
    self.assertEqual(plan.params['noise_multiplier'], 0.9)
    self.assertEqual(plan.epsilon_after(5), accounting.dp_fedavg_epsilon(
        noise_multiplier=0.9, population=100, clients_per_round=10, rounds=5,
        delta=1e-3))
    calibrated = registry.build('dp_fedavg', target_epsilon=50.0,
                            **self._SETTING)
    self.assertLess(calibrated.params['noise_multiplier'], 0.9)

  def test_noise_above_the_budget_is_refused(self):
    with self.assertRaisesRegex(registry.OverBudgetError,
                                r'noise_multiplier=0.5 gives epsilon=.*'
                                r'above target_epsilon=1.0'):
      registry.build('dp_fedavg', target_epsilon=1.0, noise_multiplier=0.5,
                 **self._SETTING)

  def test_clip_ratios_outside_the_idealisation_are_warned(self):
    self.assertIsNone(registry.idealisation_warning(dict(clip_ratio=3.99)))
    self.assertIsNone(registry.idealisation_warning(dict(noise_multiplier=1)))
    self.assertRegex(registry.idealisation_warning(dict(clip_ratio=4.0)),
                     r'WARNING: clip ratio 4.000 >= 4: outside the '
                     r'idealisation .* docs/PRIVACY.md section 7')

  def test_given_clip_ratio_is_used_and_checked(self):
    plan = registry.build('dp_rec', target_epsilon=50.0, clip_ratio=0.8,
                      **self._SETTING)
    self.assertEqual(plan.params['clip_ratio'], 0.8)
    self.assertAllClose(plan.params['l2_clip'], 0.08)
    self.assertLessEqual(plan.epsilon_after(5), 50.0)
    with self.assertRaisesRegex(ValueError, r'clip_ratio=3.0 gives epsilon='
                                r'.* above target_epsilon=1.0'):
      registry.build('dp_rec', target_epsilon=1.0, clip_ratio=3.0,
                 **self._SETTING)

  def test_config_refuses_it_without_dp_fedavg(self):
    from experiments.runner import config as config_lib  # pylint: disable=g-import-not-at-top
    with self.assertRaisesRegex(ValueError,
                                r'noise_multiplier=1.5 applies to dp_fedavg'):
      config_lib.RunConfig(task='digits', aggregators=('dp_rec',),
                           noise_multiplier=1.5)
    with self.assertRaisesRegex(ValueError, 'noise_multiplier must be'):
      config_lib.RunConfig(task='digits', aggregators=('dp_fedavg',),
                           noise_multiplier=-1.0)
    with self.assertRaisesRegex(ValueError, r'clip_ratio must be in \[0.001, '
                                r'25.0\].*found 30.0'):
      config_lib.RunConfig(task='digits', aggregators=('dp_rec',),
                           clip_ratio=30.0)
    with self.assertRaisesRegex(ValueError, r'clip_ratio=0.5 applies to '
                                'dp_rec only'):
      config_lib.RunConfig(task='digits', aggregators=('dp_fedavg',),
                           clip_ratio=0.5)


class CheckpointEncodingTest(tf.test.TestCase):

  def test_exact_round_trip(self):
    from experiments.runner import checkpoints  # pylint: disable=g-import-not-at-top
    value = dict(
        rng=np.random.default_rng(5).bit_generator.state,
        arrays=[np.float32([1.5, np.nan, -0.0]), np.int64([[2**62, -3]])],
        keys={3: 'int key', 'c1': [1, 2.5, None]})
    decoded = checkpoints.decode(json.loads(json.dumps(
        checkpoints.encode(value))))
    self.assertEqual(decoded['rng'], value['rng'])
    self.assertEqual(decoded['keys'], value['keys'])
    for a, b in zip(decoded['arrays'], value['arrays']):
      self.assertEqual(a.dtype, b.dtype)
      self.assertEqual(a.tobytes(), b.tobytes())
    rng = np.random.default_rng()
    rng.bit_generator.state = decoded['rng']
    self.assertEqual(rng.integers(10**9),
                     np.random.default_rng(5).integers(10**9))


class RecordReuseTest(parameterized.TestCase):
  """A finished run's record is reused across machines' last bits only."""

  _C = 0.5496089266880293  # DP-REC's calibrated c of the Fashion-MNIST rows.

  def _config(self, **params):
    return dict(task='fashion_mnist', rounds=300, seed=0,
                params=dict(dict(clip_ratio=self._C, bits=4), **params))

  def _read(self, written, reading):
    from experiments.runner import checkpoints  # pylint: disable=g-import-not-at-top
    directory = self.create_tempdir().full_path
    printed = []
    checkpoints.RunCheckpointer(directory, written, print_fn=printed.append
                                ).write_record(
                                    {'params': written['params']}, [])
    record = checkpoints.RunCheckpointer(
        directory, reading, print_fn=printed.append).read_record()
    return record, printed

  def test_last_bits_of_a_calibration_reuse_the_record(self):
    # One ulp apart: the value this machine's FFTs calibrate and another's.
    other = float(np.nextafter(self._C, 0.0))
    record, printed = self._read(self._config(),
                                 self._config(clip_ratio=other))
    self.assertEqual(record['record']['params']['clip_ratio'], self._C)
    self.assertLen(printed, 1)
    self.assertIn('to a relative 1e-09', printed[0])
    self.assertIn(repr(other), printed[0])

  @parameterized.named_parameters(
      ('param_off_by_1e-7', dict(params=dict(clip_ratio=_C * (1 + 1e-7),
                                             bits=4))),
      ('other_bits', dict(params=dict(clip_ratio=_C, bits=5))),
      ('bits_as_float', dict(params=dict(clip_ratio=_C, bits=4.0))),
      ('extra_param', dict(params=dict(clip_ratio=_C, bits=4, l2_clip=0.1))),
      ('other_rounds', dict(rounds=301)),
      ('other_rounds_and_last_bits',
       dict(rounds=301, params=dict(clip_ratio=float(np.nextafter(_C, 1.0)),
                                    bits=4))),
  )
  def test_any_other_difference_retrains(self, change):
    record, printed = self._read(self._config(),
                                 dict(self._config(), **change))
    self.assertIsNone(record)
    self.assertEmpty(printed)

  def test_identical_config_reuses_silently(self):
    record, printed = self._read(self._config(), self._config())
    self.assertEqual(record['record']['params'], self._config()['params'])
    self.assertEmpty(printed)


class PrivacyLedgerTest(tf.test.TestCase):

  def _ledger(self, printed=None):
    from experiments.runner import ledger  # pylint: disable=g-import-not-at-top
    run_dir = self.create_tempdir().full_path
    kwargs = {} if printed is None else dict(print_fn=printed.append)
    return ledger, run_dir, ledger.PrivacyLedger(run_dir, 'f', **kwargs)

  def test_noresume_archives_the_ledger(self):
    printed = []
    ledger, run_dir, book = self._ledger(printed)
    book.record_start(ledger.LedgerEntry(started=4, lost=1))
    archived = book.archive()
    self.assertIsNone(book.read())
    self.assertStartsWith(os.path.basename(archived),
                          'privacy_ledger.archived-')
    with open(archived) as f:
      self.assertEqual(json.load(f)['started'], 4)
    self.assertIn(archived, printed[-1])

  def test_ledger_of_wrong_shape_is_refused(self):
    ledger, run_dir, book = self._ledger()
    for content in ('{"started": "3", "lost": 0}', '{"started": -1}',
                    '{"started": true, "lost": 0}', '', '\x00\x01',
                    '{"lost": 0}', '[1]'):
      with open(os.path.join(run_dir, 'privacy_ledger.json'), 'w') as f:
        f.write(content)
      with self.assertRaisesRegex(ledger.PrivacyLedgerError,
                                  'privacy_ledger.json'):
        book.read()
    with open(os.path.join(run_dir, 'privacy_ledger.json'), 'wb') as f:
      f.write('\udcff\x00garbage'.encode('utf-8', 'surrogateescape'))
    with self.assertRaisesRegex(ledger.PrivacyLedgerError, 'cannot be read'):
      book.read()

  def test_foreign_ledger_is_refused(self):
    ledger, run_dir, book = self._ledger()
    book.record_start(ledger.LedgerEntry(started=2))
    other = ledger.PrivacyLedger(run_dir, 'g')
    with self.assertRaisesRegex(ledger.LedgerConfigMismatchError,
                                'another configuration'):
      other.read()

  def test_reconcile(self):
    ledger, _, book = self._ledger()
    entry = ledger.LedgerEntry(started=5, lost=1, upload_bits=600,
                               download_bits=900)
    common = dict(checkpoint_upload_bits=400, checkpoint_download_bits=700,
                  any_checkpoints=True)
    got = book.reconcile(entry, checkpoint_round=4, checkpoint_lost=1,
                         **common)
    self.assertEqual(got, ledger.Reconciled(1, 200, 200))
    # Up to date: nothing lost.
    got = book.reconcile(entry, checkpoint_round=5, checkpoint_lost=1,
                         checkpoint_upload_bits=600,
                         checkpoint_download_bits=900, any_checkpoints=True)
    self.assertEqual(got, ledger.Reconciled(0, 0, 0))
    # Missing, or behind the checkpoint: refused.
    with self.assertRaisesRegex(ledger.PrivacyLedgerError, 'missing'):
      book.reconcile(None, checkpoint_round=4, checkpoint_lost=0, **common)
    with self.assertRaisesRegex(ledger.PrivacyLedgerError, 'fewer than'):
      book.reconcile(ledger.LedgerEntry(started=2), checkpoint_round=4,
                     checkpoint_lost=0, **common)
    # No valid checkpoint: the ledger's rounds were all lost...
    got = book.reconcile(entry, checkpoint_round=None, checkpoint_lost=0,
                         **common)
    self.assertEqual(got, ledger.Reconciled(6, 600, 900))
    # ...and without a ledger, set-aside checkpoints make it unknown.
    with self.assertRaisesRegex(ledger.PrivacyLedgerError, 'unknown'):
      book.reconcile(None, checkpoint_round=None, checkpoint_lost=0, **common)
    fresh = book.reconcile(None, checkpoint_round=None, checkpoint_lost=0,
                           checkpoint_upload_bits=0,
                           checkpoint_download_bits=0, any_checkpoints=False)
    self.assertEqual(fresh, ledger.Reconciled(0, 0, 0))


class ResumeTest(tf.test.TestCase):
  """SIGKILL at any phase of a round, resume: same results as no crash."""

  # A DP-REC run killed after round 3 trained, before it saved (made once
  # per test process, `_killed_after_round_3_trained`).
  _killed_dir = None

  @classmethod
  def tearDownClass(cls):
    if cls._killed_dir is not None:
      shutil.rmtree(cls._killed_dir, ignore_errors=True)
      cls._killed_dir = None
    super().tearDownClass()

  def _killed_after_round_3_trained(self):
    """(args, output_dir) of a fresh copy of the killed run's folder."""
    def args_for(output_dir, data_dir):
      return ['--task=digits', '--aggregators=dp_rec', '--rounds=5',
              '--clients_per_round=4', '--target_epsilon=8',
              '--eval_every=10', f'--output_dir={output_dir}',
              f'--data_dir={data_dir}']
    cls = type(self)
    if cls._killed_dir is None:
      made = tempfile.mkdtemp()
      killed = support.run_cli(
          args_for(os.path.join(made, 'out'), os.path.join(made, 'data')),
          {training.TEST_KILL_ENV: 'dp_rec:3:trained'})
      self.assertEqual(killed.returncode, -signal.SIGKILL,
                       killed.stderr[-3000:])
      self.assertNotIn('The planner', killed.stdout)  # --noplan.
      cls._killed_dir = made
    output_dir = os.path.join(self.create_tempdir().full_path, 'out')
    shutil.copytree(os.path.join(cls._killed_dir, 'out'), output_dir)
    return (args_for(output_dir, os.path.join(cls._killed_dir, 'data')),
            output_dir)

  def _args(self, output_dir, data_dir, aggregators='dp_rec'):
    return ['--task=digits', f'--aggregators={aggregators}', '--rounds=5',
            '--clients_per_round=4', '--target_epsilon=8', '--eval_every=2',
            '--insecure_test_seed=11', f'--output_dir={output_dir}',
            f'--data_dir={data_dir}']

  def test_killed_runs_resume_to_the_same_result(self):
    data_dir = self.create_tempdir().full_path
    reference_dir = self.create_tempdir().full_path
    # The reference compiles with TFF's compiler alone; the resumed run
    # below takes computations from the compile cache. It also starts a
    # fresh context (and worker) after rounds 2 and 4, as a run does every
    # execution.CONTEXT_ROUNDS rounds (none after the last), and the
    # processes below none: DP-REC in insecure test mode is deterministic,
    # so the equal results below show that neither a renewal nor a resume
    # changes what is computed.
    with mock.patch.object(execution, 'CONTEXT_ROUNDS', 2), \
        mock.patch.object(execution, 'set_context',
                          wraps=execution.set_context) as set_context:
      result = support.run_in_process(self._args(reference_dir, data_dir),
                                      {compile_cache.ENV: 'off'})
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertEqual(set_context.call_count, 3)  # To build, after 2 and 4.
    reference = _summary(reference_dir)
    self.assertTrue(reference['dp_rec']['insecure_test_mode'])
    self.assertEqual(reference['dp_rec']['replay_mismatches'], 0)
    # One run killed three times, each resume killed at a later point, so
    # that every resumed process saves rounds the final result is built on;
    # the kills cover the three phases (a round started, trained but not
    # saved, saved). After the kill that follows round 4's save, that
    # checkpoint is corrupted: the next process reports it, skips it and
    # resumes after round 3. (In insecure test mode the round trained and
    # lost is rerun; its privacy cost is test_a_run_killed_after_round_3_
    # trained's.) A finished aggregator's record reused while another
    # resumes is jobs_test's RunTest.
    output_dir = self.create_tempdir().full_path
    kills = ('dp_rec:2:started', 'dp_rec:4:saved', 'dp_rec:5:trained')
    for k, kill_at in enumerate(kills):
      killed = _run_cli(self._args(output_dir, data_dir),
                        {training.TEST_KILL_ENV: kill_at})
      self.assertEqual(killed.returncode, -signal.SIGKILL,
                       f'{kill_at}: {killed.stderr[-3000:]}')
      log = killed.stdout + killed.stderr
      if k:
        self.assertIn('resuming after round', log)
      if k == 2:
        self.assertIn('corrupt or partial', log)
        self.assertIn('resuming after round 3', log)
      if kill_at == 'dp_rec:4:saved':
        _corrupt(os.path.join(output_dir, 'digits', 'dp_rec', 'seed0',
                              'checkpoints', 'round_4'))
    # A process of its own: the compile cache's hits need computations
    # named as a fresh process names them.
    resumed = _run_cli(self._args(output_dir, data_dir))
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertIn('resuming after round', resumed.stdout + resumed.stderr)
    # Computations the earlier processes compiled come from the compile
    # cache, with (below) the same results.
    self.assertRegex(resumed.stdout, r'Compiled computations: [1-9]\d* from '
                     r'the cache')
    got = _summary(output_dir)
    for key in _COMPARED:
      self.assertEqual(got['dp_rec'][key], reference['dp_rec'][key], key)
    with open(os.path.join(output_dir, 'digits', 'dp_rec', 'seed0',
                           'metrics.csv')) as f:
      rounds = [int(r['round']) for r in csv.DictReader(f)]
    self.assertEqual(rounds, [1, 2, 3, 4, 5])

  def test_a_run_killed_after_round_3_trained(self):
    # One test of subtests on copies of one killed run: pytest-xdist's
    # worksteal may split a class between its workers, and each would make
    # the killed run again.
    for check in (self._check_lost_round_counts_as_spent_privacy,
                  self._check_ledger_missing_or_behind_is_refused):
      with self.subTest(check.__name__[len('_check_'):]):
        check()

  def _check_lost_round_counts_as_spent_privacy(self):
    args, output_dir = self._killed_after_round_3_trained()
    # The planner runs by default, before training; one that cannot plan
    # says why in one line and the run goes on. (Its lines when it can:
    # planning_test.)
    with mock.patch.object(planning, 'plan_for_run',
                           side_effect=ValueError('out of reach (test)')):
      resumed = support.run_in_process(args, plan=True)
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    log = resumed.stdout + resumed.stderr
    self.assertIn('count as spent privacy', log)
    self.assertLess(log.index('[digits] The planner could not plan this '
                              'setting: out of reach (test)'),
                    log.index('[digits/dp_rec] parameters:'))
    record = _summary(output_dir)['dp_rec']
    self.assertEqual(record['lost_rounds'], 1)
    # Calibrated for 5 rounds, so the lost round leaves room for 4 only.
    self.assertEqual(record['rounds'], 4)
    c = record['params']['clip_ratio']
    from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
    spent = accounting.dp_rec_epsilon(
        clip_ratio=c, rounds=5, bits=record['params']['bits'],
        num_groups=record['params']['num_groups'],
        population=record['population'], clients_per_round=4,
        delta=record['delta'])
    self.assertAlmostEqual(record['epsilon'], spent, places=9)

  def _check_ledger_missing_or_behind_is_refused(self):
    # Issue 14's under-counts: a run killed after round 3 trained leaves a
    # checkpoint of round 2 and a ledger that says 3 rounds started.
    args, output_dir = self._killed_after_round_3_trained()
    ledger_path = os.path.join(output_dir, 'digits', 'dp_rec', 'seed0',
                               'privacy_ledger.json')
    with open(ledger_path) as f:
      original = json.load(f)
    self.assertEqual(original['started'], 3)
    cases = [
        (None, 'privacy_ledger.json is missing'),
        (json.dumps({**original, 'started': 1}), 'fewer than the 2'),
        # Malformed contents: PrivacyLedgerTest, without a run each.
    ]
    for content, message in cases:
      if content is None:
        os.remove(ledger_path)
      else:
        mode = 'wb' if isinstance(content, bytes) else 'w'
        with open(ledger_path, mode) as f:
          f.write(content)
      refused = support.run_in_process(args)
      self.assertEqual(refused.returncode, 2, refused.stdout[-2000:])
      self.assertIn(message, refused.stderr)
      self.assertNotIn('Traceback', refused.stderr)
    # Nothing was reset: the last content is still there.
    with open(ledger_path) as f:
      self.assertEqual(f.read(), cases[-1][0])

  def test_random_kills_never_undercount_privacy(self):
    # Kill the run at random moments (round and phase drawn from a seeded
    # RNG), resume each time, and check against the ground truth of every
    # round that started (a trace written before the round runs): the run's
    # epsilon always covers all of them, and so do its totals.
    from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
    data_dir = self.create_tempdir().full_path
    output_dir = self.create_tempdir().full_path
    trace = os.path.join(self.create_tempdir().full_path, 'starts')
    rounds = 7
    args = ['--task=digits', '--aggregators=dp_rec', f'--rounds={rounds}',
            '--clients_per_round=4', '--target_epsilon=20',
            '--eval_every=100', f'--output_dir={output_dir}',
            f'--data_dir={data_dir}']
    rng = np.random.default_rng(7)
    env = {training.TEST_TRACE_ENV: trace}
    for _ in range(3):
      started = _count_lines(trace)
      kill_round = int(rng.integers(1, rounds + 1))
      phase = str(rng.choice(['started', 'trained', 'saved']))
      result = _run_cli(args, {**env, training.TEST_KILL_ENV:
                               f'dp_rec:{kill_round}:{phase}'})
      self.assertIn(result.returncode, (0, -signal.SIGKILL),
                    result.stderr[-2000:])
      if result.returncode == 0:
        break
      ledger_path = os.path.join(output_dir, 'digits', 'dp_rec', 'seed0',
                                 'privacy_ledger.json')
      with open(ledger_path) as f:
        entry = json.load(f)
      self.assertGreaterEqual(entry['started'] + entry['lost'],
                              _count_lines(trace))
      self.assertGreater(_count_lines(trace), started)
    final = support.run_in_process(args, env)
    self.assertEqual(final.returncode, 0, final.stderr[-2000:])
    record = _summary(output_dir)['dp_rec']
    spent = _count_lines(trace)
    self.assertEqual(record['rounds'] + record['lost_rounds'], spent)
    expected = accounting.dp_rec_epsilon(
        clip_ratio=record['params']['clip_ratio'], rounds=spent,
        bits=record['params']['bits'],
        num_groups=record['params']['num_groups'],
        population=record['population'], clients_per_round=4,
        delta=record['delta'])
    self.assertAlmostEqual(record['epsilon'], expected, places=9)
    # Every started round's upload counts, lost or not.
    self.assertEqual(record['upload_bits_total'],
                     spent * 4 * record['upload_bits_per_client_round'])

  def test_other_configuration_is_refused(self):
    data_dir = self.create_tempdir().full_path
    output_dir = self.create_tempdir().full_path
    args = ['--task=digits', '--aggregators=fedavg', '--rounds=3',
            '--clients_per_round=4', f'--output_dir={output_dir}',
            f'--data_dir={data_dir}']
    killed = _run_cli(args, {training.TEST_KILL_ENV: 'fedavg:2:saved'})
    self.assertEqual(killed.returncode, -signal.SIGKILL)
    # The refusals and the fresh run need no process of their own.
    other = support.run_in_process(args[:2] + ['--rounds=4'] + args[3:])
    self.assertEqual(other.returncode, 2)
    self.assertIn('another configuration', other.stderr)
    # The foreign checkpoints are set aside and named, not left blocking.
    checkpoint_dir = os.path.join(output_dir, 'digits', 'fedavg', 'seed0',
                                  'checkpoints')
    aside = [n for n in os.listdir(checkpoint_dir) if '.foreign' in n]
    self.assertNotEmpty(aside)
    self.assertIn(aside[0], other.stderr)
    # Its ledger is foreign too: refused, never reset.
    again = support.run_in_process(args[:2] + ['--rounds=4'] + args[3:])
    self.assertEqual(again.returncode, 2)
    self.assertIn('--noresume', again.stderr)
    fresh = support.run_in_process(args[:2] + ['--rounds=4', '--noresume'] +
                                   args[3:])
    self.assertEqual(fresh.returncode, 0, fresh.stderr[-3000:])
    self.assertEqual(_summary(output_dir)['fedavg']['rounds'], 4)


class ContextRenewalTest(tf.test.TestCase):

  def test_a_fresh_worker_draws_afresh(self):
    # The same computation, in the worker before a renewal and in the fresh
    # one after: DP-REC's seed word and a Gaussian like DP-FedAvg's noise
    # (both stateful ops with seed = seed2 = 0) must not start over. A seed
    # baked into the graph would give both workers the same draws.
    from tff_dprec import rec  # pylint: disable=g-import-not-at-top
    draw = tff.tensorflow.computation(lambda: (
        rec.fresh_int64([4]), tf.random.normal([4])))
    plan = registry.build(
        'fedavg', value_type=tff.TensorType(np.float32, [3]), population=10,
        clients_per_round=2, rounds=1, target_epsilon=None, delta=None,
        bits=None, grouping='tensor', noise_stddev=None, l2_clip=None)
    try:
      draws = []
      for _ in range(2):
        execution.set_context(plan)
        draws.append(draw())
    finally:
      tff.backends.native.set_sync_local_cpp_execution_context()
    (words_before, normal_before), (words_after, normal_after) = draws
    self.assertEmpty(set(words_before.tolist()) & set(words_after.tolist()))
    self.assertNotAllClose(normal_before, normal_after)


class DistributedTest(tf.test.TestCase):
  """Two loopback TFF workers give the local results."""

  def test_workers_equal_local(self):
    data_dir = self.create_tempdir().full_path
    common = dict(
        task_name='digits', aggregators=['dp_rec', 'fedavg'],
        data_dir=data_dir, rounds=4, clients_per_round=6, target_epsilon=8.0,
        eval_every=2, progress=False, insecure_test_seed=5,
        print_fn=lambda *a: None)
    local = {r['aggregator']: r for r in training.run_experiment(
        output_dir=self.create_tempdir().full_path, **common)}
    logs = []
    remote = {r['aggregator']: r for r in training.run_experiment(
        output_dir=self.create_tempdir().full_path, workers=2,
        **dict(common, print_fn=logs.append))}
    self.assertTrue(any('2 TFF workers' in line for line in logs))
    # DP-REC with recorded messages decodes after the merge, in seed order:
    # bit for bit the local result, whatever the split of clients.
    for key in _COMPARED:
      self.assertEqual(remote['dp_rec'][key], local['dp_rec'][key], key)
    self.assertEqual(remote['dp_rec']['replay_mismatches'], 0)
    # FedAvg's float mean is merged in another order: the same up to
    # rounding, which 4 rounds of training do not amplify beyond this.
    self.assertAlmostEqual(remote['fedavg']['final_metric'],
                           local['fedavg']['final_metric'], delta=0.02)
    # The workers are gone and the local context is back.
    self.assertEqual(
        tff.tensorflow.computation(lambda: tf.constant(3))(), 3)

  def test_ddgauss_refused_on_workers(self):
    with self.assertRaisesRegex(ValueError, 'DDGauss'):
      training.run_experiment(
          task_name='digits', aggregators=['ddgauss16'], data_dir='/tmp',
          output_dir=self.create_tempdir().full_path, workers=2)


class CliTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ('unknown_task', ['--task=cifar'], 'unknown'),
      ('bits_zero', ['--bits=0'], 'bits'),
      ('bits_too_large', ['--bits=40'], 'bits must be in [1, 24]'),
      ('epsilon_zero', ['--target_epsilon=0'], 'target_epsilon'),
      ('unknown_aggregator', ['--aggregators=dp_rec,magic'], 'magic'),
      ('bad_grouping', ['--grouping=layers'], 'grouping'),
      ('bad_downlink', ['--downlink=broadcast'], 'downlink'),
      ('negative_workers', ['--workers=-1'], 'workers'),
      ('ddgauss_on_workers', ['--workers=2'], 'DDGauss'),
      ('negative_verify', ['--verify_replay_clients=-1'],
       'verify_replay_clients'),
      ('duplicate_aggregators', ['--aggregators=dp_rec,fedavg,dp_rec'],
       'more than once'),
      ('unknown_flag', ['--epsilon=1'], 'epsilon'),
      ('noise_multiplier_out_of_range',
       ['--aggregators=dp_fedavg', '--noise_multiplier=1e6'],
       'noise_multiplier must be in'),
      ('bad_population', ['--population=1'],
       "--population must be 'stored' or an int >= 2, found '1'"),
  )
  def test_bad_flags_are_refused_before_anything_runs(self, flags, message):
    # What `experiments.run` checks before it builds anything: absl's
    # parser, then the flags' text, then `RunConfig`'s checks. Each of the
    # three ways out is run as a command in test_bad_flags_exit_in_one_line.
    from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
    from experiments import run as run_lib  # pylint: disable=g-import-not-at-top
    try:
      with self.assertRaisesRegex((absl_flags.Error, TypeError, ValueError),
                                  re.escape(message)):
        absl_flags.FLAGS(['experiments.run', '--noprogress'] + flags)
        run_lib.validate_flags()
        run_lib.config_from_flags()
    finally:
      # Back to the defaults, parsed as conftest.py leaves them.
      absl_flags.FLAGS.unparse_flags()
      absl_flags.FLAGS.mark_as_parsed()

  @parameterized.named_parameters(
      # One command per way out: absl's parser, RunConfig's checks, and an
      # error raised once the run starts (the data).
      ('unknown_flag', ['--epsilon=1'], 'epsilon'),
      # Refused before any data is generated (it was a traceback, exit 1).
      ('bits_too_large', ['--bits=40'], 'bits must be in [1, 24]'),
      ('missing_real_data', ['--task=mnist', '--data_dir=/nonexistent'],
       'mnist.npz'),
  )
  def test_bad_flags_exit_in_one_line(self, flags, message):
    # Issue 14: one line on stderr, exit code 2, no traceback, no help dump.
    data_dir = self.create_tempdir().full_path
    result = subprocess.run(
        [sys.executable, '-m', 'experiments.run', '--noprogress',
         f'--data_dir={data_dir}'] + flags,
        cwd=_REPO, capture_output=True, text=True, timeout=300)
    self._assert_one_line(result, message)

  @parameterized.named_parameters(
      # Refused before anything trains (fedavg is listed first).
      ('noise_multiplier_over_budget',
       ['--task=digits', '--aggregators=fedavg,dp_fedavg', '--rounds=2',
        '--noise_multiplier=0.01'], 'above target_epsilon=1.0'),
      ('output_is_a_file', ['--task=digits', '--output_dir=/etc/hostname'],
       'cannot be used'),
      ('output_unwritable', ['--task=digits', '--output_dir=/proc/out'],
       'cannot be used'),
  )
  def test_errors_once_the_run_starts_are_one_line(self, flags, message):
    # The budget and the output folder, raised in `execute` as the data's
    # error is: the command's own path, in this process (its exit is
    # test_bad_flags_exit_in_one_line's).
    data_dir = self.create_tempdir().full_path
    result = support.run_in_process([f'--data_dir={data_dir}'] + flags)
    self._assert_one_line(result, message)

  def _assert_one_line(self, result, message):
    self.assertEqual(result.returncode, 2, result.stderr[-2000:])
    self.assertIn(message, result.stderr)
    self.assertNotIn('Traceback', result.stderr)
    errors = [l for l in result.stderr.splitlines() if l.startswith('error')]
    self.assertLen(errors, 1)

  def test_epsilon_sweep_refuses_a_grid_that_varies_the_target(self):
    result = subprocess.run(
        [sys.executable, '-m', 'experiments.epsilon_sweep',
         '--grids=dp_rec: target_epsilon=64', '--population=5000'],
        cwd=_REPO, capture_output=True, text=True, timeout=300)
    self.assertEqual(result.returncode, 2, result.stderr[-2000:])
    self.assertIn("error: --grids: dp_rec: 'target_epsilon' cannot vary",
                  result.stderr)
    self.assertNotIn('Traceback', result.stderr)

if __name__ == '__main__':
  tf.test.main()
