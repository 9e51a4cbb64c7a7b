"""The federated training loop shared by `experiments.run` and the tests.

`run(config)` trains each aggregator of a `RunConfig` in turn, for each of
its seeds, the way `tff.simulation.run_training_process` splits its loop:
calibrate every aggregator before any trains (`calibrated_aggregator`),
build each once (`_build_aggregator`), then per seed set up (`_start_seed`), resume
(`_resume`), rounds (`_run_round`), evaluation, and the record
(`_final_record`). Privacy spent is recorded in
the `PrivacyLedger` before each round runs.
"""

import collections
import contextlib
import dataclasses
import os
import time
from typing import Any, Optional

import numpy as np
import tensorflow_federated as tff

from tff_dprec import history as tff_history

from experiments.runner import calibration_cache
from experiments.runner import checkpoints
from experiments.runner import config as config_lib
from experiments.runner import execution
from experiments.infra import compile_cache
from experiments.infra import distributed
from experiments.infra import downlink as downlink_lib
from experiments.infra import test_hooks
from experiments.runner import ledger as ledger_lib
from experiments.runner import planning
from experiments.runner import registry
from experiments.runner import records
from experiments.runner import report
from experiments.runner import run_params
from experiments.runner import sampling as sampling_lib
from experiments.infra import worker_reaper
from experiments.data import tasks as tasks_lib

DOWNLINKS = config_lib.DOWNLINKS
# Tests only (`experiments.infra.test_hooks`).
TEST_KILL_ENV = test_hooks.KILL_ENV
TEST_TRACE_ENV = test_hooks.TRACE_ENV


# Wall time of each phase of the current `run` (printed at its end).
_PHASES = collections.Counter()


@contextlib.contextmanager
def _timed(phase: str):
  start = time.perf_counter()
  try:
    yield
  finally:
    _PHASES[phase] += time.perf_counter() - start


class OutputDirError(ValueError):
  """The output directory cannot be created or written."""


def run_experiment(*, task_name: str, print_fn=print, **kwargs) -> list:
  """`run(RunConfig(task=task_name, **kwargs))`; returns the record dicts."""
  return run(config_lib.RunConfig(task=task_name, **kwargs),
             print_fn=print_fn)


def run(config: config_lib.RunConfig, print_fn=print,
        context_out: Optional[dict] = None,
        start_time: Optional[float] = None, print_plan: bool = False) -> list:
  """Trains `config.task` once per aggregator; writes and returns records.

  Every round is checkpointed under `output_dir` (`experiments.runner.checkpoints`);
  with `resume` a run continues from the newest valid checkpoint, counting
  rounds lost in a crash as spent privacy (`experiments.runner.ledger`), and
  a finished run's record is reused (an aggregator whose runs have all
  finished is not even built). `workers` > 0 runs the rounds on TFF C++
  workers on loopback; `job_runs` trains only those runs and writes no
  task-level outputs (`experiments.runner.jobs`, which also passes its
  `start_time` for the wall time). `context_out`, when given, receives the
  reference rows (initial model, frequent tags) and the wall time.
  `print_plan` prints the planner's lines for DP-REC's setting
  (`experiments.runner.planning`).

  Raises:
    OutputDirError: If the output directory cannot be written (before any
      round runs).
    ledger.PrivacyLedgerError, checkpoints.CheckpointConfigMismatchError: On
      resume, see those modules.
  """
  start = time.time() if start_time is None else start_time
  _PHASES.clear()
  compiled = dict(compile_cache.stats)
  task, config, task_dir = setup(config, print_fn)
  if any(registry.get(a).needs_test_context for a in config.aggregators):
    execution.allow_oversize_protos()
  pool = _start_pool(task, config, print_fn)
  runs = {name: [seed for seed in config.seeds
                 if config.job_runs is None or (name, seed) in config.job_runs]
          for name in config.aggregators}
  planned = calibrate(task, config,
                      names=[name for name in config.aggregators if runs[name]])
  if print_plan and 'dp_rec' in planned:
    with _timed('planner'):
      planning.print_plan(task, config, planned['dp_rec'], print_fn)
  context = {}
  if config.job_runs is None:  # A job's parent writes the table.
    with _timed('reference rows'):
      context = _context(task, config)
  try:
    results, curves = _train_all(task, config, planned, runs, task_dir, pool,
                                 print_fn)
  finally:
    worker_reaper.reap_context_workers()
    if pool is not None:
      pool.stop()
    tff.backends.native.set_sync_local_cpp_execution_context()
  context['wall_seconds'] = time.time() - start
  context['phase_seconds'] = dict(_PHASES)
  if context_out is not None:
    context_out.update(context)
  if config.job_runs is None:
    _report(task, task_dir, results, curves, context, print_fn)
  _print_costs(compiled, print_fn)
  return results


def _print_costs(compiled_before: dict, print_fn):
  """Time by phase, and computations compiled since `compiled_before`."""
  print_fn('Time by phase (s): ' + ', '.join(
      f'{k} {v:.1f}' for k, v in sorted(_PHASES.items(),
                                          key=lambda kv: -kv[1])))
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


def _train_all(task, config, planned, runs, task_dir, pool, print_fn):
  """Trains (or reuses) every run; returns (records, {name: curves})."""
  results, curves = [], {}
  for name, plan in planned.items():
    finished = [
        finished_run(task, dataclasses.replace(config, seed=seed), plan,
                     task_dir, print_fn) if config.resume else None
        for seed in runs[name]]
    built = None
    if not all(finished):
      with _timed('calibrate and build'):
        built = _build_aggregator(task, config, plan, pool, print_fn)
    for seed, done in zip(runs[name], finished):
      if done is not None:
        record, curve = done['record'], done['curve']
      else:
        seed_config = dataclasses.replace(config, seed=seed)
        record, curve = _train_seed(
            task, seed_config, _built_for_seed(
                task, seed_config, built, task_dir, pool, print_fn),
            task_dir, print_fn)
      results.append(record)
      curves.setdefault(name, []).append(curve)
      if config.job_runs is None:
        report.write_summary(task_dir, results)
  return results, curves


def _built_for_seed(task, config, built, task_dir, pool, print_fn):
  """`built`, or a build at the seed's own parameters where its run started
  at values that differ from this machine's calibration in the last bits
  (`run_params`; which raises CalibrationDriftError if they differ more).
  """
  plan = built.plan
  agg_dir = os.path.join(task_dir, plan.name, f'seed{config.seed}')
  pins = config.resume and run_params.params_to_pin(
      agg_dir, run_params.fingerprint_config(
          task, config, plan, built.server_lr, built.use_history))
  if not pins:
    return built
  with calibration_cache.pinned(pins.values()):
    own = calibrated_aggregator(task, config, plan.name, built.use_history)
  if run_params.normalized(run_params.fingerprint_config(
      task, config, own, built.server_lr, built.use_history)) != (
          run_params.stored(agg_dir)):
    return built  # Not only the last bits: the ledger refuses it.
  print_fn(f'[{task.name}/{plan.name}] seed {config.seed} continues at the '
           f'parameters it started with ({own.params}), equal to this '
           'machine\'s calibration to a relative '
           f'{calibration_cache.LAST_BITS_RTOL:g}.')
  with _timed('calibrate and build'):
    return _build_aggregator(task, config, own, pool, print_fn)


def _report(task, task_dir, results, curves, context, print_fn):
  """Writes the table, curves and plots; prints the table."""
  report.write_table(task_dir, results, context)
  report.write_curves(task_dir, curves, results)
  report.write_plots(task_dir, results, curves, context)
  print_fn('')
  print_fn(report.markdown_table(results, context))
  print_fn(f'Data: {task.data_source}. {task.data_note}')
  print_fn(f'Results in {task_dir} (summary.json, table.md, curves.csv, '
           'plots; per-run metrics.csv and TensorBoard logs under '
           f'{os.path.join(task_dir, "tensorboard")}); wall time '
           f"{context['wall_seconds']:.0f} s.")


def setup(config: config_lib.RunConfig, print_fn=print):
  """Returns `(task, config resolved for it, the task's output folder)`.

  Raises:
    OutputDirError: If the output folder cannot be written.
    tasks.MissingDataError: If the task's data are missing.
  """
  worker_reaper.install()
  task = _create_task(config)
  config = config.resolved(task)
  task_dir = _prepare_output_dir(config)
  print_fn(f'[{task.name}] data: {task.data_source}. {task.data_note}')
  print_fn(f'[{task.name}] N={task.population} clients, '
           f'{config.clients_per_round} per round, {config.rounds} rounds, '
           f'target epsilon={config.target_epsilon} at '
           f'delta={config.delta:.3g}.')
  return task, config, task_dir


def calibrate(task, config, names=None) -> dict:
  """Plans (calibrates) each of `names` (default: every aggregator).

  Every aggregator is calibrated before any trains: a refusal (a target out
  of reach, a fixed parameter over the budget) costs no training.

  Raises:
    registry.OverBudgetError: For a fixed parameter over the budget.
  """
  names = config.aggregators if names is None else names
  with _timed('calibrate and build'):
    return {name: calibrated_aggregator(task, config, name, config.uses_history(name))
            for name in names}


def _create_task(config):
  return tasks_lib.create_task(config.task, config.data_dir,
                               embedded_config=config.embedded_config,
                               population=config.population)


def finished_records(config: config_lib.RunConfig) -> list:
  """The records of `config`'s runs that have finished; trains nothing.

  For a report on a study still running: a run counts only when its record
  was written under this configuration (`finished_run`). Writes nothing in
  the output folder (it need not exist).
  """
  return [done['record'] for done in finished_runs(config)]


def finished_runs(config: config_lib.RunConfig) -> list:
  """`finished_records`, each as its saved dict (record and curve)."""
  quiet = lambda *a: None
  task = _create_task(config)
  config = config.resolved(task)
  task_dir = os.path.join(config.output_dir, config.task)
  if not os.path.isdir(task_dir):
    return []
  records = []
  for name, plan in calibrate(task, config).items():
    for seed in config.seeds:
      done = finished_run(task, dataclasses.replace(config, seed=seed), plan,
                          task_dir, quiet)
      if done is not None:
        records.append(done)
  return records


def reference_context(task, config: config_lib.RunConfig) -> dict:
  """The reference rows (initial model, frequent tags) a run reports."""
  return _context(task, config.resolved(task))


def _context(task, config) -> dict:
  """Reference rows on the same test split: initial model, frequent tags."""
  split = config.eval_split
  context = dict(split=split)
  weights = tff_history.seeded_model_weights(
      task.baseline.model_fn, downlink_lib.initial_model_seed(config.seed))
  context['initial_metric'] = tasks_lib.evaluate(
      task, weights, split=split)[task.metric]
  if task.name == 'stackoverflow_lr':
    context['frequent_tags'] = tasks_lib.frequent_tags_recall_at_5(task,
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


@dataclasses.dataclass
class _Run:
  """One aggregator's run: what every phase of the loop needs."""
  task: Any
  config: Any
  plan: Any
  process: Any
  history: Optional[downlink_lib.HistoryDownlink]
  checkpointer: checkpoints.RunCheckpointer
  ledger: ledger_lib.PrivacyLedger
  agg_dir: str
  print_fn: Any

  @property
  def name(self) -> str:
    return self.plan.name

  def log(self, text: str) -> None:
    self.print_fn(f'[{self.task.name}/{self.name}] {text}')


@dataclasses.dataclass
class _Built:
  """An aggregator's plan and learning process, shared by its seeds."""
  plan: Any
  process: Any
  server_optimizer: Any
  use_history: bool
  server_lr: float


def _build_aggregator(task, config, plan, pool, print_fn) -> _Built:
  """Builds the learning process of a planned (calibrated) aggregator."""
  name = plan.name
  use_history = config.uses_history(name)
  if config.downlink == 'history' and not use_history:
    print_fn(f'[{task.name}/{name}] no messages to send as history: '
             'full-model downlink.')
  spec = registry.get(name)
  if config.insecure_test_seed is not None and spec.supports_history:
    print_fn(f'[{task.name}/{name}] WARNING: insecure test mode: client '
             'seeds are deterministic functions of their updates; the '
             'privacy guarantee does not hold.')
  warning = registry.idealisation_warning(plan.params)
  if warning:
    print_fn(f'[{task.name}/{name}] {warning}')
  server_lr = config.server_lr_for(task, plan.private_setting)
  print_fn(f'[{task.name}/{name}] parameters: {plan.params}, '
           f'client_lr={config.client_lr}, server_lr={server_lr}, '
           f'server optimizer '
           f'{execution.optimizer_name(task, config, plan.private_setting)}')
  execution.set_context(plan, pool)
  server_optimizer = execution.server_optimizer_for(
      task, server_lr, config, plan.private_setting)
  process = task.learning_process(
      execution.build_process(task, plan, config.client_lr,
                              server_optimizer))
  return _Built(plan, process, server_optimizer, use_history, server_lr)


def finished_run(task, config, plan, task_dir, print_fn) -> Optional[dict]:
  """The saved record of `config.seed`'s run of `plan` if it finished."""
  agg_dir = os.path.join(task_dir, plan.name, f'seed{config.seed}')
  if not os.path.exists(os.path.join(agg_dir, checkpoints.RECORD_FILE)):
    return None
  server_lr = config.server_lr_for(task, plan.private_setting)
  checkpointer = checkpoints.RunCheckpointer(
      agg_dir, run_params.fingerprint_config(task, config, plan, server_lr,
                                   config.uses_history(plan.name)),
      print_fn=print_fn)
  done = checkpointer.read_record()
  if done is not None:
    print_fn(f'[{task.name}/{plan.name}] already finished in {agg_dir}; '
             'reusing its record (--noresume to rerun).')
  return done


def _train_seed(task, config, built, task_dir, print_fn):
  """Trains one aggregator with `config.seed` to the end (or its budget).

  `run` has already reused the run's record if it finished (`finished_run`).
  """
  with _timed('seed setup'):
    run_, state = _start_seed(task, config, built, task_dir, print_fn)
  if not config.resume:
    run_.checkpointer.remove_all()
    run_.ledger.archive()
  progress, state = _resume(run_, state)
  if not progress.curve:
    with _timed('evaluation'):
      _evaluate_point(run_, progress, state, 0)
  release = execution.MetricsRelease(
      os.path.join(run_.agg_dir, 'metrics.csv'),
      os.path.join(task_dir, 'tensorboard', run_.name, f'seed{config.seed}'))
  bar = report.progress_bar(run_, progress)
  for round_num in range(progress.completed + 1, config.rounds + 1):
    if not _within_budget(run_, progress, round_num):
      break
    state, row = _run_round(run_, progress, state, round_num)
    with _timed('release metrics'):
      release(row, round_num)
    with _timed('checkpoint'):
      run_.checkpointer.save(round_num, state, progress.to_driver())
    test_hooks.maybe_kill(run_.name, round_num, 'saved')
    report.update_bar(bar, run_, progress, row)
    if (round_num % execution.CONTEXT_ROUNDS == 0 and
        round_num < config.rounds and not config.workers):
      with _timed('fresh context'):
        execution.set_context(run_.plan)
  if bar is not None:
    bar.close()
  if progress.stopped:
    run_.log(progress.stopped)
  with _timed('final evaluation and record'):
    record = _final_record(run_, progress, state)
  run_.checkpointer.write_record(record, progress.curve)
  run_.log(f'seed {config.seed}: final {task.metric_label}='
           f'{record["final_metric"]:.4f} epsilon={progress.epsilon} '
           f'rounds={progress.completed} '
           f'{record["seconds_per_round"]:.2f} s/round')
  return record, progress.curve


def _start_seed(task, config, built, task_dir, print_fn):
  """The seed's initial state, history downlink, checkpoints and ledger."""
  plan, process = built.plan, built.process
  # Every aggregator starts from the same model, a function of `seed` (R').
  state = process.set_model_weights(
      process.initialize(),
      tff_history.seeded_model_weights(
          task.baseline.model_fn,
          downlink_lib.initial_model_seed(config.seed)))
  history = None
  if built.use_history:
    history = downlink_lib.HistoryDownlink(
        model_fn=task.baseline.model_fn, factory=plan.rec_sum,
        server_optimizer=built.server_optimizer, seed=config.seed,
        client_ids=task.train_client_ids,
        verify_clients=config.verify_clients,
        analytic=registry.get(plan.name).in_law)
    history.initialize(process, state, plan.upload_bits_per_client)
  agg_dir = os.path.join(task_dir, plan.name, f'seed{config.seed}')
  os.makedirs(agg_dir, exist_ok=True)
  fingerprint_config = run_params.fingerprint_config(task, config, plan,
                                           built.server_lr, built.use_history)
  checkpointer = checkpoints.RunCheckpointer(agg_dir, fingerprint_config,
                                             print_fn=print_fn)
  run_params.record(agg_dir, fingerprint_config, restart=not config.resume)
  ledger = ledger_lib.PrivacyLedger(agg_dir, checkpointer.fingerprint,
                                    print_fn=print_fn)
  return _Run(task, config, plan, process, history, checkpointer, ledger,
              agg_dir, print_fn), state


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


def _resume(run_, state):
  """Restores the newest checkpoint and reconciles it with the ledger."""
  progress = records.RunProgress(
      rng_state=np.random.default_rng(run_.config.seed).bit_generator.state)
  # Checkpoints first: foreign ones are set aside and named before the
  # ledger (of that foreign run too) is refused.
  loaded = run_.checkpointer.load_latest(state) if run_.config.resume else None
  entry = run_.ledger.read() if run_.config.resume else None
  if loaded is not None:
    completed, state, driver = loaded
    progress = records.RunProgress.from_driver(completed, driver)
    if run_.history is not None:
      run_.history.restore(driver['history'])
    run_.log(f'resuming after round {completed} from {run_.agg_dir}/'
             'checkpoints.')
  else:
    metrics_path = os.path.join(run_.agg_dir, 'metrics.csv')
    if os.path.exists(metrics_path):
      os.remove(metrics_path)
  reconciled = run_.ledger.reconcile(
      entry, checkpoint_round=None if loaded is None else progress.completed,
      checkpoint_lost=progress.lost_rounds,
      checkpoint_upload_bits=progress.upload_bits,
      checkpoint_download_bits=progress.download_bits,
      # --noresume starts over on purpose (its old ledger is archived).
      any_checkpoints=(run_.config.resume and
                       run_.checkpointer.has_checkpoints()))
  if reconciled.unrecorded_rounds:
    if run_.config.insecure_test_seed is None:
      progress.lost_rounds += reconciled.unrecorded_rounds
      progress.upload_bits += reconciled.unrecorded_upload_bits
      progress.download_bits += reconciled.unrecorded_download_bits
      run_.log(f'{reconciled.unrecorded_rounds} round(s) ran after the last '
               'checkpoint and were lost; their messages may have been '
               'released, so they count as spent privacy (and their '
               'traffic as sent).')
    else:
      # Test mode: rerunning the round reproduces the same messages.
      run_.log(f'{reconciled.unrecorded_rounds} lost round(s) rerun in '
               'insecure test mode (same messages, no extra privacy cost).')
  if run_.plan.private:
    progress.epsilon = run_.plan.epsilon_after(progress.spent_rounds)
  return progress, state


def _within_budget(run_, progress, round_num) -> bool:
  """False (and the reason in `progress.stopped`) past the privacy budget."""
  if not run_.plan.private:
    return True
  next_epsilon = run_.plan.epsilon_after(round_num + progress.lost_rounds)
  if not next_epsilon <= run_.config.target_epsilon * (1 + 1e-9):
    progress.stopped = (f'stopped before round {round_num}: epsilon would '
                        f'reach {next_epsilon:.4f} > '
                        f'{run_.config.target_epsilon}')
    return False
  return True


def _run_round(run_, progress, state, round_num):
  """Samples, records the ledger, runs one round; returns (state, row)."""
  config, plan = run_.config, run_.plan
  # The state is restored next; the seed only avoids drawing OS entropy.
  rng = np.random.default_rng(0)
  rng.bit_generator.state = progress.rng_state
  ids = sampling_lib.sample_clients(rng, run_.task.train_client_ids,
                                    config.clients_per_round, plan.sampling)
  progress.rng_state = rng.bit_generator.state
  if run_.history is not None:
    with _timed('history downlink'):
      download = run_.history.before_round(round_num - 1, ids, run_.process,
                                           state)
  else:
    download = plan.download_bits_per_client * len(ids)
  upload = plan.upload_bits_per_client * len(ids)
  # Durably recorded before any message can exist (never under-counted).
  run_.ledger.record_start(ledger_lib.LedgerEntry(
      started=round_num, lost=progress.lost_rounds,
      upload_bits=progress.upload_bits + upload,
      download_bits=progress.download_bits + download))
  test_hooks.trace_start(run_.name, round_num)
  test_hooks.maybe_kill(run_.name, round_num, 'started')
  with _timed('client datasets'):
    round_input = run_.task.round_input(
        ids, seed=sampling_lib.client_data_seed(config.seed, round_num))
  t0 = time.time()
  with _timed('process.next'):
    output = run_.process.next(state, round_input)
  progress.round_times.append(time.time() - t0)
  test_hooks.maybe_kill(run_.name, round_num, 'trained')
  measured = output.metrics.get('aggregator', {}).get('mean_value', {})
  if run_.history is not None:
    with _timed('history downlink'):
      run_.history.after_round(round_num - 1, measured)
    progress.history_state = run_.history.get_state()
  progress.completed = round_num
  if plan.private:
    progress.epsilon = plan.epsilon_after(round_num + progress.lost_rounds)
  progress.upload_bits += upload
  progress.download_bits += download
  train = output.metrics['client_work']['train']
  # Private runs do not collect client losses (`no_client_metrics`).
  row = dict(train_loss=float(train.get('loss', float('nan'))),
             epsilon=progress.epsilon or 0.0, upload_bits=upload,
             download_bits=download, seconds=progress.round_times[-1])
  if 'upload_bits' in measured:
    # DP-REC reports the bits of the messages it received.
    row['upload_bits'] = int(measured['upload_bits'])
  if round_num % config.eval_every == 0 and round_num != config.rounds:
    with _timed('evaluation'):
      row[run_.task.metric] = _evaluate_point(run_, progress, output.state,
                                              round_num)
  return output.state, row


def _evaluate_point(run_, progress, state, round_num) -> float:
  """Evaluates `state`'s model; appends a point to the learning curve."""
  weights = run_.process.get_model_weights(state)
  metric = tasks_lib.evaluate(
      run_.task, weights, max_examples=run_.config.eval_examples,
      split=run_.config.eval_split)[run_.task.metric]
  progress.last_metric = metric
  progress.curve.append(_curve_point(run_, progress, round_num, metric))
  return metric


def _curve_point(run_, progress, round_num, metric) -> dict:
  """A learning-curve point: metric, epsilon and cumulative bits so far."""
  return dict(round=round_num, metric=metric,
              epsilon=progress.epsilon if run_.plan.private else None,
              upload_bits=progress.upload_bits,
              download_bits=progress.download_bits)


def _final_record(run_, progress, state) -> dict:
  """Evaluates the final model and returns the run's record (a dict)."""
  task, plan, config = run_.task, run_.plan, run_.config
  if run_.history is not None:
    run_.history.finish(progress.completed, run_.process, state)
  final = tasks_lib.evaluate(task, run_.process.get_model_weights(state),
                             split=config.eval_split)
  final_metric = final[task.metric]
  # The last point is the final evaluation (whole split), also when the
  # budget stopped the run right after an intermediate evaluation.
  point = _curve_point(run_, progress, progress.completed, final_metric)
  if progress.curve and progress.curve[-1]['round'] == progress.completed:
    progress.curve[-1] = point
  else:
    progress.curve.append(point)
  record = records.RunRecord(
      task=task.name, aggregator=plan.name, data_source=task.data_source,
      metric=task.metric, metric_label=task.metric_label,
      final_metric=final_metric, final_metrics=final,
      epsilon=progress.epsilon, delta=config.delta,
      target_epsilon=config.target_epsilon, accounting=plan.accounting,
      local_epsilon_per_participation=plan.local_epsilon,
      rounds=progress.completed, clients_per_round=config.clients_per_round,
      population=task.population,
      sampling=plan.sampling,
      params=run_params.jsonable(plan.params),
      upload_bits_per_client_round=plan.upload_bits_per_client,
      download_bits_per_client_round=plan.download_bits_per_client,
      upload_bits_total=progress.upload_bits,
      download_bits_total=progress.download_bits,
      upload_gb=progress.upload_bits / report.GIGABYTE_BITS,
      download_gb=progress.download_bits / report.GIGABYTE_BITS,
      seconds_per_round=(float(np.mean(progress.round_times))
                         if progress.round_times else 0.0),
      stopped=progress.stopped,
      downlink=_downlink_label(run_.history),
      lost_rounds=progress.lost_rounds,
      insecure_test_mode=config.insecure_test_seed is not None,
      seed=config.seed)
  if run_.history is not None:
    _add_history_summary(run_, record, progress)
  return record.to_dict()


def _add_history_summary(run_, record, progress):
  h = run_.history
  record.extra.update(h.summary())
  record.download_bits_per_client_round = (
      progress.download_bits / max(1, h.history_downlinks + h.full_downlinks))
  if h.analytic:
    exact = 'none: sized analytically (a simulation in law has no messages)'
  elif h.mismatches == 0:
    exact = 'bit-exact'
  else:
    exact = f'{h.mismatches} MISMATCHES, max |diff| {h.max_abs_diff:.3g}'
  run_.log(f'history downlink: {h.history_downlinks} histories, '
           f'{h.full_downlinks} full states ({h.full_bits} bits each); '
           f'replay of {len(h.tracked)} clients, {h.checks} checks: {exact}.')


def _downlink_label(history) -> str:
  if history is None:
    return 'full'
  return 'history (analytic)' if history.analytic else 'history'
