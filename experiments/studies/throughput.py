"""`python -m experiments.bench rounds`: client-rounds per second through TFF.

For each aggregator, at the main job's setting (embedded SO-LR, B clients per
round, calibrated at epsilon 1 for the main job's rounds, so DP-REC has its
bits), runs `rounds` rounds of the real iterative
process (`experiments.runner.execution.build_process`, the run's execution
context) along two paths, with the same sampled clients and example orders:

*   `reference`: the clients' datasets built in Python
    (`stackoverflow_arrays.ClientDatasets`), which TFF serializes into the
    round, TFF's default client loop (`DATASET_REDUCE`), and TFF's compiler
    without the compile cache;
*   `fast`: the run's path, the clients' CSR tensors
    (`stackoverflow_arrays.ClientTensors`) turned into datasets inside the
    round (without tf.data's per-iterator rewrites), the `DATASET_ITERATOR`
    client loop, and the compile cache (`experiments.infra.compile_cache`):
    the first run of the bench fills it (cold), a second run finds every
    computation in it (warm); each row says which.

Each row prints seconds per round (the mean over all rounds, first included,
as the main job's s/round column), the steady state's client-rounds per
second (rounds after the first), and the split of a round: building the
round's input in Python, the first round's extra (TFF compiles the
computation), the runtime's CPU time per client (the C++ worker process) and
Python's. The floor, measured in the same process: the clients' local
training alone (the model's forward and backward pass and the SGD step over
the same batches, one `tf.function`), and DP-REC's encode alone for B
updates of the model's size. The overhead ratio is a steady round's time
over the floor (local training, plus the encode for DP-REC).
"""

import dataclasses
import statistics
import time

import numpy as np

PATHS = ('reference', 'fast')
DEFAULT_AGGREGATORS = ('fedavg', 'dp_fedavg', 'ddgauss16', 'dp_rec')


@dataclasses.dataclass
class Row:
  path: str
  aggregator: str
  seconds_per_round: float  # All rounds, the first included.
  steady_seconds_per_round: float  # Rounds after the first.
  first_round_extra: float
  inputs_seconds: float  # Building a round's input, per round.
  worker_cpu_ms_per_client: float
  python_cpu_ms_per_client: float
  clients_per_round: int
  # Computations the path's context took from the compile cache, and
  # compiled (experiments.infra.compile_cache; off on the reference path).
  compiled_from_cache: int = 0
  compiled: int = 0
  # The runtime's system CPU time over its CPU time (steady rounds).
  worker_system_share: float = 0.0

  @property
  def client_rounds_per_second(self) -> float:
    return self.clients_per_round / self.steady_seconds_per_round


def _children_cpu(system: bool = False) -> float:
  """CPU seconds of this process's children (system time only: `system`)."""
  import psutil  # pylint: disable=g-import-not-at-top
  total = 0.0
  for child in psutil.Process().children(recursive=True):
    try:
      times = child.cpu_times()
    except psutil.Error:
      continue
    total += times.system + (0.0 if system else times.user)
  return total


def _own_cpu() -> float:
  import psutil  # pylint: disable=g-import-not-at-top
  times = psutil.Process().cpu_times()
  return times.user + times.system


def _sampled(task, clients_per_round, rounds):
  from experiments.runner import sampling  # pylint: disable=g-import-not-at-top
  from experiments.runner import registry  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  return [sampling.sample_clients(rng, task.train_client_ids,
                                  clients_per_round, registry.FIXED_SIZE)
          for _ in range(rounds)]


def measure_path(task, config, aggregator, path: str, sampled) -> Row:
  """Runs `len(sampled)` rounds of `aggregator`'s process along `path`."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from experiments.data import stackoverflow_arrays  # pylint: disable=g-import-not-at-top
  from experiments.data import stackoverflow_task  # pylint: disable=g-import-not-at-top
  from experiments.runner import execution  # pylint: disable=g-import-not-at-top
  if path not in PATHS:
    raise ValueError(f'path must be one of {PATHS}, found {path!r}.')
  server_optimizer = execution.server_optimizer_for(
      task, config.server_lr_for(task, aggregator.private_setting), config,
      aggregator.private_setting)
  loop = tff.learning.LoopImplementation
  if path == 'fast':
    process = task.learning_process(execution.build_process(
        task, aggregator, config.client_lr, server_optimizer))
    make_input = task.round_input
  else:
    process = execution.build_process(
        task, aggregator, config.client_lr, server_optimizer,
        loop_implementation=loop.DATASET_REDUCE)
    make_input = stackoverflow_arrays.ClientDatasets(
        task.client_data.source, task.defaults.batch_size,
        stackoverflow_task.TRAIN_MAX_ELEMENTS)
  return time_rounds(process, make_input, aggregator, path, sampled,
                     use_compile_cache=(path == 'fast'))


def time_rounds(process, make_input, aggregator, path, sampled, *,
                use_compile_cache: bool) -> Row:
  """Times `process` over `sampled` rounds fed by `make_input(ids, seed)`."""
  from experiments.runner import execution  # pylint: disable=g-import-not-at-top
  from experiments.runner import sampling  # pylint: disable=g-import-not-at-top
  from experiments.infra import compile_cache  # pylint: disable=g-import-not-at-top
  from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
  times, inputs = [], []
  worker_cpu = own_cpu = worker_system = 0.0
  cache_before = dict(compile_cache.stats)
  try:
    execution.set_context(aggregator, None, use_compile_cache=use_compile_cache)
    state = process.initialize()
    for round_num, ids in enumerate(sampled, start=1):
      t0 = time.perf_counter()
      round_input = make_input(ids, sampling.client_data_seed(0, round_num))
      t1 = time.perf_counter()
      c0, p0, s0 = _children_cpu(), _own_cpu(), _children_cpu(system=True)
      state = process.next(state, round_input).state
      t2 = time.perf_counter()
      if round_num > 1:
        worker_cpu += _children_cpu() - c0
        worker_system += _children_cpu(system=True) - s0
        own_cpu += _own_cpu() - p0
      inputs.append(t1 - t0)
      times.append(t2 - t0)
  finally:
    worker_reaper.reap_context_workers()
  steady = statistics.fmean(times[1:])
  clients = sum(len(ids) for ids in sampled[1:])
  return Row(path=path, aggregator=aggregator.name,
             seconds_per_round=statistics.fmean(times),
             steady_seconds_per_round=steady,
             first_round_extra=times[0] - steady,
             inputs_seconds=statistics.fmean(inputs),
             worker_cpu_ms_per_client=1e3 * worker_cpu / clients,
             python_cpu_ms_per_client=1e3 * own_cpu / clients,
             clients_per_round=len(sampled[0]),
             compiled_from_cache=(compile_cache.stats['hits'] -
                                  cache_before['hits']),
             compiled=compile_cache.stats['misses'] - cache_before['misses'],
             worker_system_share=worker_system / max(worker_cpu, 1e-9))


def local_training_floor(task, client_lr: float, sampled, repeats: int = 3):
  """Seconds per round of the clients' local training alone (in-process).

  The same batches (in NumPy), one `tf.function` call per batch: the model's
  forward and backward pass and the SGD step, and each client's delta.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from experiments.data import stackoverflow_arrays  # pylint: disable=g-import-not-at-top
  from experiments.data import stackoverflow_task  # pylint: disable=g-import-not-at-top
  from experiments.runner import sampling  # pylint: disable=g-import-not-at-top
  datasets = stackoverflow_arrays.ClientDatasets(
      task.client_data.source, task.defaults.batch_size,
      stackoverflow_task.TRAIN_MAX_ELEMENTS)
  model = task.baseline.model_fn()
  variables = model.trainable_variables
  initial = [tf.identity(v) for v in variables]
  x_spec, y_spec = (tf.TensorSpec([None] + s.shape[1:].as_list(), s.dtype)
                    for s in model.input_spec)

  @tf.function(input_signature=[x_spec, y_spec])
  def step(x, y):
    with tf.GradientTape() as tape:
      loss = model.forward_pass((x, y), training=True).loss
    for v, g in zip(variables, tape.gradient(loss, variables)):
      v.assign_sub(client_lr * g)

  @tf.function
  def reset():
    for v, w in zip(variables, initial):
      v.assign(w)

  @tf.function
  def delta():
    return [v - w for v, w in zip(variables, initial)]

  rounds = [[[tuple(t.numpy() for t in batch) for batch in d]
             for d in datasets(ids, sampling.client_data_seed(0, r))]
            for r, ids in enumerate(sampled[1:], start=2)]
  best = float('inf')
  for _ in range(repeats + 1):  # The first traces.
    t0 = time.perf_counter()
    for clients in rounds:
      for batches in clients:
        reset()
        for x, y in batches:
          step(x, y)
        tf.nest.map_structure(lambda t: t.numpy(), delta())
    best = min(best, (time.perf_counter() - t0) / len(rounds))
  return best


def encode_floor(aggregator, value_type, clients: int,
                 repeats: int = 3) -> float:
  """Seconds for `clients` DP-REC encodes of `value_type` (in-process)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tff_dprec import message  # pylint: disable=g-import-not-at-top
  params = aggregator.params
  layout = message.MessageLayout.from_value_type(
      tff.types.type_to_tf_tensor_specs(value_type), bits=params['bits'],
      grouping=params['grouping'])
  rng = np.random.default_rng(0)
  value = [tf.constant(rng.normal(size=s.shape.as_list()) * 1e-2, s.dtype)
           for s in layout.value_specs]

  @tf.function
  def encode(value):
    return message.encode_update(value, layout,
                                 noise_stddev=params['noise_stddev'],
                                 l2_clip=params['l2_clip'])

  tf.nest.map_structure(lambda t: t.numpy(), encode(value))
  best = float('inf')
  for _ in range(repeats):
    t0 = time.perf_counter()
    for _ in range(clients):
      tf.nest.map_structure(lambda t: t.numpy(), encode(value))
    best = min(best, time.perf_counter() - t0)
  return best


def run(aggregators=DEFAULT_AGGREGATORS, paths=PATHS, rounds: int = 6,
        clients_per_round: int = 40, data_dir: str = 'data_cache',
        embedded_config=None, print_fn=print, floors: bool = True) -> dict:
  """Measures every (path, aggregator); prints and returns the figures
  (`floors=False`: without the local-training and encode floors)."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from experiments.runner import execution  # pylint: disable=g-import-not-at-top
  from experiments.runner import registry  # pylint: disable=g-import-not-at-top
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  task, config = _setup(aggregators, paths, rounds, clients_per_round,
                        data_dir, embedded_config)
  sampled = _sampled(task, clients_per_round, rounds)
  print_fn(f'embedded SO-LR, N={task.population}, B={clients_per_round}, '
           f'{rounds} rounds (the same clients on every path).')
  if any(registry.get(a).needs_test_context for a in aggregators):
    execution.allow_oversize_protos()
  rows, aggregators_by_name = [], {}
  for name in aggregators:
    aggregator = run_setup.calibrated_aggregator(task, config, name,
                                                 record_messages=False)
    aggregators_by_name[name] = aggregator
    for path in paths:
      row = measure_path(task, config, aggregator, path, sampled)
      rows.append(row)
      _print_row(row, name, path, print_fn)
  tff.backends.native.set_sync_local_cpp_execution_context()
  if not floors:
    return dict(rows=[dataclasses.asdict(r) for r in rows])
  floor, encode = _floors(task, config, aggregators_by_name, sampled, print_fn)
  _print_table(rows, aggregators, floor, encode, print_fn)
  return dict(rows=[dataclasses.asdict(r) for r in rows],
              local_training_floor=floor, encode_floor=encode)


def _setup(aggregators, paths, rounds, clients_per_round, data_dir,
           embedded_config):
  """(task, config) of `run`, after checking its arguments."""
  from experiments.data import tasks  # pylint: disable=g-import-not-at-top
  from experiments.runner import config as config_lib  # pylint: disable=g-import-not-at-top
  if rounds < 2:
    raise ValueError(f'rounds={rounds}: at least 2 (the first compiles).')
  for path in paths:
    if path not in PATHS:
      raise ValueError(f'paths: unknown {path!r}; choose from {PATHS}.')
  task = tasks.create_task('stackoverflow_lr', data_dir,
                           embedded_config=embedded_config)
  if task.client_data is None:
    raise ValueError(f'--data_dir={data_dir!r} holds the real StackOverflow '
                     'data; the benchmark runs on the embedded data.')
  # Calibrated as the main job is (its rounds), run for `rounds` rounds.
  config = config_lib.RunConfig(
      task='stackoverflow_lr', aggregators=tuple(aggregators),
      data_dir=data_dir, embedded_config=embedded_config,
      clients_per_round=clients_per_round).resolved(task)
  return task, config


def _print_row(row, name, path, print_fn):
  print_fn(f'{path:>9} {name:>10}: {row.seconds_per_round:.3f} s/round '
           f'({row.steady_seconds_per_round:.3f} steady, '
           f'{row.client_rounds_per_second:.0f} client-rounds/s); '
           f'inputs {row.inputs_seconds * 1e3:.0f} ms, first round '
           f'+{row.first_round_extra:.2f} s, runtime CPU '
           f'{row.worker_cpu_ms_per_client:.1f} ms/client, Python CPU '
           f'{row.python_cpu_ms_per_client:.1f} ms/client; compiled '
           f'{row.compiled}, from the cache {row.compiled_from_cache}')


def _floors(task, config, aggregators_by_name, sampled, print_fn):
  """(local training floor, DP-REC's encode floor or None), printed."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  clients_per_round = config.clients_per_round
  floor = local_training_floor(task, config.client_lr, sampled)
  print_fn(f'floor: local training alone {floor:.3f} s/round '
           f'({1e3 * floor / clients_per_round:.2f} ms/client)')
  encode = None
  if 'dp_rec' in aggregators_by_name:
    value_type = tff.learning.models.weights_type_from_model(
        task.baseline.model_fn).trainable
    encode = encode_floor(aggregators_by_name['dp_rec'], value_type,
                          clients_per_round)
    print_fn(f'floor: DP-REC encode alone {encode:.3f} s/round '
             f'({1e3 * encode / clients_per_round:.2f} ms/client, '
             f'{aggregators_by_name["dp_rec"].params["bits"]} bits)')
  return floor, encode


def _print_table(rows, aggregators, floor, encode, print_fn):
  """The markdown table over the floors, and each fast path's speed-up."""
  print_fn('')
  print_fn('| path | aggregator | s/round | steady s/round | client-rounds/s '
           '| overhead ratio |')
  print_fn('|---|---|---|---|---|---|')
  for row in rows:
    row_floor = floor + (encode if row.aggregator == 'dp_rec' else 0.0)
    print_fn(f'| {row.path} | {row.aggregator} | '
             f'{row.seconds_per_round:.3f} | '
             f'{row.steady_seconds_per_round:.3f} | '
             f'{row.client_rounds_per_second:.0f} | '
             f'{row.steady_seconds_per_round / row_floor:.1f} |')
  for name in aggregators:
    by_path = {r.path: r for r in rows if r.aggregator == name}
    if len(by_path) == 2:
      ratio = (by_path['reference'].seconds_per_round /
               by_path['fast'].seconds_per_round)
      print_fn(f'{name}: the fast path is {ratio:.2f}x faster per round '
               'than the reference.')


def run_images(aggregators=('fedavg', 'dp_rec'), rounds: int = 6,
               task_name: str = 'fashion_mnist', data_dir: str = 'data_cache',
               print_fn=print) -> list:
  """Image rounds (the paper's MNIST protocol, B = 10) along two inputs.

  `reference`: client ids, each client's dataset built inside the round by
  the baseline's TestClientData computation (every client's images inlined
  in it; the path image tasks took before `images.ClientImages`); `fast`:
  the run's path, the sampled clients' arrays as round tensors. Both with
  the run's client loop and the compile cache off, so only the input
  differs.
  """
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from experiments.data import tasks  # pylint: disable=g-import-not-at-top
  from experiments.runner import config as config_lib  # pylint: disable=g-import-not-at-top
  from experiments.runner import execution  # pylint: disable=g-import-not-at-top
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  task = tasks.create_task(task_name, data_dir)
  config = config_lib.RunConfig(task=task_name, aggregators=tuple(aggregators),
                                data_dir=data_dir).resolved(task)
  sampled = _sampled(task, config.clients_per_round, rounds)
  print_fn(f'{task_name}: {task.data_note} B={config.clients_per_round}, '
           f'{rounds} rounds (the same clients on both paths).')
  rows = []
  for name in aggregators:
    aggregator = run_setup.calibrated_aggregator(task, config, name,
                                                 record_messages=False)
    server_optimizer = execution.server_optimizer_for(
        task, config.server_lr_for(task, aggregator.private_setting), config,
        aggregator.private_setting)
    process = execution.build_process(task, aggregator, config.client_lr,
                                      server_optimizer)
    compose = (
        tff.simulation.compose_dataset_computation_with_learning_process)
    inputs = {
        'reference': (compose(task.dataset_computation, process),
                      lambda ids, _: [str(i) for i in ids]),
        'fast': (task.learning_process(process), task.round_input)}
    for path, (composed, make_input) in inputs.items():
      row = time_rounds(composed, make_input, aggregator, path, sampled,
                        use_compile_cache=False)
      rows.append(row)
      print_fn(f'{path:>9} {name:>7}: {row.seconds_per_round:.3f} s/round '
               f'({row.steady_seconds_per_round:.3f} steady); runtime CPU '
               f'{row.worker_cpu_ms_per_client:.0f} ms/client '
               f'({100 * row.worker_system_share:.0f}% system), Python CPU '
               f'{row.python_cpu_ms_per_client:.0f} ms/client')
  tff.backends.native.set_sync_local_cpp_execution_context()
  return rows
