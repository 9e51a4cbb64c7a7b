"""Before a run trains: its task, output folder, calibrated aggregators and
reference rows (`setup`, `calibrate`, `reference_context`)."""

import os

import tensorflow_federated as tff

from tff_dprec import history as tff_history
from tff_dprec import worker_reaper

from experiments.data import evaluation
from experiments.data import tasks as tasks_lib
from experiments.infra import downlink as downlink_lib
from experiments.runner import calibration_cache
from experiments.runner import config as config_lib
from experiments.runner import phases
from experiments.runner import registry


class OutputDirError(ValueError):
  """The output directory cannot be created or written."""


def setup(config: config_lib.RunConfig, print_fn=print, task=None):
  """Returns `(task, config resolved for it, the task's output folder)`.

  `task`: the task of `config`, when the caller has it (else made).

  Raises:
    OutputDirError: If the output folder cannot be written.
    task_types.MissingDataError: If the task's data are missing.
  """
  worker_reaper.install()
  if task is None:
    task = create_task(config)
  config = config.resolved(task)
  task_dir = _prepare_output_dir(config)
  print_fn(f'[{task.name}] data: {task.data_source}. {task.data_note}')
  print_fn(f'[{task.name}] N={task.population} clients, '
           f'{config.clients_per_round} per round, {config.rounds} rounds, '
           f'target epsilon={config.target_epsilon} at '
           f'delta={config.delta:.3g}.')
  return task, config, task_dir


def calibrate(task, config, names=None) -> dict:
  """Calibrates each of `names` (default: every aggregator).

  Every aggregator is calibrated before any trains: a refusal (a target out
  of reach, a fixed parameter over the budget) costs no training.

  Raises:
    aggregator_builders.OverBudgetError: For a fixed parameter over the
      budget.
  """
  names = config.aggregators if names is None else names
  with phases.timed('calibrate and build'):
    return {name: calibrated_aggregator(task, config, name,
                                        config.uses_history(name))
            for name in names}


def calibrated_aggregator_pinned(task, config, name, record_messages, values):
  """`calibrated_aggregator` with a run's own calibrated `values` pinned
  (`calibration_cache.pinned`: each used only if this accountant puts it
  within the target)."""
  with calibration_cache.pinned(values):
    return calibrated_aggregator(task, config, name, record_messages)


def calibrated_aggregator(task, config, name, record_messages):
  """Calibrates aggregator `name` (registry.build) for the task and config."""
  value_type = tff.learning.models.weights_type_from_model(
      task.baseline.model_fn).trainable
  return registry.build(
      name, value_type=value_type, population=task.population,
      clients_per_round=config.clients_per_round, rounds=config.rounds,
      target_epsilon=config.target_epsilon, delta=config.delta,
      bits=config.bits, grouping=config.grouping,
      noise_stddev=config.noise_stddev, l2_clip=config.l2_clip,
      noise_multiplier=config.noise_multiplier, clip_ratio=config.clip_ratio,
      record_messages=record_messages, accounting=config.accounting,
      insecure_test_seed=config.insecure_test_seed)


def create_task(config: config_lib.RunConfig):
  """The task of `config` (`tasks.create_task` with its data settings)."""
  return tasks_lib.create_task(config.task, config.data_dir,
                               embedded_config=config.embedded_config,
                               population=config.population)


def reference_context(task, config: config_lib.RunConfig,
                      cache=None) -> dict:
  """The reference rows (initial model, frequent tags) a run reports.

  `cache`: the `run_cache.RunCache` of the runs that follow (their first
  evaluation is of the same initial model).
  """
  return _context(task, config.resolved(task), cache)


def _context(task, config, cache) -> dict:
  """Reference rows on the same test split: initial model, frequent tags."""
  split = config.eval_split
  context = dict(split=split)
  weights = tff_history.seeded_model_weights(
      task.baseline.model_fn, downlink_lib.initial_model_seed(config.seed))
  metrics = (cache.evaluate(weights, split=split) if cache is not None else
             evaluation.evaluate(task, weights, split=split))
  context['initial_metric'] = metrics[task.metric]
  if task.spec.frequent_tags:
    context['frequent_tags'] = evaluation.frequent_tags_recall_at_5(task,
                                                                    split)
  return context


def _prepare_output_dir(config) -> str:
  """Creates `<output_dir>/<task>` and proves it writable, before any round."""
  task_dir = os.path.join(config.output_dir, config.task)
  try:
    os.makedirs(task_dir, exist_ok=True)
    probe = os.path.join(task_dir, f'.write_test{os.getpid()}')
    with open(probe, 'w') as f:
      f.write('ok')
    os.remove(probe)
  except OSError as e:
    raise OutputDirError(
        f'--output_dir={config.output_dir!r} cannot be used: '
        f'{type(e).__name__}: {e.strerror or e} ({e.filename}).') from None
  return task_dir
