"""End-to-end tests of experiments.runner.training: `run_experiment` trains
every aggregator at a tiny size and writes the records, table and curves."""

import csv
import json
import os

import tensorflow as tf

from experiments.data import evaluation
from experiments.data import tasks
from experiments.runner import checkpoints
from experiments.runner import config as config_lib
from experiments.runner import finished
from experiments.runner import registry
from experiments.runner import report
from experiments.runner import run_params
from experiments.runner import run_setup
from experiments.runner import training
from tests import support
from tff_dprec import accounting

_TINY = support.TINY_STACKOVERFLOW

# Every aggregator runs on one of the two tasks, and one of the no-noise
# controls (they share one builder; tests/experiments/controls_test.py covers
# each).
# StackOverflow takes those its checks compare; digits (a model of several
# tensors, so several DP-REC groups) takes DP-REC and the rest.
# MainJobPipelineTest trains these on SO-LR; SmokeTest the others on digits.
_MAIN_JOB = ['dp_rec', 'dp_fedavg', 'fedavg']
_SMOKE_DIGITS = ['dp_rec'] + [
    n for n in registry.names()
    if registry.control_of(n) is None and n not in _MAIN_JOB
] + ['dp_rec_no_noise']


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
         for r in finished.finished_records(config)],
        [(r['aggregator'], r['seed'], r['final_metric']) for r in records])
    self.assertEqual(finished.finished_records(config_lib.RunConfig(
        **{**config.asdict(), 'rounds': 4})), [])
    self._check_recalibrated_record(config, output_dir)
    elsewhere = os.path.join(output_dir, 'never_trained')
    self.assertEqual(finished.finished_records(config_lib.RunConfig(
        **{**config.asdict(), 'output_dir': elsewhere})), [])
    self.assertFalse(os.path.exists(elsewhere))  # Nothing written.

  def _check_recalibrated_record(self, config, output_dir):
    """A record whose c differs from this calibration by less than
    CALIBRATION_RTOL is reused when this accountant puts its c within the
    target, and not when its c is over the target."""
    config = config_lib.RunConfig(**{**config.asdict(),
                                     'aggregators': ('dp_rec',), 'seed': 5,
                                     'num_seeds': 1})
    run_dir = os.path.join(output_dir, 'stackoverflow_lr', 'dp_rec', 'seed5')
    path = os.path.join(run_dir, checkpoints.RECORD_FILE)
    with open(path) as f:
      saved = json.load(f)
    stored = run_params.stored(run_dir)
    self.assertEqual(checkpoints._fingerprint(stored), saved['fingerprint'])  # pylint: disable=protected-access
    c = saved['record']['params']['clip_ratio']
    task = run_setup.create_task(config)
    resolved = config.resolved(task)
    message = {k: saved['record']['params'][k]
               for k in ('bits', 'num_groups', 'accounting')}
    for factor, reused in ((1 - 9e-6, True), (1 + 9e-6, False)):
      params = dict(saved['record']['params'], clip_ratio=c * factor,
                    l2_clip=c * factor * saved['record']['params'][
                        'noise_stddev'])
      with open(path, 'w') as f:
        json.dump(dict(saved, record=dict(saved['record'], params=params),
                       fingerprint=checkpoints._fingerprint(  # pylint: disable=protected-access
                           dict(stored, params=checkpoints.fingerprint_params(
                               params)))), f)
      if not reused:  # The test's premise: this c is over the target.
        self.assertGreater(accounting.dp_rec_epsilon(
            clip_ratio=c * factor, population=task.population,
            clients_per_round=resolved.clients_per_round,
            rounds=resolved.rounds, delta=resolved.delta, **message),
                           config.target_epsilon)
      self.assertLen(finished.finished_records(config), int(reused))
    with open(path, 'w') as f:
      json.dump(saved, f)

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
    frequent = evaluation.frequent_tags_recall_at_5(task)
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
    frequent = evaluation.frequent_tags_recall_at_5(task)
    self.assertGreater(records[0]['final_metric'], frequent + 0.1)


def _check_outputs(test, task_dir, records, rounds, target_epsilon):
  """Checks what a run of `records` wrote under `task_dir`: the summary,
  each run's metrics.csv, the table and the plots."""
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


if __name__ == '__main__':
  tf.test.main()
