"""The federated training loop shared by `experiments.run` and the tests."""

import asyncio
import math
import os
import signal
import time
from typing import Optional, Sequence

import numpy as np
import tensorflow_federated as tff

from tff_dprec import history as tff_history
from tff_dprec.aggregators import dp_rec

from experiments import baselines
from experiments import checkpoints
from experiments import distributed
from experiments import downlink as downlink_lib
from experiments import report
from experiments import worker_reaper
from experiments import tasks as tasks_lib


def allow_oversize_protos():
  """DDGauss's computation exceeds protobuf's default nesting limit."""
  try:
    from google._upb import _message  # pylint: disable=g-import-not-at-top
    _message.SetAllowOversizeProtos(True)
  except ImportError:  # Other protobuf backends have no such limit switch.
    pass


DOWNLINKS = ('auto', 'history', 'full')
# Tests only: "<aggregator>:<round>:<started|trained|saved>" makes the run
# SIGKILL itself at that point, to test resuming.
TEST_KILL_ENV = 'TFF_DPREC_TEST_KILL'


def _maybe_kill(kill_at: str, name: str, round_num: int, phase: str):
  if kill_at and kill_at == f'{name}:{round_num}:{phase}':
    os.kill(os.getpid(), signal.SIGKILL)


def server_optimizer_for(task: tasks_lib.Task, server_lr: float):
  d = task.defaults
  if d.server_optimizer == 'adam':
    return tff.learning.optimizers.build_adam(server_lr)
  return tff.learning.optimizers.build_sgdm(
      server_lr, momentum=d.server_momentum or None)


def build_process(task: tasks_lib.Task, aggregator_plan, client_lr: float,
                  server_optimizer):
  # Private runs release no client training metrics: they would leave the
  # clients outside the DP mechanism.
  metrics = {}
  if aggregator_plan.private:
    metrics['metrics_aggregator'] = dp_rec.no_client_metrics
  return tff.learning.algorithms.build_unweighted_fed_avg(
      task.baseline.model_fn,
      client_optimizer_fn=tff.learning.optimizers.build_sgdm(client_lr),
      server_optimizer_fn=server_optimizer,
      model_aggregator=aggregator_plan.factory, **metrics)


def run_experiment(*, task_name: str, aggregators: Sequence[str],
                   data_dir: str, output_dir: str,
                   rounds: Optional[int] = None,
                   clients_per_round: Optional[int] = None,
                   bits: Optional[int] = None, grouping=None,
                   noise_stddev: Optional[float] = None,
                   l2_clip: Optional[float] = None,
                   target_epsilon: float = 1.0, delta: Optional[float] = None,
                   seed: int = 0, eval_every: Optional[int] = None,
                   eval_examples: int = 2000,
                   client_lr: Optional[float] = None,
                   server_lr: Optional[float] = None, progress: bool = True,
                   embedded_config: Optional[dict] = None,
                   downlink: str = 'auto', verify_clients: int = 3,
                   resume: bool = True,
                   insecure_test_seed: Optional[int] = None,
                   workers: int = 0,
                   accounting_mode: str = 'sound',
                   print_fn=print) -> list[dict]:
  """Trains `task_name` once per aggregator; writes and returns the summary.

  `downlink`: `'history'` sends REC-based aggregators' clients the messages
  since their last round (`tff_dprec.history`), `'full'` the model; `'auto'`
  (default) is history for dp_rec and rec, the model for the others (which
  have no messages to send). With history, `verify_clients` clients are
  replayed and compared bit for bit with the server's model.

  Every round is checkpointed under `output_dir` (`experiments.checkpoints`);
  with `resume` (default) a run continues from the newest valid checkpoint,
  counting rounds lost in a crash as spent privacy. `insecure_test_seed`
  (tests only, not private) makes DP-REC's messages reproducible, so a
  resumed run can be compared with an uninterrupted one.

  `workers` > 0 runs the rounds on that many TFF C++ worker processes on
  loopback (`experiments.distributed`), started and stopped here.
  """
  if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
    raise ValueError(f'workers must be an int >= 0, found {workers!r}.')
  if workers and any(a.startswith('ddgauss') for a in aggregators):
    raise ValueError(
        'DDGauss runs only in TFF\'s test execution context (its secure sum), '
        'not on workers; drop it from aggregators or use workers=0.')
  if downlink not in DOWNLINKS:
    raise ValueError(f'downlink={downlink!r} is unknown; choose from '
                     f'{DOWNLINKS}.')
  if isinstance(verify_clients, bool) or not isinstance(verify_clients, int) \
      or verify_clients < 0:
    raise ValueError(
        f'verify_clients must be an int >= 0, found {verify_clients!r}.')
  start = time.time()
  worker_reaper.install()
  task = tasks_lib.create_task(task_name, data_dir,
                               embedded_config=embedded_config)
  d = task.defaults
  rounds = rounds or d.rounds
  clients_per_round = clients_per_round or d.clients_per_round
  bits = bits or d.bits
  grouping = grouping if grouping is not None else d.grouping
  noise_stddev = noise_stddev or d.noise_stddev
  l2_clip = l2_clip or d.l2_clip
  eval_every = eval_every or d.eval_every
  client_lr = client_lr or d.client_lr
  population = task.population
  if clients_per_round > population:
    raise ValueError(f'clients_per_round={clients_per_round} exceeds the '
                     f'population of {population} training clients.')
  delta = delta if delta is not None else population**-1.1
  task_dir = os.path.join(output_dir, task_name)
  os.makedirs(task_dir, exist_ok=True)
  print_fn(f'[{task_name}] data: {task.data_source}. {task.data_note}')
  print_fn(f'[{task_name}] N={population} clients, {clients_per_round} per '
           f'round, {rounds} rounds, target epsilon={target_epsilon} at '
           f'delta={delta:.3g}.')
  if any(a.startswith('ddgauss') for a in aggregators):
    allow_oversize_protos()
  value_type = tff.learning.models.weights_type_from_model(
      task.baseline.model_fn).trainable

  pool = None
  if workers:
    pool = distributed.WorkerPool(workers)
    pool.start()
    print_fn(f'[{task_name}] running on {workers} TFF workers at loopback '
             f'ports {pool.ports}.')
  try:
    records, curves = _train_all(
        task, aggregators, pool, print_fn=print_fn, downlink=downlink,
        population=population, clients_per_round=clients_per_round,
        rounds=rounds, target_epsilon=target_epsilon, delta=delta, bits=bits,
        accounting_mode=accounting_mode, grouping=grouping, noise_stddev=noise_stddev, l2_clip=l2_clip,
        insecure_test_seed=insecure_test_seed, explicit_server_lr=server_lr,
        seed=seed, eval_every=eval_every, eval_examples=eval_examples,
        client_lr=client_lr, task_dir=task_dir, progress=progress,
        verify_clients=verify_clients, resume=resume, value_type=value_type)
  finally:
    worker_reaper.reap_context_workers()
    if pool is not None:
      pool.stop()
    tff.backends.native.set_sync_local_cpp_execution_context()
  report.write_summary(task_dir, records)
  report.write_table(task_dir, records)
  report.write_plots(task_dir, records, curves)
  print_fn('')
  print_fn(report.markdown_table(records))
  print_fn(f'Data: {task.data_source}. {task.data_note}')
  print_fn(f'Results in {task_dir} (summary.json, table.md, plots, per-round '
           f'metrics.csv); wall time {time.time() - start:.0f} s.')
  return records


def _check_ledger(ledger, completed, lost_rounds, agg_dir):
  """Refuses to resume when the ledger is missing or behind the checkpoint.

  The checkpoint of round `completed` proves that at least
  `completed + lost_rounds` rounds were spent; the ledger must say as much.
  """
  spent = completed + lost_rounds
  if ledger is None:
    raise checkpoints.PrivacyLedgerError(
        f'{agg_dir}/privacy_ledger.json is missing, but the checkpoint of '
        f'round {completed} shows at least {spent} round(s) of privacy spent; '
        'rounds started after it are unknown. Restore the ledger, or use '
        'another --output_dir (--noresume would archive the checkpoints, '
        'not recover what was spent).')
  if ledger['started'] + ledger['lost'] < spent:
    raise checkpoints.PrivacyLedgerError(
        f'{agg_dir}/privacy_ledger.json records {ledger["started"]} started '
        f'and {ledger["lost"]} lost round(s), fewer than the {spent} the '
        f'checkpoint of round {completed} proves: the ledger is stale or was '
        'edited. Restore it, or use another --output_dir.')


def _accounting_label(aggregator_plan):
  """Which accounting produced the record's epsilon."""
  if not aggregator_plan.private:
    return None
  if aggregator_plan.name == 'dp_rec':
    return 'dp_rec_' + aggregator_plan.params['accounting']
  if aggregator_plan.name == 'dp_fedavg':
    return 'subsampled_gaussian_rdp'
  return 'ddgauss_rdp_zhu_wang'


def _train_all(task, aggregators, pool, *, print_fn, downlink, population,
               clients_per_round, rounds, target_epsilon, delta, bits,
               accounting_mode,
               grouping, noise_stddev, l2_clip, insecure_test_seed,
               explicit_server_lr, seed, eval_every, eval_examples, client_lr,
               task_dir, progress, verify_clients, resume, value_type):
  task_name = task.name
  d = task.defaults
  records, curves = [], {}
  for name in aggregators:
    use_history = downlink != 'full' and name in ('dp_rec', 'rec')
    if downlink == 'history' and not use_history:
      print_fn(f'[{task_name}/{name}] no messages to send as history: '
               'full-model downlink.')
    aggregator_plan = baselines.plan(
        name, value_type=value_type, population=population,
        clients_per_round=clients_per_round, rounds=rounds,
        target_epsilon=target_epsilon, delta=delta, bits=bits,
        grouping=grouping, noise_stddev=noise_stddev, l2_clip=l2_clip,
        record_messages=use_history, accounting_mode=accounting_mode,
        insecure_test_seed=insecure_test_seed)
    if insecure_test_seed is not None and name in ('dp_rec', 'rec'):
      print_fn(f'[{task_name}/{name}] WARNING: insecure test mode: client '
               'seeds are deterministic functions of their updates; the '
               'privacy guarantee does not hold.')
    server_lr = explicit_server_lr or (
        d.private_server_lr if aggregator_plan.private and
        d.private_server_lr else d.server_lr)
    print_fn(f'[{task_name}/{name}] parameters: {aggregator_plan.params}, '
             f'client_lr={client_lr}, server_lr={server_lr}')
    record, curve = _train_one(task, aggregator_plan, rounds=rounds,
                               clients_per_round=clients_per_round,
                               target_epsilon=target_epsilon, delta=delta,
                               seed=seed, eval_every=eval_every,
                               eval_examples=eval_examples,
                               client_lr=client_lr, server_lr=server_lr,
                               task_dir=task_dir, progress=progress,
                               use_history=use_history,
                               verify_clients=verify_clients, resume=resume,
                               insecure_test_seed=insecure_test_seed,
                               pool=pool, print_fn=print_fn)
    records.append(record)
    curves[name] = curve
    report.write_summary(task_dir, records)
  return records, curves


def _train_one(task, aggregator_plan, *, rounds, clients_per_round,
               target_epsilon, delta, seed, eval_every, eval_examples,
               client_lr, server_lr, task_dir, progress, use_history,
               verify_clients, resume, insecure_test_seed, pool, print_fn):
  name = aggregator_plan.name
  # The previous context's worker is killed, not asked to wind down.
  worker_reaper.reap_context_workers()
  if pool is not None:
    pool.set_default_context()
  elif aggregator_plan.needs_test_context:
    # TFF runs DDGauss's secure sum only in the test execution context.
    tff.backends.test.set_sync_test_cpp_execution_context()
  else:
    tff.backends.native.set_sync_local_cpp_execution_context()
  server_optimizer = server_optimizer_for(task, server_lr)
  process = tff.simulation.compose_dataset_computation_with_learning_process(
      task.dataset_computation,
      build_process(task, aggregator_plan, client_lr, server_optimizer))
  # Every aggregator starts from the same model, a function of `seed` (R').
  state = process.set_model_weights(
      process.initialize(),
      tff_history.seeded_model_weights(
          task.baseline.model_fn, downlink_lib.initial_model_seed(seed)))
  history = None
  if use_history:
    history = downlink_lib.HistoryDownlink(
        model_fn=task.baseline.model_fn, factory=aggregator_plan.rec_sum,
        server_optimizer=server_optimizer, seed=seed,
        client_ids=task.train_client_ids, verify_clients=verify_clients)
    history.initialize(process, state, aggregator_plan.upload_bits_per_client)
  agg_dir = os.path.join(task_dir, name)
  os.makedirs(agg_dir, exist_ok=True)
  config = dict(
      task=task.name, data_source=task.data_source,
      population=task.population, aggregator=name,
      params=_jsonable(aggregator_plan.params), rounds=rounds,
      clients_per_round=clients_per_round, target_epsilon=target_epsilon,
      delta=delta, seed=seed, eval_every=eval_every,
      eval_examples=eval_examples, client_lr=client_lr, server_lr=server_lr,
      history=use_history, verify_clients=verify_clients,
      insecure_test_seed=insecure_test_seed)
  checkpointer = checkpoints.RunCheckpointer(agg_dir, config,
                                             print_fn=print_fn)
  metrics_path = os.path.join(agg_dir, 'metrics.csv')
  if not resume:
    checkpointer.remove_all()
  else:
    done = checkpointer.read_record()
    if done is not None:
      print_fn(f'[{task.name}/{name}] already finished in {agg_dir}; '
               'reusing its record (--noresume to rerun).')
      return done['record'], [tuple(p) for p in done['curve']]
  rng = np.random.default_rng(seed)
  client_ids = np.array(task.train_client_ids)
  curve = []
  upload_total = download_total = 0
  stopped = None
  round_times = []
  last_metric = None
  completed = 0
  # Rounds that ran (messages may have been released) but were lost in a
  # crash before their checkpoint: spent privacy, counted on top.
  lost_rounds = 0
  loaded = checkpointer.load_latest(state) if resume else None
  ledger = checkpointer.read_ledger() if resume else None
  if loaded is not None:
    _check_ledger(ledger, loaded[0], loaded[2]['lost_rounds'], agg_dir)
  elif ledger is None and resume and checkpointer.has_checkpoints():
    raise checkpoints.PrivacyLedgerError(
        f'{agg_dir} has checkpoints but no usable one and no privacy ledger '
        '(privacy_ledger.json): the privacy already spent there is unknown. '
        'Restore the ledger, or use another --output_dir.')
  if ledger is None:
    ledger = dict(started=0, lost=0)
  if loaded is not None:
    completed, state, driver = loaded
    rng.bit_generator.state = driver['rng']
    upload_total, download_total = driver['totals']
    round_times = list(driver['round_times'])
    curve = [tuple(p) for p in driver['curve']]
    last_metric = driver['last_metric']
    lost_rounds = driver['lost_rounds']
    if history is not None:
      history.restore(driver['history'])
    print_fn(f'[{task.name}/{name}] resuming after round {completed} from '
             f'{agg_dir}/checkpoints.')
  elif os.path.exists(metrics_path):
    os.remove(metrics_path)
  # Releasing round r drops rows >= r left by a run that crashed after it.
  release_manager = tff.program.CSVFileReleaseManager(
      file_path=metrics_path, save_mode=tff.program.CSVSaveMode.WRITE,
      key_fieldname='round')
  # Every round ever started counts; those not in the checkpoint are lost.
  unrecorded = max(
      0, ledger['lost'] + ledger['started'] - completed - lost_rounds)
  if unrecorded:
    if insecure_test_seed is None:
      lost_rounds += unrecorded
      print_fn(f'[{task.name}/{name}] {unrecorded} round(s) ran after the '
               'last checkpoint and were lost; their messages may have been '
               'released, so they count as spent privacy.')
    else:
      # Test mode: rerunning the round reproduces the same messages.
      print_fn(f'[{task.name}/{name}] {unrecorded} lost round(s) rerun in '
               'insecure test mode (same messages, no extra privacy cost).')
  epsilon = None
  if aggregator_plan.private:
    epsilon = aggregator_plan.epsilon_after(completed + lost_rounds)
  kill_at = os.environ.get(TEST_KILL_ENV, '')
  iterator = range(completed + 1, rounds + 1)
  bar = None
  if progress:
    from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top
    bar = tqdm.tqdm(iterator, desc=f'{task.name}/{name}', leave=True,
                    initial=completed, total=rounds)
    iterator = bar
  for round_num in iterator:
    if aggregator_plan.private:
      next_epsilon = aggregator_plan.epsilon_after(round_num + lost_rounds)
      if next_epsilon > target_epsilon * (1 + 1e-9):
        stopped = (f'stopped before round {round_num}: epsilon would reach '
                   f'{next_epsilon:.4f} > {target_epsilon}')
        break
    ids = rng.choice(client_ids, size=clients_per_round,
                     replace=aggregator_plan.sample_with_replacement)
    if history is not None:
      download = history.before_round(round_num - 1, ids, process, state)
    else:
      download = aggregator_plan.download_bits_per_client * clients_per_round
    # Durably recorded before any message can exist (never under-counted).
    checkpointer.write_ledger(started=round_num, lost=lost_rounds)
    _maybe_kill(kill_at, name, round_num, 'started')
    t0 = time.time()
    output = process.next(state, [str(i) for i in ids])
    round_times.append(time.time() - t0)
    state = output.state
    _maybe_kill(kill_at, name, round_num, 'trained')
    measured = output.metrics.get('aggregator', {}).get('mean_value', {})
    if history is not None:
      history.after_round(round_num - 1, measured['messages'])
    completed = round_num
    if aggregator_plan.private:
      epsilon = next_epsilon
    upload = aggregator_plan.upload_bits_per_client * clients_per_round
    upload_total += upload
    download_total += download
    train = output.metrics['client_work']['train']
    # Private runs do not collect client losses (`no_client_metrics`).
    row = dict(train_loss=float(train.get('loss', float('nan'))),
               epsilon=epsilon or 0.0,
               upload_bits=upload, download_bits=download,
               seconds=round_times[-1])
    if 'upload_bits' in measured:
      # DP-REC reports the bits of the messages it received.
      row['upload_bits'] = int(measured['upload_bits'])
    if round_num % eval_every == 0 and round_num != rounds:
      weights = process.get_model_weights(state)
      last_metric = tasks_lib.evaluate(task, weights,
                                       max_examples=eval_examples)[task.metric]
      row[task.metric] = last_metric
      curve.append((epsilon, last_metric))
    asyncio.run(release_manager.release(row, key=round_num))
    checkpointer.save(round_num, state, dict(
        rng=rng.bit_generator.state, totals=[upload_total, download_total],
        round_times=round_times, curve=curve, last_metric=last_metric,
        lost_rounds=lost_rounds,
        history=None if history is None else history.get_state()))
    _maybe_kill(kill_at, name, round_num, 'saved')
    if bar is not None:
      postfix = {}
      if not math.isnan(row['train_loss']):
        postfix['loss'] = f"{row['train_loss']:.4f}"
      if last_metric is not None:
        postfix[task.metric_label] = f'{last_metric:.4f}'
      if epsilon is not None:
        postfix['eps'] = f'{epsilon:.3f}'
      postfix['up_bits'] = row['upload_bits']
      bar.set_postfix(postfix)
  if bar is not None:
    bar.close()
  if stopped:
    print_fn(f'[{task.name}/{name}] {stopped}')
  if history is not None:
    history.finish(completed, process, state)
  weights = process.get_model_weights(state)
  final = tasks_lib.evaluate(task, weights)
  final_metric = final[task.metric]
  curve.append((epsilon, final_metric))
  record = dict(
      task=task.name, aggregator=name, data_source=task.data_source,
      metric=task.metric, metric_label=task.metric_label,
      final_metric=final_metric, final_metrics=final,
      epsilon=epsilon, delta=delta, target_epsilon=target_epsilon,
      accounting=_accounting_label(aggregator_plan),
      rounds=completed, clients_per_round=clients_per_round,
      population=task.population,
      sampling='with replacement' if aggregator_plan.sample_with_replacement
      else 'without replacement within a round',
      params=_jsonable(aggregator_plan.params),
      upload_bits_per_client_round=aggregator_plan.upload_bits_per_client,
      download_bits_per_client_round=aggregator_plan.download_bits_per_client,
      upload_bits_total=upload_total, download_bits_total=download_total,
      upload_gb=upload_total / report.GIGABYTE_BITS,
      download_gb=download_total / report.GIGABYTE_BITS,
      seconds_per_round=float(np.mean(round_times)) if round_times else 0.0,
      stopped=stopped,
      downlink='history' if history is not None else 'full',
      lost_rounds=lost_rounds,
      insecure_test_mode=insecure_test_seed is not None)
  if history is not None:
    record.update(history.summary())
    record['download_bits_per_client_round'] = (
        download_total / max(1, history.history_downlinks +
                             history.full_downlinks))
    exact = ('bit-exact' if history.mismatches == 0 else
             f'{history.mismatches} MISMATCHES, max |diff| '
             f'{history.max_abs_diff:.3g}')
    print_fn(f'[{task.name}/{name}] history downlink: '
             f'{history.history_downlinks} histories, '
             f'{history.full_downlinks} full states '
             f'({history.full_bits} bits each); replay of '
             f'{len(history.tracked)} clients, {history.checks} checks: '
             f'{exact}.')
  checkpointer.write_record(record, curve)
  print_fn(f'[{task.name}/{name}] final {task.metric_label}='
           f'{final_metric:.4f} epsilon={epsilon} rounds={completed} '
           f'{record["seconds_per_round"]:.2f} s/round')
  return record, curve


def _jsonable(params):
  out = {}
  for key, value in params.items():
    if isinstance(value, (np.integer,)):
      value = int(value)
    elif isinstance(value, (np.floating,)):
      value = float(value)
    out[key] = value
  return out
