"""Trains a run's (aggregator, seed) pairs in processes side by side.

`run(config)` with `config.jobs` = J > 1 is `training.run(config)` spread over
J child processes: TFF's runtime keeps about one core busy for the cheaper
aggregators (and less than two for DP-REC), and a run's fixed costs (start-up,
evaluation, the history replay check) are serial, so J processes on J cores
finish sooner (docs/EXPERIMENTS.md, "Time"). Each child is this module run as
a program on the config with `jobs=1` and `job_runs` (its share of the pairs,
split by `AggregatorSpec.relative_cost`, longest first); it trains and
checkpoints its runs exactly as `training.run` would in one process (the
same folders, fingerprints and records), and writes its output to
`<output_dir>/<task>/jobs/job<j>.log`, which this process relays line by
line. The parent calibrates every aggregator first (a refusal costs no
training; the children find the calibrations in the cache), and when every
child has succeeded, writes the summary, table, curves and plots from the
runs' records (`training.run` with `resume`: every run is found finished).

A child that fails is reported with its log; the others finish their runs,
which a rerun reuses. Children die with this process (`worker_reaper`).
"""

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
import traceback
from typing import Any, NamedTuple

from experiments.infra import worker_reaper
from experiments.runner import config as config_lib
from experiments.runner import planning
from experiments.runner import registry
from experiments.runner import training
from experiments.runner import run_setup
from experiments.runner import finished

_POLL_SECONDS = 0.5
# TensorFlow's and gRPC's C++ start-up chatter, kept in the logs but not
# relayed (`2026-11-27 16:23:42.237442: E tensorflow/...`, `I0000 00:00:...`);
# fatal (F) lines are relayed: they say why a job died.
_NATIVE_LOG_LINE = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] |[IWE]\d{4} |'
    r'To enable the following instructions)')


class JobError(RuntimeError):
  """A child process ended with an error."""


def split_runs(runs, jobs: int) -> list:
  """Splits (aggregator, seed) pairs into at most `jobs` balanced lists.

  Longest processing time first: each pair, costliest first, goes to the
  least loaded list. Within a list, the pairs keep their order in `runs`
  (an aggregator's seeds share one built process).

  Raises:
    ValueError: If `jobs` < 1.
  """
  if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
    raise ValueError(f'jobs must be a positive int, found {jobs!r}.')
  runs = list(runs)
  order = sorted(range(len(runs)),
                 key=lambda i: -registry.get(runs[i][0]).relative_cost)
  loads = [0.0] * min(jobs, len(runs))
  members = [[] for _ in loads]
  for i in order:
    j = loads.index(min(loads))
    loads[j] += registry.get(runs[i][0]).relative_cost
    members[j].append(i)
  return [[runs[i] for i in sorted(m)] for m in members]


def run(config: config_lib.RunConfig, print_fn=print,
        print_plan: bool = False) -> list:
  """Trains `config` in `config.jobs` processes; returns the records.

  `print_plan`: the planner's lines first, as `training.run`'s.

  Raises:
    JobError: If a child failed (after every child has ended).
    The errors of `training.run`'s calibration and output folder checks.
  """
  start = time.time()
  prepared = _prepare(config, print_fn, print_plan)
  if len(prepared.shares) <= 1:  # Nothing to share.
    return training.run(dataclasses.replace(prepared.config, jobs=1),
                        print_fn=_without(prepared.said, print_fn),
                        start_time=start)
  _train_children([prepared], print_fn)
  return _report(prepared, print_fn, start)


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
  prepared = [_prepare(config, print_fn, False) for config in configs]
  _train_children([p for p in prepared if p.shares], print_fn)
  return [record for p in prepared for record in _report(p, print_fn, start)]


class _Prepared(NamedTuple):
  """A configuration set up and calibrated, its unfinished runs shared."""
  task: Any
  config: config_lib.RunConfig
  task_dir: str
  shares: list  # Of (aggregator, seed) lists, one per process.
  said: list  # Lines printed while preparing.


def _report(prepared: _Prepared, print_fn, start) -> list:
  """`training.run` over the finished runs: the records, table and plots."""
  return training.run(
      dataclasses.replace(prepared.config, jobs=1, resume=True),
      print_fn=_without(prepared.said, print_fn), start_time=start)


def _prepare(config, print_fn, print_plan) -> _Prepared:
  """`config` set up and calibrated, its unfinished runs split over
  `config.jobs`."""
  said_before = []

  def say(text):
    said_before.append(text)
    print_fn(text)

  task, config, task_dir = run_setup.setup(config, say)
  calibrated = run_setup.calibrate(task, config)
  if print_plan and 'dp_rec' in calibrated:
    planning.print_plan(task, config, calibrated['dp_rec'], say)
  # Runs that finished before (a rerun after a failed job) are not shared.
  runs = [(name, seed) for name in config.aggregators for seed in config.seeds
          if not (config.resume and finished.finished_run(
              task, dataclasses.replace(config, seed=seed), calibrated[name],
              task_dir, print_fn))]
  shares = split_runs(runs, config.jobs) if runs else []
  return _Prepared(task, config, task_dir, shares, said_before)


def _train_children(prepared, print_fn) -> None:
  """One process per share of each prepared configuration, to the end.

  Raises:
    JobError: If a child failed (after every child has ended).
  """
  children = []
  try:
    # Filled as they start: a failure part-way kills those started.
    for p in prepared:
      log_dir = os.path.join(p.task_dir, 'jobs')
      os.makedirs(log_dir, exist_ok=True)
      _start_children(p.task, p.config, p.shares, log_dir, print_fn,
                      children)
    failed = _relay(children, print_fn)
  except BaseException:
    for _, process, _, _ in children:
      if process.poll() is None:
        process.kill()
        process.wait()
    raise
  if failed:
    resume = all(p.config.resume for p in prepared)
    advice = ('rerun the command: its finished runs are reused and the '
              'others resume from their checkpoints' if resume else
              'rerun without --noresume to reuse the finished runs and '
              'resume the others from their checkpoints')
    raise JobError('; '.join(
        f'job {j} exited with code {code}: see {path}'
        for j, code, path in failed) + f' ({advice}).')


def _start_children(task, config, shares, log_dir, print_fn,
                    children: list) -> None:
  """Starts one process per share, appending (j, process, log, offset);
  j counts on from the children already in `children`."""
  for j, share in enumerate(shares, start=len(children)):
    log_path = os.path.join(log_dir, f'job{j}.log')
    child_config = dataclasses.replace(config, jobs=1, job_runs=tuple(share),
                                       progress=False)
    config_path = os.path.join(log_dir, f'job{j}.json')
    with open(config_path, 'w') as f:
      json.dump(to_json(child_config), f)
    names = ', '.join(f'{n} seed {s}' for n, s in share)
    print_fn(f'[{task.name}] job {j}: {names} (log {log_path}).')
    with open(log_path, 'a') as log:
      log.write(f'--- {time.strftime("%Y-%m-%d %H:%M:%S")}: {names}\n')
      log.flush()
      offset = log.tell()
      process = worker_reaper.start_worker(
          [sys.executable, '-m', 'experiments.runner.jobs', config_path],
          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    children.append((j, process, log_path, offset))


def to_json(config: config_lib.RunConfig) -> dict:
  """`config` as JSON values (`from_json` restores it)."""
  return json.loads(json.dumps(config.asdict()))


def from_json(data: dict) -> config_lib.RunConfig:
  fields = dict(data)
  fields['aggregators'] = tuple(fields['aggregators'])
  if fields.get('job_runs') is not None:
    fields['job_runs'] = tuple(tuple(r) for r in fields['job_runs'])
  return config_lib.RunConfig(**fields)


def _without(said_before, print_fn):
  """`print_fn` for the final `training.run`, which repeats the set-up lines
  and finds the runs finished: those lines were said already."""

  def say(text):
    if text not in said_before and ' already finished in ' not in text:
      print_fn(text)

  return say


def _relay(children, print_fn) -> list:
  """Prints the children's new log lines until all end; returns failures."""
  offsets = {j: offset for j, _, _, offset in children}
  running = {j for j, _, _, _ in children}
  failed = []
  while running:
    time.sleep(_POLL_SECONDS)
    for j, process, path, _ in children:
      if j not in running:
        continue
      code = process.poll()
      offsets[j] = _print_new_lines(path, offsets[j], f'[job {j}] ', print_fn,
                                    final=code is not None)
      if code is not None:
        running.discard(j)
        if code != 0:
          failed.append((j, code, path))
  return failed


def _print_new_lines(path, offset, prefix, print_fn, final) -> int:
  with open(path, 'rb') as f:
    f.seek(offset)
    data = f.read()
  if not final:
    data = data[:data.rfind(b'\n') + 1]  # Whole lines only.
  for line in data.decode(errors='replace').splitlines():
    if not _NATIVE_LOG_LINE.match(line):
      print_fn(prefix + line)
  return offset + len(data)


def _main(argv) -> None:
  """A child: trains the runs of the config in `argv[1]`."""
  from experiments.runner import cli  # pylint: disable=g-import-not-at-top
  cli.quiet_logs()
  worker_reaper.install()
  with open(argv[1]) as f:
    config = from_json(json.load(f))
  try:
    training.run(config, print_fn=lambda *a: print(*a, flush=True))
  except Exception as e:  # pylint: disable=broad-except
    traceback.print_exc()
    print(f'error: {type(e).__name__}: {e}', flush=True)
    worker_reaper.reap()
    os._exit(1)  # pylint: disable=protected-access


if __name__ == '__main__':
  _main(sys.argv)
