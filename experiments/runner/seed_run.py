"""One aggregator's runs, seed by seed: the per-seed loop of `training.run`.

`build_aggregator` builds a calibrated aggregator's learning process once;
`train_seed` trains one seed with it, the way `tff.simulation`'s training
loop splits by phase: set up (`_start_seed`), resume (`_resume`), rounds
(`_run_round`, each recorded in the `PrivacyLedger` before it runs),
evaluation, and the record (`_final_record`).
"""

import dataclasses
import os
import time
from typing import Any, Optional

import numpy as np

from tff_dprec import history as tff_history

from experiments.infra import downlink as downlink_lib
from experiments.infra import test_hooks
from experiments.runner import checkpoints
from experiments.runner import execution
from experiments.runner import ledger as ledger_lib
from experiments.runner import phases
from experiments.runner import progress as progress_lib
from experiments.runner import records
from experiments.runner import registry
from experiments.runner import report
from experiments.runner import run_cache
from experiments.runner import run_params
from experiments.runner import sampling as sampling_lib


@dataclasses.dataclass
class _Run:
  """One aggregator's run: what every phase of the loop needs."""
  task: Any
  config: Any
  aggregator: Any
  process: Any
  history: Optional[downlink_lib.HistoryDownlink]
  checkpointer: checkpoints.RunCheckpointer
  ledger: ledger_lib.PrivacyLedger
  agg_dir: str
  print_fn: Any
  # Round inputs and evaluations shared with the process's other runs.
  cache: run_cache.RunCache

  @property
  def name(self) -> str:
    return self.aggregator.name

  def log(self, text: str) -> None:
    self.print_fn(f'[{self.task.name}/{self.name}] {text}')


@dataclasses.dataclass
class Built:
  """A calibrated aggregator and its learning process, shared by its seeds."""
  aggregator: Any
  process: Any
  server_optimizer: Any
  use_history: bool
  server_lr: float


def build_aggregator(task, config, aggregator, pool, print_fn) -> Built:
  """Builds the learning process of a calibrated aggregator."""
  name = aggregator.name
  use_history = config.uses_history(name)
  if config.downlink == 'history' and not use_history:
    print_fn(f'[{task.name}/{name}] no messages to send as history: '
             'full-model downlink.')
  spec = registry.get(name)
  if config.insecure_test_seed is not None and spec.supports_history:
    print_fn(f'[{task.name}/{name}] WARNING: insecure test mode: client '
             'seeds are deterministic functions of their updates; the '
             'privacy guarantee does not hold.')
  warning = registry.idealisation_warning(aggregator.params)
  if warning:
    print_fn(f'[{task.name}/{name}] {warning}')
  server_lr = config.server_lr_for(task, aggregator.private_setting)
  optimizer_name = execution.optimizer_name(task, config,
                                            aggregator.private_setting)
  print_fn(f'[{task.name}/{name}] parameters: {aggregator.params}, '
           f'client_lr={config.client_lr}, server_lr={server_lr}, '
           f'server optimizer {optimizer_name}')
  execution.set_context(aggregator, pool)
  server_optimizer = execution.server_optimizer_for(
      task, server_lr, config, aggregator.private_setting)
  process = task.learning_process(
      execution.build_process(task, aggregator, config.client_lr,
                              server_optimizer))
  return Built(aggregator, process, server_optimizer, use_history, server_lr)


def train_seed(task, config, built, task_dir, print_fn, cache=None):
  """Trains one aggregator with `config.seed` to the end (or its budget).

  `run` has already reused the run's record if it finished (`finished_run`).
  `cache`: a `run_cache.RunCache` of `task` that the process's runs share
  (default: one of this run's own).
  """
  with phases.timed('seed setup'):
    run_, state = _start_seed(task, config, built, task_dir, print_fn,
                              cache or run_cache.RunCache(task))
  if not config.resume:
    run_.checkpointer.remove_all()
    run_.ledger.archive()
  progress, state = _resume(run_, state)
  if not progress.curve:
    with phases.timed('evaluation'):
      _evaluate_point(run_, progress, state, 0)
  release = execution.MetricsRelease(
      os.path.join(run_.agg_dir, 'metrics.csv'),
      os.path.join(task_dir, 'tensorboard', run_.name, f'seed{config.seed}'))
  display = progress_lib.RunProgress(run_, progress)
  for round_num in range(progress.completed + 1, config.rounds + 1):
    if not _within_budget(run_, progress, round_num):
      break
    state, row = _run_round(run_, progress, state, round_num)
    with phases.timed('release metrics'):
      release(row, round_num)
    with phases.timed('checkpoint'):
      run_.checkpointer.save(round_num, state, progress.to_driver())
    test_hooks.maybe_kill(run_.name, round_num, 'saved')
    display.update(progress, row)
    if (round_num % execution.CONTEXT_ROUNDS == 0 and
        round_num < config.rounds and not config.workers):
      with phases.timed('fresh context'):
        execution.set_context(run_.aggregator)
  display.close()
  if progress.stopped:
    run_.log(progress.stopped)
  with phases.timed('final evaluation and record'):
    record = _final_record(run_, progress, state)
  run_.checkpointer.write_record(record, progress.curve)
  run_.log(f'seed {config.seed}: final {task.metric_label}='
           f'{record["final_metric"]:.4f} epsilon={progress.epsilon} '
           f'rounds={progress.completed} '
           f'{record["seconds_per_round"]:.2f} s/round')
  return record, progress.curve


def _start_seed(task, config, built, task_dir, print_fn, cache):
  """The seed's initial state, history downlink, checkpoints and ledger."""
  aggregator, process = built.aggregator, built.process
  # Every aggregator starts from the same model, a function of `seed` (R').
  state = process.set_model_weights(
      process.initialize(),
      tff_history.seeded_model_weights(
          task.baseline.model_fn,
          downlink_lib.initial_model_seed(config.seed)))
  history = None
  if built.use_history:
    history = downlink_lib.HistoryDownlink(
        model_fn=task.baseline.model_fn, factory=aggregator.rec_sum,
        server_optimizer=built.server_optimizer, seed=config.seed,
        client_ids=task.train_client_ids,
        verify_clients=config.verify_clients,
        analytic=registry.get(aggregator.name).in_law)
    history.initialize(process, state, aggregator.upload_bits_per_client)
  agg_dir = os.path.join(task_dir, aggregator.name, f'seed{config.seed}')
  os.makedirs(agg_dir, exist_ok=True)
  fingerprint_config = run_params.fingerprint_config(task, config, aggregator,
                                           built.server_lr, built.use_history)
  checkpointer = checkpoints.RunCheckpointer(agg_dir, fingerprint_config,
                                             print_fn=print_fn)
  run_params.record(agg_dir, fingerprint_config, restart=not config.resume)
  ledger = ledger_lib.PrivacyLedger(agg_dir, checkpointer.fingerprint,
                                    print_fn=print_fn)
  return _Run(task, config, aggregator, process, history, checkpointer, ledger,
              agg_dir, print_fn, cache), state


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
  if run_.aggregator.private:
    progress.epsilon = run_.aggregator.epsilon_after(progress.spent_rounds)
  return progress, state


def _within_budget(run_, progress, round_num) -> bool:
  """False (and the reason in `progress.stopped`) past the privacy budget.

  Round `round_num` runs only if the epsilon after it (lost rounds counted)
  is at most the target, with no tolerance: a calibration's own value meets
  the target by its accountant's check, and the per-round epsilons are the
  same accountant's.
  """
  if not run_.aggregator.private:
    return True
  target = run_.config.target_epsilon
  next_epsilon = run_.aggregator.epsilon_after(round_num + progress.lost_rounds)
  if not next_epsilon <= target:  # nan too.
    shown = f'{next_epsilon:.4f}'
    if float(shown) <= target:  # The excess is below 4 decimals: all digits.
      shown = repr(next_epsilon)
    progress.stopped = (f'stopped before round {round_num}: epsilon would '
                        f'reach {shown} > {target}')
    return False
  return True


def _run_round(run_, progress, state, round_num):
  """Samples, records the ledger, runs one round; returns (state, row)."""
  config, aggregator = run_.config, run_.aggregator
  # The state is restored next; the seed only avoids drawing OS entropy.
  rng = np.random.default_rng(0)
  rng.bit_generator.state = progress.rng_state
  ids = sampling_lib.sample_clients(rng, run_.task.train_client_ids,
                                    config.clients_per_round,
                                    aggregator.sampling)
  progress.rng_state = rng.bit_generator.state
  if run_.history is not None:
    with phases.timed('history downlink'):
      download = run_.history.before_round(round_num - 1, ids, run_.process,
                                           state)
  else:
    download = aggregator.download_bits_per_client * len(ids)
  upload = aggregator.upload_bits_per_client * len(ids)
  # Durably recorded before any message can exist (never under-counted).
  run_.ledger.record_start(ledger_lib.LedgerEntry(
      started=round_num, lost=progress.lost_rounds,
      upload_bits=progress.upload_bits + upload,
      download_bits=progress.download_bits + download))
  test_hooks.trace_start(run_.name, round_num)
  test_hooks.maybe_kill(run_.name, round_num, 'started')
  with phases.timed('client datasets'):
    round_input = run_.cache.round_input(
        ids, sampling_lib.client_data_seed(config.seed, round_num))
  t0 = time.time()
  with phases.timed('process.next'):
    output = run_.process.next(state, round_input)
  progress.round_times.append(time.time() - t0)
  test_hooks.maybe_kill(run_.name, round_num, 'trained')
  measured = output.metrics.get('aggregator', {}).get('mean_value', {})
  if run_.history is not None:
    with phases.timed('history downlink'):
      run_.history.after_round(round_num - 1, measured)
    progress.history_state = run_.history.get_state()
  progress.completed = round_num
  if aggregator.private:
    progress.epsilon = aggregator.epsilon_after(
        round_num + progress.lost_rounds)
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
    with phases.timed('evaluation'):
      row[run_.task.metric] = _evaluate_point(run_, progress, output.state,
                                              round_num)
  return output.state, row


def _evaluate_point(run_, progress, state, round_num) -> float:
  """Evaluates `state`'s model; appends a point to the learning curve."""
  weights = run_.process.get_model_weights(state)
  metric = run_.cache.evaluate(
      weights, max_examples=run_.config.eval_examples,
      split=run_.config.eval_split)[run_.task.metric]
  progress.last_metric = metric
  progress.curve.append(_curve_point(run_, progress, round_num, metric))
  return metric


def _curve_point(run_, progress, round_num, metric) -> dict:
  """A learning-curve point: metric, epsilon and cumulative bits so far."""
  return dict(round=round_num, metric=metric,
              epsilon=progress.epsilon if run_.aggregator.private else None,
              upload_bits=progress.upload_bits,
              download_bits=progress.download_bits)


def _final_record(run_, progress, state) -> dict:
  """Evaluates the final model and returns the run's record (a dict)."""
  task, aggregator, config = run_.task, run_.aggregator, run_.config
  if run_.history is not None:
    run_.history.finish(progress.completed, run_.process, state)
  final = run_.cache.evaluate(run_.process.get_model_weights(state),
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
      task=task.name, aggregator=aggregator.name, data_source=task.data_source,
      metric=task.metric, metric_label=task.metric_label,
      final_metric=final_metric, final_metrics=final,
      epsilon=progress.epsilon, delta=config.delta,
      target_epsilon=config.target_epsilon, accounting=aggregator.accounting,
      local_epsilon_per_participation=aggregator.local_epsilon,
      rounds=progress.completed, clients_per_round=config.clients_per_round,
      population=task.population,
      sampling=aggregator.sampling,
      params=run_params.jsonable(aggregator.params),
      upload_bits_per_client_round=aggregator.upload_bits_per_client,
      download_bits_per_client_round=aggregator.download_bits_per_client,
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
