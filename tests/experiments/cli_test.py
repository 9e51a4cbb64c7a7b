"""The command lines of experiments/: one framework (absl through
`experiments.runner.cli.run_main`), and for every entry point its --help, a
bad flag in one line and a cheap normal run (in this process where it can:
`support.run_main` runs a command's flags and `main` as `run_main` does)."""

import contextlib
import glob
import io
import json
import logging as python_logging
import os
import re
import runpy
import subprocess
import sys
import types
import warnings
from unittest import mock

from absl import app
from absl import flags
from absl import logging
from absl.testing import parameterized
import tensorflow as tf

from experiments import run as run_lib
from experiments.data import tasks as tasks_lib
from experiments.runner import cli
from experiments.runner import finished
from experiments.runner import run_setup
from experiments.runner import training
from experiments.studies import audit
from experiments.studies import bench
from experiments.studies import bits
from experiments.studies import epsilon_sweep
from experiments.studies import frontier
from experiments.studies import privacy_tables
from experiments.studies import reproduce
from experiments.studies import tune
from tests import support

# Each entry point `python -m experiments.<name>`: its module, flags its
# --help must list (besides --verbose, every command's) and a flag value absl
# refuses.
_COMMANDS = {
    'run': (run_lib, ('task', 'aggregators', 'rounds', 'target_epsilon',
                      'output_dir', 'plan', 'resume'), '--rounds=many'),
    'tune': (tune, ('aggregator', 'grid', 'task', 'rounds', 'output_dir'),
             '--num_seeds=1.5'),
    'epsilon_sweep': (epsilon_sweep, ('aggregators', 'epsilons', 'grids',
                                      'controls', 'output_dir'),
                      '--controls=maybe'),
    'frontier': (frontier, ('points', 'grids', 'extend_edges',
                            'report_only', 'output_dir'),
                 '--extend_edges=two'),
    'bits': (bits, ('clients_per_round', 'bits', 'noise_stddev',
                    'frontier_dir', 'report_only'), '--bits=40'),
    'reproduce': (reproduce, ('output_dir', 'part', 'quick', 'report_only',
                              'jobs', 'tuning_seeds'), '--sampling_seeds=x'),
    'bench': (bench, ('dim', 'bits', 'repeats', 'aggregators', 'rounds'),
              '--dim=x'),
    'audit': (audit, ('dim', 'clip_ratio', 'bits', 'groups', 'trials'),
              '--trials=x'),
    'privacy_tables': (privacy_tables, ('tables',), '--verbose=maybe'),
}
_NAMES = [(name, name) for name in _COMMANDS]


def _run(module, args):
  """(exit code, stdout, stderr) of `support.run_main(module, args)`."""
  out, err = io.StringIO(), io.StringIO()
  code = 0
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
      support.run_main(module, args)
    except SystemExit as e:
      code = e.code
  return code, out.getvalue(), err.getvalue()


def _set_verbose(test, value):
  """Sets the parsed --verbose flag for one test (defined for it alone if
  no command has defined it: the commands define it themselves)."""
  if 'verbose' not in flags.FLAGS:
    cli.define_verbose_flag()
    test.addCleanup(flags.FLAGS.__delattr__, 'verbose')
  else:
    test.addCleanup(setattr, flags.FLAGS, 'verbose', flags.FLAGS.verbose)
  flags.FLAGS.verbose = value


class CliTest(tf.test.TestCase):

  def test_quiet_logs_unless_verbosity_is_given(self):
    self.addCleanup(logging.set_verbosity, logging.get_verbosity())
    self.addCleanup(tf.get_logger().setLevel, tf.get_logger().level)
    logging.set_verbosity(logging.INFO)
    tf.get_logger().setLevel(python_logging.INFO)
    _set_verbose(self, False)
    cli.quiet_logs()
    self.assertEqual(logging.get_verbosity(), logging.ERROR)
    self.assertEqual(tf.get_logger().level, python_logging.ERROR)
    logging.set_verbosity(logging.INFO)
    _set_verbose(self, True)
    cli.quiet_logs()  # --verbose: untouched.
    self.assertEqual(logging.get_verbosity(), logging.INFO)
    _set_verbose(self, False)
    flags.FLAGS['verbosity'].present = 1
    self.addCleanup(setattr, flags.FLAGS['verbosity'], 'present', 0)
    cli.quiet_logs()
    self.assertEqual(logging.get_verbosity(), logging.INFO)

  def test_commands_log_errors_only_unless_verbose(self):
    self.addCleanup(logging.set_verbosity, logging.get_verbosity())
    seen = []
    for verbose, level in ((False, logging.ERROR), (True, logging.INFO)):
      logging.set_verbosity(logging.INFO)  # What app.run leaves.
      _set_verbose(self, verbose)
      cli.call_main(lambda _: seen.append(logging.get_verbosity()), ['prog'])
      self.assertEqual(seen[-1], level, verbose)

  def test_fail_prints_one_line_and_exits_2(self):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
      cli.fail(ValueError('--rounds must be positive, found 0.'))
    self.assertEqual(e.exception.code, 2)
    self.assertEqual(err.getvalue(),
                     'error: --rounds must be positive, found 0.\n')

  def test_write_failures_and_usage_errors_are_one_line(self):
    def full_disk(argv):
      del argv
      raise OSError(28, 'No space left on device', '/out/table.md')

    def usage(argv):
      raise app.UsageError(f'Unexpected arguments: {argv[1:]}')

    for main, line in (
        (full_disk, 'error: cannot write /out/table.md: No space left on '
         'device (errno 28). What was written before is intact: free space '
         'and rerun the same command to resume.\n'),
        (usage, "error: Unexpected arguments: ['extra']\n")):
      err = io.StringIO()
      with contextlib.redirect_stderr(err), \
          self.assertRaises(SystemExit) as e:
        cli.call_main(main, ['prog', 'extra'])
      self.assertEqual((e.exception.code, err.getvalue()), (2, line))
    self.assertEqual(cli.call_main(lambda argv: len(argv), ['prog']), 1)


class EntryPointTest(parameterized.TestCase):

  def test_no_argparse_in_the_experiments(self):
    root = support.REPO
    for path in glob.glob(os.path.join(root, 'experiments', '**', '*.py'),
                          recursive=True):
      with open(path) as f:
        self.assertFalse(re.search(r'^\s*(import|from) argparse\b',
                                   f.read(), re.M), path)

  @parameterized.named_parameters(*_NAMES)
  def test_entry_point_hands_its_module_to_run_main(self, name):
    module = _COMMANDS[name][0]
    with mock.patch.object(cli, 'run_main') as run_main, \
        warnings.catch_warnings():
      # runpy warns that experiments.<name> is imported already.
      warnings.simplefilter('ignore', RuntimeWarning)
      runpy.run_module(f'experiments.{name}', run_name='__main__')
    run_main.assert_called_once()
    define_flags, main, doc = run_main.call_args.args
    self.assertEqual(doc, module.__doc__)
    if module is run_lib:  # run.py is its own module, run afresh.
      self.assertEqual((define_flags.__name__, main.__name__),
                       ('_define_flags', 'main'))
    else:
      self.assertIs(define_flags, module._define_flags)  # pylint: disable=protected-access
      self.assertIs(main, module.main)

  @parameterized.named_parameters(*_NAMES)
  def test_help_lists_the_flags_and_exits_0(self, name):
    module, names, _ = _COMMANDS[name]
    for help_flag in ('--help', '-h'):
      code, out, err = _run(module, ['--rounds=many', help_flag])
      self.assertEqual((code, err), (0, ''))
      self.assertStartsWith(out, module.__doc__.strip().splitlines()[0])
      for flag in names + ('verbose',):
        self.assertRegex(out, rf'\n  --(\[no\])?{flag}: ', flag)
      # The command's flags only: absl's own are --helpfull's.
      self.assertNotIn('--verbosity', out)
      self.assertIn('Try --helpfull', out)
    code, out, _ = _run(module, ['--helpfull'])
    self.assertEqual(code, 0)
    self.assertIn('--verbosity', out)

  @parameterized.named_parameters(*_NAMES)
  def test_bad_flag_is_one_line_and_exit_2(self, name):
    module, _, bad_value = _COMMANDS[name]
    for args, line in (
        (['--no_such_flag=1'],
         "error: Unknown command line flag 'no_such_flag'"),
        ([bad_value], f'error: flag {bad_value}: ')):
      code, out, err = _run(module, args)
      self.assertEqual((code, out), (2, ''), err)
      self.assertStartsWith(err, line)
      self.assertLen(err.splitlines(), 1, err)

  def test_commands_end_in_one_line_as_programs(self):
    # `app.run`'s own paths, in a process each: --help's exit status, and
    # a bad flag's one line with nothing after it (reproduce imports TFF,
    # whose objects printed errors at exit).
    for args, code, stream, text in (
        (['audit', '--help'], 0, 'stdout', 'Empirical privacy audit'),
        (['reproduce', '--output_dir=/nonexistent', '--jobs=x'], 2,
         'stderr', "error: flag --jobs=x: invalid literal for int() with "
         "base 10: 'x'\n")):
      result = subprocess.run(
          [sys.executable, '-m', f'experiments.{args[0]}'] + args[1:],
          cwd=support.REPO, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, code, result.stderr[-2000:])
      if stream == 'stderr':
        self.assertEqual(result.stderr, text)
      else:
        self.assertStartsWith(result.stdout, text)
        self.assertEqual(result.stderr, '')


def _fake_task():
  """A task for the studies' fakes (as tests/experiments/frontier_test.py's)."""
  defaults = types.SimpleNamespace(
      rounds=5, clients_per_round=2, bits=None, grouping='network',
      noise_stddev=0.006, l2_clip=0.2, eval_every=10, client_lr=0.1)
  return types.SimpleNamespace(name='digits', defaults=defaults,
                               population=1000)


def _fake_run(trained):
  """`training.run` that records each configuration and trains nothing."""

  def run(config, print_fn=print, context_out=None, print_plan=True):
    del print_fn, print_plan
    trained.append(config)
    if context_out is not None:
      context_out.update(initial_metric=0.1)
    return [dict(aggregator=a, seed=s, final_metric=0.5, epsilon=1.0,
                 params=dict(clip_ratio=1.5, noise_multiplier=1.0, bits=5,
                             noise_stddev=0.1),
                 metric_label='accuracy', upload_bits_per_client_round=69,
                 upload_gb=1e-6, download_gb=1e-3,
                 clients_per_round=config.clients_per_round)
            for a in config.aggregators for s in config.seeds]

  return run


class NormalRunTest(tf.test.TestCase):
  """Each command's `main` on cheap settings; the studies' training, task
  and calibrations faked as their own tests fake them."""

  def _fakes(self, trained):
    calibrated = lambda *a: types.SimpleNamespace(params=dict(
        clip_ratio=1.5, num_groups=1, noise_multiplier=1.0, bits=5))
    stack = contextlib.ExitStack()
    for target, name, value in (
        (training, 'run', _fake_run(trained)),
        (run_setup, 'calibrated_aggregator', calibrated),
        (finished, 'finished_records', lambda config, task=None: []),
        (run_setup, 'reference_context',
         lambda *a: dict(initial_metric=0.1)),
        (tasks_lib, 'create_task', lambda *a, **k: _fake_task())):
      stack.enter_context(mock.patch.object(target, name, value))
    return stack

  def _run_ok(self, module, args):
    code, out, err = _run(module, args)
    self.assertEqual(code, 0, err[-3000:])
    return out

  def test_privacy_tables(self):
    out = self._run_ok(privacy_tables, ['--tables=channel'])
    # docs/PRIVACY.md's table.
    self.assertIn('| 0.8 | 7 | 0.994 / 1.032 | 1.000 / 1.018 | '
                  '1.005 / 1.014 |', out)
    self.assertNotIn('main job', out)
    code, _, err = _run(privacy_tables, ['--tables=channel,table2'])
    self.assertEqual((code, err), (2, "error: --tables must name some of "
                                      "channel, table1, found "
                                      "'channel,table2'.\n"))

  def test_audit(self):
    out = self._run_ok(audit, ['--trials=100', '--dim=4', '--groups=1',
                               '--bits=2', '--clip_ratio=0.5'])
    self.assertStartsWith(out, 'DP-REC audit: c=0.5 bits=2 x 1 groups d=4 '
                          'trials=100 delta=1e-05\n')
    self.assertIn('accountant epsilon (local, one release): ', out)

  def test_bench_codec_one(self):
    out = self._run_ok(bench, ['codec_one', '--dim=16', '--bits=2',
                               '--repeats=1'])
    row = json.loads(out.strip().splitlines()[-1])
    self.assertEqual((row['dim'], row['bits']), (16, 2))
    for args in ([], ['codec', 'history'], ['accountin']):
      code, _, err = _run(bench, args)
      self.assertEqual(code, 2)
      self.assertStartsWith(err, 'error: name one benchmark of codec, '
                            'codec_one, history, rounds, images')
      self.assertLen(err.splitlines(), 1)

  def test_reproduce(self):
    out_dir = self.create_tempdir().full_path
    out = self._run_ok(reproduce, [f'--output_dir={out_dir}',
                                   '--part=privacy', '--quick'])
    self.assertIn(f'Wrote {out_dir}/reproduce.json and REPRODUCTION.md', out)
    with open(os.path.join(out_dir, 'reproduce.json')) as f:
      cells = json.load(f)
    self.assertEqual({c['task'] for c in cells}, {'mnist'})

  def test_run(self):
    trained = []
    with self._fakes(trained), \
        mock.patch.object(run_lib, '_fail', cli.fail):
      self._run_ok(run_lib, ['--task=digits', '--aggregators=fedavg',
                             '--rounds=2', '--clients_per_round=4',
                             '--noprogress', '--noplan', '--jobs=1',
                             '--output_dir=/nonexistent'])
    config, = trained
    self.assertEqual((config.task, config.aggregators, config.rounds,
                      config.clients_per_round, config.progress,
                      config.num_seeds, config.jobs),
                     ('digits', ('fedavg',), 2, 4, False, 3, 1))

  def test_tune(self):
    trained = []
    out_dir = self.create_tempdir().full_path
    with self._fakes(trained):
      out = self._run_ok(tune, ['--task=digits', '--aggregator=dp_fedavg',
                                '--grid=l2_clip=0.1,0.2', '--rounds=2',
                                f'--output_dir={out_dir}'])
    self.assertEqual([(c.l2_clip, c.eval_split, c.rounds) for c in trained],
                     [(0.1, 'validation', 2), (0.2, 'validation', 2)])
    self.assertIn('dp_fedavg on digits, validation split (1 seed(s) each), '
                  'best first:', out)
    self.assertTrue(os.path.exists(os.path.join(out_dir, 'digits',
                                                'tune_dp_fedavg.json')))

  def test_epsilon_sweep(self):
    trained = []
    out_dir = self.create_tempdir().full_path
    with self._fakes(trained):
      out = self._run_ok(epsilon_sweep, [
          '--task=digits', '--aggregators=dp_fedavg', '--epsilons=8',
          '--num_seeds=1', '--grids=dp_fedavg: l2_clip=0.5', '--rounds=2',
          '--nocontrols', f'--output_dir={out_dir}'])
    self.assertEqual([(c.eval_split, c.aggregators, c.target_epsilon)
                      for c in trained],
                     [('validation', ('dp_fedavg',), 8.0),
                      ('test', ('dp_fedavg',), 8.0)])
    self.assertIn('Wrote ', out)
    for name in ('epsilon_sweep.csv', 'epsilon_sweep.md'):
      self.assertTrue(os.path.exists(os.path.join(out_dir, 'digits', name)))

  def test_frontier_report_only(self):
    trained = []
    out_dir = self.create_tempdir().full_path
    with self._fakes(trained):
      out = self._run_ok(frontier, [
          '--task=digits', '--points=dp_fedavg: 10', '--grids=',
          '--report_only', f'--output_dir={out_dir}'])
    self.assertEmpty(trained)
    self.assertIn('| dp_fedavg | 10 | task defaults: 0 of 3 seeds finished |',
                  out)
    self.assertTrue(os.path.exists(os.path.join(out_dir, 'digits',
                                                'frontier.md')))

  def test_bits_report_only(self):
    trained = []
    out_dir = self.create_tempdir().full_path
    with self._fakes(trained), \
        mock.patch.object(bits, '_epsilon', return_value=2.5):
      out = self._run_ok(bits, [
          '--task=digits', '--clients_per_round=10', '--noise_stddev=0.1',
          '--report_only', f'--output_dir={out_dir}'])
    self.assertEmpty(trained)
    self.assertIn('not trained yet', out)
    self.assertTrue(os.path.exists(os.path.join(out_dir, 'digits',
                                                'bits.md')))


if __name__ == '__main__':
  tf.test.main()
