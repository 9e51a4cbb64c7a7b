"""Trains a run's (aggregator, seed) pairs in processes side by side.

`run(config)` with `config.jobs` = J > 1 is `training.run(config)` spread over
J child processes (`experiments.run` takes J from the cores by default):
TFF's runtime does not keep two cores busy for the cheaper aggregators, and
a run's fixed costs (start-up, client data, evaluation, checkpoints, the
history replay check) are serial, so J processes on J cores finish sooner
(docs/EXPERIMENTS.md, "Time"). The children start at once and load their
modules while this process sets the task up and calibrates every aggregator
(a refusal costs no training; the children find the calibrations in the
cache, checked already). Each child then gets its job: a share of the runs
(`job_schedule.split_runs`) that it trains and checkpoints exactly as
`training.run` would in one process (the same folders, fingerprints and
records), taking each run by a claim (`job_schedule.Claims`); a child that has
finished its share takes over the last runs of the others'. Its output goes
to `<output_dir>/<task>/jobs/job<j>.log`, which this process relays line by
line, each prefixed with `[job j]`. When every child has succeeded, this
process writes the summary, table, curves and plots from the runs' records
(`training.run` with `resume`: every run is found finished).

A child that fails is reported with its log; the others finish their runs,
which a rerun reuses. Children die with this process (`worker_reaper`).

As a program (`python -m experiments.runner.jobs`), this module is a child:
it reads the path of its job file on stdin (or from --job_file, to rerun a
job by hand) and trains that job.
"""

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, NamedTuple

from absl import app
from absl import flags

from experiments.infra import atomic_files
from experiments.runner import calibration_cache
from experiments.runner import cli
from experiments.runner import config as config_lib
from experiments.runner import finished
from experiments.runner import job_schedule
from experiments.runner import phases
from experiments.runner import planning
from experiments.runner import run_setup
from experiments.runner import training
from tff_dprec import worker_reaper

_POLL_SECONDS = 0.5
# TensorFlow's and gRPC's C++ start-up chatter, kept in the logs but not
# relayed (`2026-11-27 16:23:42.237442: E tensorflow/...`, `I0000 00:00:...`);
# fatal (F) lines are relayed: they say why a job died.
_NATIVE_LOG_LINE = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] |[IWE]\d{4} |'
    r'To enable the following instructions|'
    r'WARNING: All log messages before absl::InitializeLog)')

split_runs = job_schedule.split_runs


class JobError(RuntimeError):
  """A child process ended with an error."""


def run(config: config_lib.RunConfig, print_fn=print,
        print_plan: bool = False) -> list:
  """Trains `config` in `config.jobs` processes; returns the records.

  `print_plan`: the planner's lines before the jobs', as `training.run`'s.

  Raises:
    JobError: If a child failed (after every child has ended).
    The errors of `training.run`'s calibration and output folder checks.
  """
  start = time.time()
  children = [_Child() for _ in range(config.jobs)]
  try:
    prepared = _prepare(config, print_fn)
    if len(prepared.shares) <= 1:  # Nothing to share.
      _cancel(children)
      return training.run(dataclasses.replace(prepared.config, jobs=1),
                          print_fn=_without(prepared.said, print_fn),
                          start_time=start, print_plan=print_plan,
                          task=prepared.task)
    announced = _start_jobs([prepared], children)
    _cancel(children[len(prepared.shares):])
    if print_plan and 'dp_rec' in prepared.calibrated:
      # While the jobs start: its lines come before theirs.
      planning.print_plan(prepared.task, prepared.config,
                          prepared.calibrated['dp_rec'], print_fn)
    _train_children(children[:len(prepared.shares)], announced, print_fn,
                    prepared.config.resume, prepared.said)
  except BaseException:
    _kill(children)
    raise
  records = _report(prepared, print_fn, start)
  _print_job_phases(children[:len(prepared.shares)], print_fn)
  return records


def run_side_by_side(configs, print_fn=print) -> list:
  """Trains several configurations at once, each in `config.jobs`
  processes; returns their records, config by config.

  For runs of different configurations that would each leave cores idle
  (a study's odd seed of one row beside another row's): every share of
  every configuration gets its own process, as `run` gives one
  configuration's shares.

  Raises:
    JobError: If a child failed (after every child has ended).
    The errors of `training.run`'s calibration and output folder checks,
    before any child starts.
  """
  start = time.time()
  prepared = [_prepare(config, print_fn) for config in configs]
  children = [_Child() for p in prepared for _ in p.shares]
  try:
    announced = _start_jobs([p for p in prepared if p.shares], children)
    _train_children(children, announced, print_fn,
                    all(p.config.resume for p in prepared),
                    [line for p in prepared for line in p.said])
  except BaseException:
    _kill(children)
    raise
  records = [record for p in prepared
             for record in _report(p, print_fn, start)]
  _print_job_phases(children, print_fn)
  return records


class _Prepared(NamedTuple):
  """A configuration set up and calibrated, its unfinished runs shared."""
  task: Any
  config: config_lib.RunConfig
  task_dir: str
  calibrated: dict
  shares: list  # Of (aggregator, seed) lists, one per process.
  said: list  # Lines printed while preparing.


def _prepare(config, print_fn) -> _Prepared:
  """`config` set up and calibrated, its unfinished runs split over
  `config.jobs`."""
  said = []
  task, config, task_dir = run_setup.setup(config, _said(said, print_fn))
  calibrated = run_setup.calibrate(task, config)
  # Runs that finished before (a rerun after a failed job) are not shared.
  runs = [(name, seed) for name in config.aggregators for seed in config.seeds
          if not (config.resume and finished.finished_run(
              task, dataclasses.replace(config, seed=seed), calibrated[name],
              task_dir, print_fn))]
  shares = job_schedule.split_runs(runs, config.jobs) if runs else []
  return _Prepared(task, config, task_dir, calibrated, shares, said)


def _said(said: list, print_fn):
  """`print_fn` that also keeps each line in `said`."""

  def say(text):
    said.append(text)
    print_fn(text)

  return say


def _report(prepared: _Prepared, print_fn, start) -> list:
  """`training.run` over the finished runs: the records, table and plots."""
  return training.run(
      dataclasses.replace(prepared.config, jobs=1, resume=True),
      print_fn=_without(prepared.said, print_fn), start_time=start,
      task=prepared.task)


def _without(said_before, print_fn):
  """`print_fn` for the final `training.run`, which repeats the set-up lines
  and finds the runs finished: those lines were said already."""

  def say(text):
    if text not in said_before and ' already finished in ' not in text:
      print_fn(text)

  return say


class _Child:
  """A job's process: started at once, waiting for its job on stdin."""

  def __init__(self):
    # What it prints before it has a log (nothing, unless it fails).
    self._early = tempfile.TemporaryFile()
    verbose = ['--verbose'] if cli.verbose_requested() else []
    self.process = worker_reaper.start_worker(
        [sys.executable, '-m', 'experiments.runner.jobs'] + verbose,
        stdin=subprocess.PIPE, stdout=self._early, stderr=subprocess.STDOUT)
    self.number = None
    self.log_path = None
    self.offset = 0
    self.phases_path = None

  def start(self, number: int, job: dict, job_path: str) -> None:
    """Hands the child its job (`job`, written to `job_path`)."""
    self.number = number
    self.log_path, self.phases_path = job['log'], job['phases']
    if os.path.exists(self.phases_path):  # An earlier command's.
      os.remove(self.phases_path)
    atomic_files.write_json(job_path, job)
    with open(self.log_path, 'ab') as log:
      names = _names(job['shares'][job['job']])
      log.write(f'--- {time.strftime("%Y-%m-%d %H:%M:%S")}: {names}\n'
                .encode())
      self._early.seek(0)
      log.write(self._early.read())
      self.offset = log.tell()
    self._early.close()
    try:
      self.process.stdin.write(f'{job_path}\n'.encode())
      self.process.stdin.close()
    except OSError:
      pass  # It died before: `_relay` reports its exit code and log.

  def cancel(self) -> None:
    """Ends a child that got no job (it exits at the end of its stdin)."""
    try:
      self.process.stdin.close()
    except OSError:
      pass
    self.process.wait()
    self._early.close()

  def kill(self) -> None:
    if self.process.poll() is None:
      self.process.kill()
      self.process.wait()
    self._early.close()


def _cancel(children) -> None:
  for child in children:
    child.cancel()


def _kill(children) -> None:
  for child in children:
    child.kill()


def _start_jobs(prepared, children) -> list:
  """Gives the children the shares of `prepared`, numbered in order;
  returns the lines that say which child trains what."""
  announced, j = [], 0
  for p in prepared:
    log_dir = os.path.join(p.task_dir, 'jobs')
    os.makedirs(log_dir, exist_ok=True)
    claims = job_schedule.Claims(os.path.join(log_dir, f'claims{j}'))
    claims.reset()
    # Progress as the command's: plain lines in the logs (not a terminal).
    child_config = dataclasses.replace(p.config, jobs=1)
    for k, share in enumerate(p.shares):
      job = dict(
          config=to_json(dataclasses.replace(child_config,
                                             job_runs=tuple(share))),
          job=k, number=j + k, shares=[list(map(list, s)) for s in p.shares],
          claims=claims.folder, checked=calibration_cache.checked_values(),
          log=os.path.join(log_dir, f'job{j + k}.log'),
          phases=os.path.join(log_dir, f'job{j + k}.phases.json'))
      children[j + k].start(j + k, job,
                            os.path.join(log_dir, f'job{j + k}.json'))
      announced.append(f'[{p.task.name}] job {j + k}: {_names(share)} '
                       f'(log {job["log"]}).')
    j += len(p.shares)
  return announced


def _names(share) -> str:
  """'dp_rec seeds 0, 1, fedavg seed 0': a share's runs, by aggregator."""
  seeds = {}
  for name, seed in share:
    seeds.setdefault(name, []).append(str(seed))
  return ', '.join(f'{name} seed{"s" if len(s) > 1 else ""} {", ".join(s)}'
                   for name, s in seeds.items())


def _train_children(children, announced, print_fn, resume,
                    said=()) -> None:
  """Relays the children's output until every child has ended, but for
  the lines this process has `said` already (each child repeats the
  task's set-up lines).

  Raises:
    JobError: If a child failed (after every child has ended).
  """
  for line in announced:
    print_fn(line)
  failed = _relay(children, print_fn, frozenset(said))
  if failed:
    advice = ('rerun the command: its finished runs are reused and the '
              'others resume from their checkpoints' if resume else
              'rerun without --noresume to reuse the finished runs and '
              'resume the others from their checkpoints')
    raise JobError('; '.join(
        f'job {j} exited with code {code}: see {path}'
        for j, code, path in failed) + f' ({advice}).')


def _relay(children, print_fn, said=frozenset()) -> list:
  """Prints the children's new log lines until all end; returns failures."""
  running = set(range(len(children)))
  failed = []
  while running:
    time.sleep(_POLL_SECONDS)
    for i, child in enumerate(children):
      if i not in running:
        continue
      code = child.process.poll()
      child.offset = _print_new_lines(
          child.log_path, child.offset, f'[job {child.number}] ', print_fn,
          final=code is not None, said=said)
      if code is not None:
        running.discard(i)
        if code != 0:
          failed.append((child.number, code, child.log_path))
  return failed


def _print_new_lines(path, offset, prefix, print_fn, final,
                     said=frozenset()) -> int:
  with open(path, 'rb') as f:
    f.seek(offset)
    data = f.read()
  if not final:
    data = data[:data.rfind(b'\n') + 1]  # Whole lines only.
  for line in data.decode(errors='replace').splitlines():
    if not _NATIVE_LOG_LINE.match(line) and line not in said:
      print_fn(prefix + line)
  return offset + len(data)


def _print_job_phases(children, print_fn) -> None:
  """The jobs' time by phase, summed over them (each wrote its own)."""
  total = {}
  for child in children:
    try:
      with open(child.phases_path) as f:
        for phase, seconds in json.load(f).items():
          total[phase] = total.get(phase, 0.0) + seconds
    except (OSError, ValueError, AttributeError):
      continue
  if total:
    print_fn(phases.line(total, f'Time by phase in the {len(children)} jobs '
                                '(s, summed over them)'))


def to_json(config: config_lib.RunConfig) -> dict:
  """`config` as JSON values (`from_json` restores it)."""
  return json.loads(json.dumps(config.asdict()))


def from_json(data: dict) -> config_lib.RunConfig:
  fields = dict(data)
  fields['aggregators'] = tuple(fields['aggregators'])
  if fields.get('job_runs') is not None:
    fields['job_runs'] = tuple(tuple(r) for r in fields['job_runs'])
  return config_lib.RunConfig(**fields)


def train_job(job: dict, print_fn=print) -> list:
  """Trains a child's job (what `_start_jobs` wrote); returns its records.

  Its runs come from `job_schedule.schedule`: its share, then runs it takes
  over. Its time by phase goes to the job's phases file.
  """
  calibration_cache.trust_checked(
      tuple(pair) for pair in job.get('checked', ()))
  config = from_json(job['config'])
  shares = [[tuple(run) for run in share] for share in job['shares']]
  runs = job_schedule.schedule(
      shares, job['job'], job_schedule.Claims(job['claims']),
      say=lambda text: print_fn(f'[{config.task}] {text}'))
  records = training.run(config, print_fn=print_fn, schedule=runs)
  atomic_files.write_json(job['phases'], phases.seconds())
  return records


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  global _JOB_FILE  # pylint: disable=global-statement
  _JOB_FILE = flags.DEFINE_string(
      'job_file', None,
      'A job file its parent wrote (<output_dir>/<task>/jobs/job<j>.json), to '
      'train that job again by hand; by default the path is read on stdin, '
      'where the parent writes it (an empty stdin: no job, exit 0).')


def main(argv) -> None:
  """A child: trains the job whose file `--job_file` or stdin names."""
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  cli.quiet_logs()
  worker_reaper.install()
  path = _JOB_FILE.value or sys.stdin.readline().strip()
  if not path:
    return  # The parent needed no job of this process.
  with open(path) as f:
    job = json.load(f)
  if not _JOB_FILE.value:
    _output_to(job['log'])
  printed = lambda *a: print(*a, flush=True)
  try:
    train_job(job, print_fn=printed)
  except Exception as e:  # pylint: disable=broad-except
    traceback.print_exc()
    print(f'error: {type(e).__name__}: {e}', flush=True)
    worker_reaper.reap()
    os._exit(1)  # pylint: disable=protected-access


def _output_to(log_path: str) -> None:
  """This process's stdout and stderr (and its TFF workers') to the log."""
  sys.stdout.flush()
  sys.stderr.flush()
  fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
  os.dup2(fd, sys.stdout.fileno())
  os.dup2(fd, sys.stderr.fileno())
  os.close(fd)


if __name__ == '__main__':
  cli.run_main(_define_flags, main, __doc__)
