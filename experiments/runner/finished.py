"""Runs that have finished: their saved records, read without training."""

import dataclasses
import os
from typing import Optional

from experiments.runner import checkpoints
from experiments.runner import config as config_lib
from experiments.runner import run_params
from experiments.runner import run_setup


def finished_records(config: config_lib.RunConfig, task=None) -> list:
  """The records of `config`'s runs that have finished; trains nothing.

  For a report on a study still running: a run counts only when its record
  was written under this configuration (`finished_run`). Writes nothing in
  the output folder (it need not exist). `task`: the task of `config`
  (default: built from `config`); a model-only task
  (`tasks.create_task(..., model_only=True)`) reads records without data.
  """
  return [done['record'] for done in finished_runs(config, task)]


def finished_runs(config: config_lib.RunConfig, task=None) -> list:
  """`finished_records`, each as its saved dict (record and curve)."""
  quiet = lambda *a: None
  if task is None:
    task = run_setup.create_task(config)
  config = config.resolved(task)
  task_dir = os.path.join(config.output_dir, config.task)
  if not os.path.isdir(task_dir):
    return []
  records = []
  for name, aggregator in run_setup.calibrate(task, config).items():
    for seed in config.seeds:
      done = finished_run(task, dataclasses.replace(config, seed=seed),
                          aggregator, task_dir, quiet)
      if done is not None:
        records.append(done)
  return records


def finished_run(task, config, aggregator, task_dir,
                 print_fn) -> Optional[dict]:
  """The saved record of `config.seed`'s run of `aggregator` if it finished.

  A record whose params differ from `aggregator`'s only in their
  calibration (`checkpoints.PARAMS_RTOL`) is read with the aggregator
  rebuilt at the record's own values, pinned: each is used only if this
  accountant puts it within the target (`calibration_cache.pinned`).
  """
  agg_dir = os.path.join(task_dir, aggregator.name, f'seed{config.seed}')
  if not os.path.exists(os.path.join(agg_dir, checkpoints.RECORD_FILE)):
    return None
  checkpointer = _checkpointer(task, config, aggregator, agg_dir, print_fn)
  done = checkpointer.read_record()
  stored = None if done is not None else checkpointer.recalibration_params()
  if stored is not None:
    own = run_setup.calibrated_aggregator_pinned(
        task, config, aggregator.name, config.uses_history(aggregator.name),
        stored.values())
    done = _checkpointer(task, config, own, agg_dir, print_fn).read_record()
    if done is not None:
      print_fn(f'note: {agg_dir} was trained with parameters {stored}, '
               f'equal to this run\'s {aggregator.params} to a relative '
               f'{checkpoints.PARAMS_RTOL:g} and within the target by this '
               'accountant; reusing it.')
  if done is not None:
    print_fn(f'[{task.name}/{aggregator.name}] already finished in {agg_dir}; '
             'reusing its record (--noresume to rerun).')
  return done


def _checkpointer(task, config, aggregator, agg_dir, print_fn):
  server_lr = config.server_lr_for(task, aggregator.private_setting)
  return checkpoints.RunCheckpointer(
      agg_dir, run_params.fingerprint_config(
          task, config, aggregator, server_lr,
          config.uses_history(aggregator.name)),
      print_fn=print_fn)
