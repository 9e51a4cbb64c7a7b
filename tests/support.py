"""Helpers several test modules share (in BUILD's :test_support)."""

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import traceback
from unittest import mock

import numpy as np
import tensorflow_federated as tff

from experiments.infra import test_hooks
from tff_dprec.accounting import accountings
from tff_dprec.accounting import calibration
from tff_dprec.accounting import dp_rec_accountant

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILL_ENV = test_hooks.KILL_ENV
# Intrinsics that move values from CLIENTS to SERVER.
CLIENTS_TO_SERVER = frozenset([
    'federated_aggregate', 'federated_sum', 'federated_mean',
    'federated_weighted_mean', 'federated_secure_sum',
    'federated_secure_sum_bitwidth', 'federated_secure_modular_sum',
    'federated_collect', 'federated_select'
])
# A tiny embedded StackOverflow setting (`stackoverflow_data.generate`'s
# config): 40 training clients, 5 held out, 15 test, 300 words, 30 tags.
TINY_STACKOVERFLOW = dict(
    seed=3, train_clients=40, heldout_clients=5, test_clients=15,
    num_words=300, num_tags=30, num_topics=6, mean_examples=12.0,
    std_examples=30.0, max_examples=200)
# The record's keys on which two runs of one setting that must compute the
# same (a resumed and an uninterrupted one; on workers and locally) agree.
# What `pip install` of the package reads: the files pyproject.toml names and
# the package.
PACKAGE_SOURCES = ('pyproject.toml', 'README.md', 'tff_dprec')
COMPARED_RECORD_KEYS = ('final_metric', 'final_metrics', 'epsilon', 'rounds',
                        'upload_bits_total', 'download_bits_total',
                        'lost_rounds')


def run_cli(args, env_extra=None, timeout=600, plan=False):
  """`python -m experiments.run --noprogress --num_seeds=1 *args`, with
  `--noplan` unless `plan` (the planner's lines are planning_test's and the
  main job's; cold, they cost a run more than its rounds), and `--jobs=1`
  unless `args` say (one process: what these tests check; jobs_test and
  run_test check jobs)."""
  env = dict(os.environ)
  env.pop(KILL_ENV, None)
  env.update(env_extra or {})
  return subprocess.run(
      [sys.executable, '-m', 'experiments.run', '--noprogress',
       '--num_seeds=1'] + ([] if plan else ['--noplan']) + _one_job(args),
      cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def _one_job(args) -> list:
  """`args` with `--jobs=1` first unless they give --jobs."""
  if any(a.startswith('--jobs') for a in args):
    return list(args)
  return ['--jobs=1'] + list(args)


def run_in_process(args, env_extra=None, plan=False):
  """What `run_cli` returns, from `experiments.run`'s own path in this
  process: absl parses the flags, `RunConfig` checks them, `execute` runs
  and gives a refusal's one line (`error: ...`, return code 2).

  It saves the command's start-up (imports, TFF's first build) where a test
  needs no process of its own. Not for kills (`KILL_ENV` would end this
  process) nor for what only a command shows (its exit status, native
  logging, computations named as a fresh process names them, which the
  compile cache needs): `run_cli`'s tests keep those. Python's logging at
  ERROR, exceptions ignored in `__del__` and uncaught thread exceptions go
  to the returned stderr, as a command would print them.
  """
  from absl import flags  # pylint: disable=g-import-not-at-top
  from experiments import run as run_lib  # pylint: disable=g-import-not-at-top
  env = dict(env_extra or {})
  if KILL_ENV in env:
    raise ValueError(f'run_in_process cannot be killed: {env[KILL_ENV]!r}')
  argv = (['experiments.run', '--noprogress', '--num_seeds=1'] +
          ([] if plan else ['--noplan']) + _one_job(args))
  # Files, not StringIO: TFF starts its worker with this stdout and stderr.
  with tempfile.TemporaryFile('w+') as out, \
      tempfile.TemporaryFile('w+') as err:
    with mock.patch.dict(os.environ, env), \
        contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
        _errors_to(err):
      os.environ.pop(KILL_ENV, None)
      with command_flags(run_lib._define_flags):  # pylint: disable=protected-access
        try:
          flags.FLAGS(argv)
          run_lib.validate_flags()
          config = run_lib.config_from_flags()
        except (flags.Error, TypeError, ValueError) as e:
          error = e
        else:
          error = run_lib.execute(config)
      if error is not None:
        print(f'error: {error}', file=sys.stderr)
    texts = []
    for f in (out, err):
      f.flush()
      f.seek(0)
      texts.append(f.read())
  return subprocess.CompletedProcess(argv, 0 if error is None else 2,
                                     *texts)


@contextlib.contextmanager
def command_flags(define_flags):
  """Within: a command's flags defined as `cli.run_main` defines them
  (--verbose and `define_flags()`'s), unparsed; after: removed, absl's
  flags unparsed (parsed as conftest.py leaves them if they were).

  Commands share flag names (--task, --rounds), so a process that runs
  several, a test's, defines one command's flags at a time.
  """
  from absl import flags  # pylint: disable=g-import-not-at-top
  from experiments.runner import cli  # pylint: disable=g-import-not-at-top
  was_parsed = flags.FLAGS.is_parsed()
  names = cli.define_command_flags(define_flags)
  try:
    flags.FLAGS.unparse_flags()
    yield
  finally:
    for name in names:
      delattr(flags.FLAGS, name)
    flags.FLAGS.unparse_flags()
    if was_parsed:
      flags.FLAGS.mark_as_parsed()


def run_main(module, args):
  """`python -m experiments.<command> *args` in this process, `module`
  being the command's (a study's, or `experiments.run` up to its flags:
  its `main` ends the process on a refusal).

  The command's flags are defined for the call, parsed by `cli.parse_flags`
  and `main` runs under `cli.call_main`, as `cli.run_main` runs them: a
  refusal prints its `error:` line and raises SystemExit(2), --help prints
  the help and raises SystemExit(0). Returns `main`'s value.
  """
  from experiments.runner import cli  # pylint: disable=g-import-not-at-top
  with command_flags(module._define_flags):  # pylint: disable=protected-access
    argv = cli.parse_flags([module.__name__] + list(args), doc=module.__doc__)
    return cli.call_main(module.main, argv)


@contextlib.contextmanager
def _errors_to(stream):
  """Python's error reports to `stream`: logging at ERROR and above, and
  exceptions ignored in `__del__` or raised in threads (pytest would turn
  the last two into warnings)."""
  handler = logging.StreamHandler(stream)
  handler.setLevel(logging.ERROR)
  root = logging.getLogger()
  root.addHandler(handler)

  def unraisable(report):
    print(f'Exception ignored in: {report.object!r}', file=stream)
    traceback.print_exception(report.exc_type, report.exc_value,
                              report.exc_traceback, file=stream)

  def in_thread(report):
    print(f'Exception in thread {report.thread}:', file=stream)
    traceback.print_exception(report.exc_type, report.exc_value,
                              report.exc_traceback, file=stream)

  with mock.patch.object(sys, 'unraisablehook', unraisable), \
      mock.patch.object(threading, 'excepthook', in_thread):
    try:
      yield
    finally:
      root.removeHandler(handler)


def tensor_dtypes(value_type):
  """The dtypes of a TFF type's tensors, in order."""
  if isinstance(value_type, tff.TensorType):
    return [np.dtype(value_type.dtype)]
  return [d for t in value_type for d in tensor_dtypes(t)]


def clients_to_server_value_types(computation):
  """Types of all values that intrinsics move from CLIENTS to SERVER."""
  found = []

  def visit(comp):
    if isinstance(comp, tff.framework.Intrinsic):
      if comp.uri in CLIENTS_TO_SERVER:
        parameter = comp.type_signature.parameter
        value_type = (parameter[0] if isinstance(parameter, tff.StructType)
                      else parameter)
        found.append((comp.uri, value_type))
    return comp, False

  tff.framework.transform_postorder(computation.to_building_block(), visit)
  return found


def dp_rec_rdp_for_pld():
  """A patcher: DP-REC's RDP accountant wherever its PLD one is asked.

  For tests whose subject (what is calibrated, cached, searched, printed)
  does not depend on the accountant's values: the RDP bound is about 100
  times faster to evaluate than the PLD.
  """
  real = dp_rec_accountant.make_dp_rec_accountant

  def rdp_for_pld(accounting=accountings.DEFAULT_ACCOUNTING, **kwargs):
    if accounting == accountings.MIN_PLD_RDP:
      accounting = accountings.RDP
    return real(accounting=accounting, **kwargs)

  return _ForgettingCalibrations(mock.patch.object(
      dp_rec_accountant, 'make_dp_rec_accountant', rdp_for_pld))


class _ForgettingCalibrations:
  """`patcher`, forgetting the process's calibrations
  (`calibration.clear_memo`) when it starts and when it stops: those made
  with the stand-in are not the default accountant's."""

  def __init__(self, patcher):
    self._patcher = patcher

  def start(self):
    calibration.clear_memo()
    return self._patcher.start()

  def stop(self):
    try:
      return self._patcher.stop()
    finally:
      calibration.clear_memo()

  def __enter__(self):
    return self.start()

  def __exit__(self, *exc_info):
    self.stop()
    return False


def install_package(folder, timeout=240) -> str:
  """`pip install --no-deps` of the package into `folder`; the install's path.

  Built from a copy of `PACKAGE_SOURCES` in `folder`, so that the build
  leaves nothing in the checkout, and offline (`--no-index`,
  `--no-build-isolation`). The install (`folder/site`) holds `tff_dprec`
  only: with it alone on PYTHONPATH, the checkout's `experiments` and tests
  are not importable, as for a user who installed the package.
  """
  source = os.path.join(folder, 'source')
  os.makedirs(source)
  for name in PACKAGE_SOURCES:
    path = os.path.join(REPO, name)
    if os.path.isdir(path):
      shutil.copytree(path, os.path.join(source, name),
                      ignore=shutil.ignore_patterns('__pycache__'))
    else:
      shutil.copy(path, source)
  site = os.path.join(folder, 'site')
  result = subprocess.run(
      [sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps',
       '--no-build-isolation', '--no-index', '--target', site, source],
      capture_output=True, text=True, timeout=timeout)
  if result.returncode:
    raise AssertionError(f'pip install failed:\n{result.stderr[-3000:]}')
  return site
