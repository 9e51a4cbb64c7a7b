"""`experiments.reproduce --part=fashion_mnist` (studies.real_images)."""

import csv
import os
import types
from unittest import mock

from absl.testing import parameterized
import tensorflow as tf

from experiments.data import tasks as tasks_lib
from experiments.data import task_types
from experiments.runner import training
from experiments.runner import run_setup
from experiments.runner import finished
from experiments.studies import tuning
from experiments.studies import real_images
from experiments.studies import reproduce
from tff_dprec import accounting
from tests import support


class RealImagesTest(parameterized.TestCase):

  def _fakes(self, calls):
    defaults = types.SimpleNamespace(
        rounds=300, clients_per_round=10, bits=None, grouping='tensor',
        noise_stddev=0.005, l2_clip=0.01, eval_every=50, client_lr=0.01)
    task = types.SimpleNamespace(defaults=defaults, population=100,
                                 data_note='real Fashion-MNIST')
    # Validation accuracy of each tuned value: the middle one wins for
    # DP-FedAvg; the largest for DP-REC, inside once its grid grows to 0.02.
    validation = {('dp_fedavg', 0.01): 0.6, ('dp_fedavg', 0.005): 0.5,
                  ('dp_fedavg', 0.02): 0.55, ('dp_rec', 0.0025): 0.2,
                  ('dp_rec', 0.005): 0.3, ('dp_rec', 0.01): 0.4,
                  ('dp_rec', 0.02): 0.35}
    test = {'fedavg': 0.8, 'dp_fedavg': 0.7, 'dp_rec': 0.5,
            'ddgauss16': 0.6}

    def calibrated_aggregator(task_, config, name, record_messages):
      del task_, record_messages
      return types.SimpleNamespace(params=dict(num_groups=10))

    def run(config, print_fn=print, context_out=None):
      del print_fn, context_out
      calls.append(config)
      name = config.aggregators[0]
      if config.eval_split == 'validation':
        value = config.l2_clip if name == 'dp_fedavg' else config.noise_stddev
        metric = validation[(name, value)]
      else:
        metric = test[name]
      out_dir = os.path.join(config.output_dir, 'fashion_mnist')
      os.makedirs(out_dir, exist_ok=True)
      records = []
      with open(os.path.join(out_dir, 'curves.csv'), 'w') as f:
        f.write('aggregator,seed,round,metric,epsilon,upload_bits,'
                'download_bits\n')
        for a in config.aggregators:
          for s in config.seeds:
            value = metric + 0.01 * s - (0.1 if 'no_noise' in a else 0)
            f.write(f'{a},{s},0,0.1,,0,0\n{a},{s},300,{value},,0,0\n')
            records.append(dict(
                aggregator=a, seed=s, final_metric=value,
                epsilon=None if a in ('fedavg',) or 'no_noise' in a else
                config.target_epsilon, upload_gb=1e-3, download_gb=1e-2,
                seconds_per_round=1.0, params={},
                # DDGauss16's seed 1 lost a round to an interruption.
                lost_rounds=int(a == 'ddgauss16' and s == 1)))
      return records

    return task, calibrated_aggregator, run

  def test_tunes_then_trains_every_row_and_writes_the_table(self):
    calls = []
    task, calibrated_aggregator, run = self._fakes(calls)
    out = self.create_tempdir().full_path
    with mock.patch.object(training, 'run', run), \
        mock.patch.object(run_setup, 'calibrated_aggregator',
                          calibrated_aggregator), \
        mock.patch.object(tasks_lib, 'create_task', lambda *a, **k: task):
      cells = real_images.run(out, 'data', rounds=300, seeds=2,
                              log=lambda *a: None)
    tuned = [c for c in calls if c.eval_split == 'validation']
    self.assertLen(tuned, 7)
    self.assertEqual(tuned[-1].noise_stddev, 0.02)
    for c in tuned:
      self.assertEqual((c.target_epsilon, c.seeds),
                       (3.0, (tuning.TUNE_SEED_OFFSET,
                              tuning.TUNE_SEED_OFFSET + 1)))
    rows = [c for c in calls if c.eval_split == 'test']
    self.assertEqual(
        [(c.aggregators, c.target_epsilon) for c in rows][:5],
        [(('dp_fedavg', 'dp_fedavg_no_noise'), 3.0),
         (('dp_rec', 'dp_rec_no_noise'), 3.0),
         (('dp_rec',), rows[2].target_epsilon),
         (('ddgauss16', 'ddgauss16_no_noise'), 3.0), (('fedavg',), 1.0)])
    for c in rows:
      self.assertEqual(c.seeds, (0, 1))
    # The tuned choices everywhere; DDGauss at DP-FedAvg's clip.
    self.assertEqual((rows[0].l2_clip, rows[1].noise_stddev,
                      rows[3].l2_clip), (0.01, 0.01, 0.01))
    # The paper's c with 7 bits per tensor, accounted (and budgeted) at its
    # proven epsilon over these rounds.
    paper_row = rows[2]
    self.assertEqual((paper_row.clip_ratio, paper_row.bits), (0.545, 7))
    proven = accounting.dp_rec_epsilon(
        clip_ratio=0.545, population=100, clients_per_round=10, rounds=300,
        delta=100**-1.1, bits=7, num_groups=10)
    self.assertGreaterEqual(paper_row.target_epsilon, proven)
    self.assertLess(paper_row.target_epsilon, proven * 1.001)
    self.assertEqual([c.target_epsilon for c in rows[5:]],
                     [6.0, 6.0, rows[7].target_epsilon, 6.0])
    self.assertEqual(rows[7].clip_ratio, 0.87)
    self._check_table(out)
    with open(os.path.join(out, 'fashion_mnist.csv')) as f:
      lines = list(csv.DictReader(f))
    self.assertLen(lines, 12)
    self.assertEqual({(l['aggregator'], l['lost_rounds']) for l in lines
                      if l['aggregator'].startswith('ddgauss16')},
                     {('ddgauss16', '1'), ('ddgauss16_no_noise', '0')})
    self.assertGreater(
        os.path.getsize(os.path.join(out, 'fashion_mnist_curves.png')),
        10_000)
    self.assertEqual(sorted((c['method'], c['epsilon']) for c in cells),
                     [('DP-FedAvg', 3.0), ('DP-FedAvg', 6.0), ('DP-REC', 3.0),
                      ('DP-REC', 3.0), ('DP-REC', 6.0), ('DP-REC', 6.0)])

  def test_report_only_trains_nothing_and_lists_what_is_left(self):
    calls = []
    task, calibrated_aggregator, run = self._fakes(calls)
    out = self.create_tempdir().full_path

    def must_not_train(*a, **k):
      raise AssertionError('report_only trained')

    def report(done):
      # Rows whose first aggregator is in `done` have all their runs.
      def finished_records(config):
        return run(config) if config.aggregators[0] in done else []
      with mock.patch.object(training, 'run', must_not_train), \
          mock.patch.object(finished, 'finished_records', finished_records), \
          mock.patch.object(run_setup, 'calibrated_aggregator',
                            calibrated_aggregator), \
          mock.patch.object(tasks_lib, 'create_task', lambda *a, **k: task):
        real_images.run(out, 'data', rounds=300, seeds=2,
                        log=lambda *a: None, report_only=True)
      with open(os.path.join(out, 'fashion_mnist.md')) as f:
        return f.read()

    # Nothing tuned: only the rows that need no tuning can be reported.
    table = report({'fedavg'})
    self.assertIn('| FedAvg | - | - | - | 80.50 ± 0.50 (2 seeds) |', table)
    self.assertNotIn('| DP-FedAvg |', table)
    self.assertIn('* dp_fedavg: 3 of 3 tuning settings not trained yet', table)
    self.assertIn('Not finished yet (rerun the command to train them): '
                  'DP-FedAvg, epsilon 3 (its tuning); DP-REC, epsilon 3 (its '
                  'tuning);', table)
    self.assertIn("DP-REC at the paper's c = 0.545, epsilon 3 (0 runs "
                  'finished)', table)
    # Tuned (by a training pass), then a report with some rows finished.
    with mock.patch.object(training, 'run', run), \
        mock.patch.object(run_setup, 'calibrated_aggregator',
                          calibrated_aggregator), \
        mock.patch.object(tasks_lib, 'create_task', lambda *a, **k: task):
      real_images.tune_methods(real_images.base_config(out, 'data', 300, 2),
                               lambda *a: None)
    table = report({'dp_fedavg', 'fedavg'})
    self.assertIn('| DP-FedAvg | 3 | PLD | 3.000 | 70.50 ± 0.50 (2 seeds) |',
                  table)
    self.assertIn('| DP-FedAvg | 6 | PLD |', table)
    self.assertNotIn('| DP-REC |', table)
    self.assertIn('* dp_rec: noise_stddev=0.0025: 1020.50', table)
    self.assertIn('DP-REC, epsilon 3 (0 runs finished); ', table)
    self.assertNotIn('DP-FedAvg, epsilon 3 (', table)

  def _check_table(self, out):
    """The main test's table: rows, gaps and the tuning's scores."""
    with open(os.path.join(out, 'fashion_mnist.md')) as f:
      table = f.read()
    # Seeds 0 and 1 differ by a point: SE 0.5 each, 0.71 for a gap.
    self.assertIn('| DP-REC - DP-FedAvg | 3 | -20.00 ± 0.71 | -12.6 |',
                  table)
    self.assertIn('| DP-REC - DDGauss16 | 6 | -10.00 ± 0.71 | - |', table)
    self.assertIn('| FedAvg | - | - | - | 80.50 ± 0.50 (2 seeds) |', table)
    self.assertEqual(table.count('60.50 ± 0.50 (2 seeds, 1 round lost) |'),
                     2)  # DDGauss16 at epsilon 3 and 6.
    self.assertIn("DP-REC at the paper's c = 0.545 | 3 |", table)
    self.assertIn("(the paper's accounting: ", table)
    self.assertIn('dp_fedavg l2_clip=0.01; dp_rec noise_stddev=0.01', table)
    # The fake adds 0.01 per seed; tuning seeds 1000 and 1001 average 1000.5.
    self.assertIn('Chosen on the validation split at epsilon 3 (the mean of 2 '
                  'seeds per setting):', table)
    self.assertIn('* dp_fedavg: l2_clip=0.005: 1050.50, l2_clip=0.01: '
                  '1060.50, l2_clip=0.02: 1055.50 (inside the grid).', table)
    self.assertIn('* dp_rec: noise_stddev=0.0025: 1020.50, noise_stddev=0.005:'
                  ' 1030.50, noise_stddev=0.01: 1040.50, noise_stddev=0.02: '
                  '1035.50 (grid grown past its edge to noise_stddev=0.02, '
                  'inside the grid).',
                  table)

  @parameterized.named_parameters(
      ('one', 1, '(one seed per setting)', 'l2_clip=0.005: 1050.00,'),
      ('three', 3, '(the mean of 3 seeds per setting)',
       'l2_clip=0.005: 1051.00,'))
  def test_tuning_seeds_sets_the_seeds_per_setting(self, tuning_seeds, says,
                                                   score):
    calls = []
    task, calibrated_aggregator, run = self._fakes(calls)
    out = self.create_tempdir().full_path
    with mock.patch.object(training, 'run', run), \
        mock.patch.object(run_setup, 'calibrated_aggregator',
                          calibrated_aggregator), \
        mock.patch.object(tasks_lib, 'create_task', lambda *a, **k: task):
      real_images.run(out, 'data', rounds=300, seeds=2, log=lambda *a: None,
                      tuning_seeds=tuning_seeds)
    tuned = [c for c in calls if c.eval_split == 'validation']
    self.assertLen(tuned, 7)
    first = tuning.TUNE_SEED_OFFSET
    for c in tuned:
      self.assertEqual(c.seeds, tuple(range(first, first + tuning_seeds)))
    with open(os.path.join(out, 'fashion_mnist.md')) as f:
      table = f.read()
    self.assertIn(says, table)
    self.assertIn(score, table)

  def test_curves_average_the_rounds_every_seed_has_and_the_ends(self):
    # Seed 0 lost two rounds to a kill: it ends at 48 and has no round 50.
    path = os.path.join(self.create_tempdir().full_path, 'curves.csv')
    rows = [('0', 0, 0.1), ('0', 25, 0.3), ('0', 48, 0.5),
            ('1', 0, 0.1), ('1', 25, 0.5), ('1', 40, 0.55), ('1', 50, 0.7),
            ('2', 0, 0.1), ('2', 25, 0.4), ('2', 50, 0.6)]
    with open(path, 'w') as f:
      f.write('aggregator,seed,round,metric\n')
      f.writelines(f'dp_rec,{seed},{r},{m}\n' for seed, r, m in rows)
    rounds, means = real_images._mean_curves(path)['dp_rec']  # pylint: disable=protected-access
    self.assertEqual(rounds, [0, 25, 50])
    self.assertSequenceAlmostEqual(means, [0.1, 0.4, 0.6], places=12)

  def test_bad_seeds_name_the_argument(self):
    for kwargs, arg in ((dict(tuning_seeds=0), 'tuning_seeds=0'),
                        (dict(seeds=0), 'seeds=0'),
                        (dict(tuning_seeds=1.5), 'tuning_seeds=1.5'),
                        (dict(rounds=1), 'rounds=1')):
      with self.subTest(arg), self.assertRaisesRegex(
          ValueError, arg.split('=')[0] + r' must be .*found ' +
          arg.split('=')[1]):
        real_images.run(self.create_tempdir().full_path, 'data', **kwargs)

  def test_tuning_seeds_flag_is_checked(self):
    for argv in (['--part=utility', '--tuning_seeds=2'],
                 ['--part=fashion_mnist', '--tuning_seeds=0']):
      with self.subTest(argv), self.assertRaises(SystemExit) as raised:
        support.run_main(reproduce, argv + [
            '--output_dir', self.create_tempdir().full_path])
      self.assertEqual(raised.exception.code, 2)

  def test_report_only_is_for_fashion_mnist_alone(self):
    with self.assertRaises(SystemExit) as raised:
      support.run_main(reproduce, ['--part=utility', '--report_only',
                                   '--output_dir',
                                   self.create_tempdir().full_path])
    self.assertEqual(raised.exception.code, 2)

  def test_missing_data_is_one_line_and_exit_2(self):
    def missing(*a, **k):
      raise task_types.MissingDataError('no fashion here')

    with mock.patch.object(tasks_lib, 'create_task', missing), \
        self.assertRaises(SystemExit) as raised:
      support.run_main(reproduce, ['--part=fashion_mnist', '--output_dir',
                                   self.create_tempdir().full_path])
    self.assertEqual(raised.exception.code, 2)


if __name__ == '__main__':
  tf.test.main()
