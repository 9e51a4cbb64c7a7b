"""The federated training loop shared by `experiments.run` and the studies.

`run(config)` trains each aggregator of a `RunConfig` in turn, for each of
its seeds: it calibrates every aggregator before any trains
(`run_setup.calibrate`), reuses the runs that finished
(`finished.finished_run`), builds each aggregator once
(`seed_run.build_aggregator`) and trains the other seeds with it
(`seed_run.train_seed`); then it writes the task's table and plots.
"""

import dataclasses
import os
import time
from typing import Any, Iterable, NamedTuple, Optional

import tensorflow_federated as tff

from experiments.infra import compile_cache
from experiments.infra import distributed
from experiments.runner import calibration_cache
from experiments.runner import config as config_lib
from experiments.runner import execution
from experiments.runner import finished
from experiments.runner import phases
from experiments.runner import planning
from experiments.runner import registry
from experiments.runner import report
from experiments.runner import report_plots
from experiments.runner import run_cache
from experiments.runner import run_params
from experiments.runner import run_setup
from experiments.runner import seed_run
from tff_dprec import worker_reaper


def run_experiment(*, task_name: str, print_fn=print, **kwargs) -> list:
  """`run(RunConfig(task=task_name, **kwargs))`; returns the record dicts."""
  return run(config_lib.RunConfig(task=task_name, **kwargs),
             print_fn=print_fn)


def run(config: config_lib.RunConfig, print_fn=print,
        context_out: Optional[dict] = None,
        start_time: Optional[float] = None, print_plan: bool = False,
        schedule: Optional[Iterable] = None, task=None) -> list:
  """Trains `config.task` once per aggregator; writes and returns records.

  Every round is checkpointed under `output_dir`
  (`experiments.runner.checkpoints`); with `resume` a run continues from the
  newest valid checkpoint, counting rounds lost in a crash as spent privacy
  (`experiments.runner.ledger`), and a finished run's record is reused (an
  aggregator whose runs have all finished is not even built). `workers` > 0 runs
  the rounds on TFF C++ workers on loopback; `job_runs` trains only those runs
  and writes no task-level outputs (`experiments.runner.jobs`, which also passes
  its `start_time` for the wall time). `context_out`, when given, receives the
  reference rows (initial model, frequent tags) and the wall time. `print_plan`
  prints the planner's lines for DP-REC's setting
  (`experiments.runner.planning`). `schedule`, for a job: the (aggregator, seed)
  pairs to train, in order, read one at a time (the job claims each as it comes
  to it); default: every run of `job_runs` (or of the config), aggregator by
  aggregator, seed by seed. The runs of one call share their identical round
  inputs and evaluations (`run_cache`). `task`: the task of `config`, when the
  caller has it (else made).

  Raises:
    OutputDirError: If the output directory cannot be written (before any
      round runs).
    ledger.PrivacyLedgerError, checkpoints.CheckpointConfigMismatchError: On
      resume, see those modules.
  """
  start = time.time() if start_time is None else start_time
  phases.clear()
  compiled = dict(compile_cache.stats)
  task, config, task_dir, pool, to_train, calibrated = _prepare(
      config, task, print_plan, print_fn)
  context = {}
  cache = run_cache.RunCache(task)
  if config.job_runs is None:  # A job's parent writes the table.
    with phases.timed('reference rows'):
      context = run_setup.reference_context(task, config, cache)
  try:
    results, curves = _train_all(
        task, config, calibrated, to_train if schedule is None else schedule,
        _Place(task_dir, pool, cache), print_fn)
  finally:
    worker_reaper.reap_context_workers()
    if pool is not None:
      pool.stop()
    tff.backends.native.set_sync_local_cpp_execution_context()
  context['wall_seconds'] = time.time() - start
  context['phase_seconds'] = phases.seconds()
  if context_out is not None:
    context_out.update(context)
  if config.job_runs is None:
    _report(task, task_dir, results, curves, context, print_fn)
  _print_costs(compiled, print_fn)
  return results


def _prepare(config, task, print_plan, print_fn):
  """Set up, start workers, calibrate the runs to train (planner's lines).

  Returns:
    (task, config, task_dir, pool, runs to train, calibrated aggregators).
  """
  task, config, task_dir = run_setup.setup(config, print_fn, task)
  if any(registry.get(a).needs_test_context for a in config.aggregators):
    execution.allow_oversize_protos()
  pool = _start_pool(task, config, print_fn)
  to_train = [(name, seed)
              for name in config.aggregators for seed in config.seeds
              if config.job_runs is None or (name, seed) in config.job_runs]
  calibrated = run_setup.calibrate(task, config, names=[
      name for name in config.aggregators
      if any(run[0] == name for run in to_train)])
  if print_plan and 'dp_rec' in calibrated:
    with phases.timed('planner'):
      planning.print_plan(task, config, calibrated['dp_rec'], print_fn)
  return task, config, task_dir, pool, to_train, calibrated


def _print_costs(compiled_before: dict, print_fn):
  """Time by phase, and computations compiled since `compiled_before`."""
  print_fn(phases.line())
  stats = compile_cache.stats
  print_fn(f'Compiled computations: '
           f'{stats["hits"] - compiled_before["hits"]} from the cache, '
           f'{stats["misses"] - compiled_before["misses"]} compiled '
           f'(cache: {compile_cache.directory() or "off"}).')


def _start_pool(task, config, print_fn):
  """The TFF worker pool of `--workers`, started, or None."""
  if not config.workers:
    return None
  pool = distributed.WorkerPool(config.workers)
  pool.start()
  print_fn(f'[{task.name}] running on {config.workers} TFF workers at '
           f'loopback ports {pool.ports}.')
  return pool


class _Place(NamedTuple):
  """Where a call's runs train: its folder, worker pool and shared cache."""
  task_dir: str
  pool: Any
  cache: run_cache.RunCache


def _train_all(task, config, calibrated, schedule, place, print_fn):
  """Trains (or reuses) each run of `schedule`; returns (records, {name:
  curves}).

  An aggregator is built when the first of its runs that has not finished
  comes, and kept for its next runs; one that `calibrated` lacks (a run a
  job took over from another's share) is calibrated then.
  """
  results, curves = [], {}
  built = None
  for name, seed in schedule:
    if name not in calibrated:
      calibrated.update(run_setup.calibrate(task, config, names=[name]))
    aggregator = calibrated[name]
    seed_config = dataclasses.replace(config, seed=seed)
    done = finished.finished_run(
        task, seed_config, aggregator, place.task_dir,
        print_fn) if config.resume else None
    if done is not None:
      record, curve = done['record'], done['curve']
    else:
      if built is None or built.aggregator.name != name:
        built = None  # The last aggregator's process is freed first.
        with phases.timed('calibrate and build'):
          built = seed_run.build_aggregator(task, config, aggregator,
                                            place.pool, print_fn)
      record, curve = seed_run.train_seed(
          task, seed_config, _built_for_seed(
              task, seed_config, built, place.task_dir, place.pool,
              print_fn), place.task_dir, print_fn, place.cache)
    results.append(record)
    curves.setdefault(name, []).append(curve)
    if config.job_runs is None:
      report.write_summary(place.task_dir, results)
  return results, curves


def _built_for_seed(task, config, built, task_dir, pool, print_fn):
  """`built`, or a build at the seed's own parameters where its run started
  at values that differ from this machine's calibration by at most
  `calibration_cache.CALIBRATION_RTOL` (`run_params`; which raises
  CalibrationDriftError if they differ more).
  """
  aggregator = built.aggregator
  agg_dir = os.path.join(task_dir, aggregator.name, f'seed{config.seed}')
  pins = config.resume and run_params.params_to_pin(
      agg_dir, run_params.fingerprint_config(
          task, config, aggregator, built.server_lr, built.use_history))
  if not pins:
    return built
  own = run_setup.calibrated_aggregator_pinned(
      task, config, aggregator.name, built.use_history, pins.values())
  if run_params.normalized(run_params.fingerprint_config(
      task, config, own, built.server_lr, built.use_history)) != (
          run_params.stored(agg_dir)):
    return built  # Not only the calibration: the ledger refuses it.
  print_fn(f'[{task.name}/{aggregator.name}] seed {config.seed} continues '
           f'at the parameters it started with ({own.params}), equal to this '
           'machine\'s calibration to a relative '
           f'{calibration_cache.CALIBRATION_RTOL:g}.')
  with phases.timed('calibrate and build'):
    return seed_run.build_aggregator(task, config, own, pool, print_fn)


def _report(task, task_dir, results, curves, context, print_fn):
  """Writes the table, curves and plots; prints the table."""
  report.write_table(task_dir, results, context)
  report.write_curves(task_dir, curves, results)
  report_plots.write_plots(task_dir, results, curves, context)
  print_fn('')
  print_fn(report.markdown_table(results, context))
  print_fn(f'Data: {task.data_source}. {task.data_note}')
  print_fn(f'Results in {task_dir} (summary.json, table.md, curves.csv, '
           'plots; per-run metrics.csv and TensorBoard logs under '
           f'{os.path.join(task_dir, "tensorboard")}); wall time '
           f"{context['wall_seconds']:.0f} s.")
