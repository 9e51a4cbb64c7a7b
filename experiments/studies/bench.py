"""Benchmarks: `python -m experiments.bench <name>`, each name below.

accounting: a cold calibration's time by phase, the planner's cold start
and a run's epsilon per round (`experiments.studies.accounting_bench`;
`--baseline_root` measures another checkout beside it).

rounds: client-rounds per second through the TFF process; images: image
rounds with the clients' images as round tensors against the dataset
computation that inlines them (both `experiments.studies.throughput`).

in_law: steady s/round of DP-FedAvg, DP-REC simulated in law
(`dp_rec_in_law`) and DP-REC with its codec at each `--sizes` B (embedded
SO-LR, the main job's calibration at each B), in one sitting, with the
ratios in law / DP-FedAvg and codec / in law.

history: for a logistic-regression model of the SO-LR embedded size (1000
words x 50 tags) with Adam on the server, prints the client's replay time per
round of B messages next to the server's decode of the same round, the server's
downlink decision and payload time for a long-absent client, the size of a
history against the full state, and the time to checkpoint the run's state.

codec:
For d in {1e4, 1e6} and bits in {4, 7, 10}, prints the encoder's throughput in
candidate elements per second next to the raw Philox normal generator's
throughput for the same K x d in the same blocks (generation plus a sum, the
least work that keeps the generator from being optimised away), the decode
time next to the time to generate one candidate, and the encoder's peak extra
memory (each configuration runs in a fresh subprocess: growth of the peak
RSS over the first encode, and the process's peak RSS). codec_one measures
one configuration (--dim, --bits) in this process and prints it as one JSON
line.
"""

import json
import resource
import subprocess
import sys
import time

from absl import flags

from experiments.runner import cli as cli_lib
from experiments.studies import accounting_bench
from experiments.studies import throughput


def _best_time(fn, repeats):
  best = float('inf')
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - t0)
  return best


def codec_one(dim: int, bits: int, repeats: int) -> dict:
  """Measures one configuration in this process."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tff_dprec import rec  # pylint: disable=g-import-not-at-top

  k = 2**bits
  pdim = rec.padded_dim(dim)
  block = rec._block_size(k, pdim, rec.DEFAULT_CHUNK_ELEMENTS)  # pylint: disable=protected-access
  num_blocks = k // block
  seed = tf.constant([1, 2], tf.int64)
  value = tf.constant(np.random.default_rng(0).normal(size=dim) * 1e-3,
                      tf.float32)

  @tf.function
  def encode(value, seed):
    return rec.encode(value, prior_stddev=0.1, bits=bits, seed=seed)

  @tf.function
  def raw(seed):
    def body(i, acc):
      z = tf.random.stateless_normal([block, pdim], seed=seed + i,
                                     alg='philox')
      return i + 1, acc + tf.reduce_sum(z)
    return tf.while_loop(lambda i, _: i < num_blocks, body,
                         (tf.constant(0, tf.int64), tf.constant(0.0)))[1]

  @tf.function
  def decode(index, seed):
    return rec.decode(index, prior_stddev=0.1, bits=bits, dim=dim, seed=seed)

  @tf.function
  def one_candidate(seed):
    return tf.random.stateless_normal([pdim], seed=seed, alg='philox')

  # Memory: peak RSS growth over the first encode (tracing included), before
  # anything else allocates candidate blocks.
  tf.constant(0.0).numpy()
  base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  encode(value, seed).numpy()
  peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  raw(seed).numpy()
  decode(tf.constant(3), seed).numpy()
  one_candidate(seed).numpy()
  encode_s = _best_time(lambda: encode(value, seed).numpy(), repeats)
  raw_s = _best_time(lambda: raw(seed).numpy(), repeats)
  decode_s = _best_time(lambda: decode(tf.constant(k - 1), seed).numpy(),
                        repeats * 5)
  candidate_s = _best_time(lambda: one_candidate(seed).numpy(), repeats * 5)
  elements = k * dim
  return dict(
      dim=dim, bits=bits, block_candidates=block,
      encode_s=encode_s, encode_elems_per_s=elements / encode_s,
      raw_s=raw_s, raw_elems_per_s=elements / raw_s,
      encode_vs_raw=raw_s / encode_s,
      decode_ms=decode_s * 1e3, one_candidate_ms=candidate_s * 1e3,
      decode_vs_candidate=decode_s / candidate_s,
      peak_extra_mib=max(0, peak_rss - base_rss) / 1024.0,
      peak_rss_mib=peak_rss / 1024.0)


def codec(dims, bits_list, repeats):
  rows = []
  print(f"{'d':>9} {'bits':>4} {'encode s':>9} {'enc elem/s':>11} "
        f"{'raw elem/s':>11} {'enc/raw':>7} {'decode ms':>9} "
        f"{'1 cand ms':>9} {'dec/cand':>8} {'+MiB enc':>8} {'RSS MiB':>8}")
  for dim in dims:
    for bits in bits_list:
      out = subprocess.run(
          [sys.executable, '-m', 'experiments.bench', 'codec_one',
           f'--dim={dim}', f'--bits={bits}', f'--repeats={repeats}'],
          check=True, capture_output=True, text=True)
      row = json.loads(out.stdout.strip().splitlines()[-1])
      rows.append(row)
      print(f"{dim:>9} {bits:>4} {row['encode_s']:>9.4f} "
            f"{row['encode_elems_per_s']:>11.3e} "
            f"{row['raw_elems_per_s']:>11.3e} {row['encode_vs_raw']:>7.2f} "
            f"{row['decode_ms']:>9.3f} {row['one_candidate_ms']:>9.3f} "
            f"{row['decode_vs_candidate']:>8.2f} "
            f"{row['peak_extra_mib']:>8.1f} {row['peak_rss_mib']:>8.0f}",
            flush=True)
  return rows


def _logistic_model_fn(words, tags):
  """A `tff.learning` model_fn: one dense sigmoid layer, words -> tags."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

  def model_fn():
    model = tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(words,)),
        tf.keras.layers.Dense(tags, activation='sigmoid')])
    return tff.learning.models.from_keras_model(
        model, loss=tf.keras.losses.BinaryCrossentropy(),
        input_spec=(tf.TensorSpec([None, words], tf.float32),
                    tf.TensorSpec([None, tags], tf.float32)))

  return model_fn


def _checkpoint_bench(state, server, repeats):
  """(best seconds per checkpoint save, bytes written) of a run's state."""
  import os  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top
  from experiments.runner import checkpoints  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as tmp:
    checkpointer = checkpoints.RunCheckpointer(
        tmp, dict(bench=True), print_fn=lambda *a: None)
    process_like = (state.weights, state.optimizer_state)
    driver = dict(history=server.get_state(), rng=dict(state=1))
    versions = iter(range(1, 10**6))
    save_s = _best_time(
        lambda: checkpointer.save(next(versions), process_like, driver),
        repeats)
    size = sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(tmp) for f in files)
  return save_s, size


def history_bench(words: int, tags: int, clients_per_round: int,
                  rounds: int, repeats: int) -> dict:
  """Measures history replay and checkpointing at one model size."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tff_dprec import history  # pylint: disable=g-import-not-at-top
  from tff_dprec.aggregators import dp_rec  # pylint: disable=g-import-not-at-top

  model_fn = _logistic_model_fn(words, tags)
  weights_type = tff.learning.models.weights_type_from_model(model_fn)
  factory = dp_rec.DpRecSumFactory(noise_stddev=0.4, l2_clip=0.5, bits=7,
                                   grouping=10000, record_messages=True)
  optimizer = tff.learning.optimizers.build_adam(0.01)
  replay = history.ClientReplay(model_fn=model_fn, factory=factory,
                                server_optimizer=optimizer)
  groups = factory.num_groups(weights_type.trainable)
  rng = np.random.default_rng(0)
  log = [np.concatenate([
      rng.integers(-2**63, 2**63 - 1, size=(clients_per_round, 1)),
      rng.integers(0, 2**7, size=(clients_per_round, groups))], axis=1)
         for _ in range(rounds)]
  state = replay.initial_state(1)
  full_bits = history.structure_bits((state.weights, state.optimizer_state))
  server = history.HistoryServer(
      message_bits=factory.message_bits(weights_type.trainable),
      full_bits=full_bits, initial_seed=1)
  server.downlink('absent', 0)
  for t, messages in enumerate(log):
    server.record_round(t, messages)
  messages_sum = tf.function(factory.messages_sum_fn(weights_type.trainable))
  messages_sum(log[0])
  replay.apply_round(state, log[0])
  decode_s = _best_time(lambda: messages_sum(log[1]), repeats)
  replay_s = _best_time(lambda: replay.apply_round(state, log[1]), repeats)

  def decide():
    fresh = history.HistoryServer.from_state(server.get_state())
    downlink = fresh.downlink('absent', rounds)
    return downlink, fresh.messages(downlink)

  decide_s = _best_time(decide, repeats)
  downlink, _ = decide()
  save_s, size = _checkpoint_bench(state, server, repeats)
  params = words * tags + tags
  return dict(
      params=params, groups=groups, clients_per_round=clients_per_round,
      rounds=rounds, server_decode_ms=decode_s * 1e3,
      client_replay_ms=replay_s * 1e3, replay_vs_decode=replay_s / decode_s,
      decide_and_payload_ms=decide_s * 1e3, history_kind=downlink.kind,
      history_bits=downlink.bits, full_bits=full_bits,
      checkpoint_save_ms=save_s * 1e3, checkpoint_mib=size / 2**20 / repeats)


def main(argv):
  """Runs the benchmark that the one positional argument names."""
  benchmark = _BENCHMARKS.get(argv[1]) if len(argv) == 2 else None
  if benchmark is None:
    cli_lib.fail(f'name one benchmark of {", ".join(_BENCHMARKS)} '
                 f'(python -m experiments.bench <name>), found {argv[1:]}.')
  benchmark()


def _rounds():
  from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
  worker_reaper.install()
  try:
    throughput.run(_AGGREGATORS.value, _PATHS.value,
                   rounds=_ROUNDS.value or 6,
                   clients_per_round=_CLIENTS.value,
                   data_dir=_DATA_DIR.value)
  finally:
    worker_reaper.reap_context_workers()


def _in_law():
  """s/round of DP-REC in law against the codec and DP-FedAvg, per B."""
  from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
  worker_reaper.install()
  names = ('dp_fedavg', 'dp_rec_in_law', 'dp_rec')
  steady = {}
  try:
    for clients in (int(b) for b in _SIZES.value):
      measured = throughput.run(names, ('fast',), rounds=_ROUNDS.value or 4,
                                clients_per_round=clients,
                                data_dir=_DATA_DIR.value, floors=False)
      for row in measured['rows']:
        steady[(clients, row['aggregator'])] = row['steady_seconds_per_round']
  finally:
    worker_reaper.reap_context_workers()
  print(in_law_table(steady))


def in_law_table(steady: dict) -> str:
  """Steady s/round by (B, aggregator) as a table with the ratios."""
  lines = ['| B | DP-FedAvg s/round | DP-REC in law s/round | DP-REC (codec) '
           's/round | in law / DP-FedAvg | codec / in law |',
           '|---|---|---|---|---|---|']
  for clients in sorted({b for b, _ in steady}):
    fedavg, law, codec_ = (steady[(clients, n)] for n in (
        'dp_fedavg', 'dp_rec_in_law', 'dp_rec'))
    lines.append(f'| {clients} | {fedavg:.3f} | {law:.3f} | {codec_:.3f} | '
                 f'{law / fedavg:.2f}x | {codec_ / law:.1f}x |')
  return '\n'.join(lines)


def _accounting():
  accounting_bench.main(_BASELINE_ROOT.value, _ROUNDS_SAMPLE.value)


def _images():
  from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
  worker_reaper.install()
  try:
    aggregators = _AGGREGATORS.value if (
        _AGGREGATORS.value != list(throughput.DEFAULT_AGGREGATORS)) else (
            'fedavg', 'dp_rec')
    throughput.run_images(aggregators, rounds=_ROUNDS.value or 6,
                          data_dir=_DATA_DIR.value)
  finally:
    worker_reaper.reap_context_workers()


def _history():
  from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
  worker_reaper.install()
  row = history_bench(_WORDS.value, _TAGS.value, _CLIENTS.value,
                      _ROUNDS.value or 60, _REPEATS.value)
  for key, value in row.items():
    print(f'{key:>24}: {value:.4g}' if isinstance(value, float)
          else f'{key:>24}: {value}')


def _codec_one():
  print(json.dumps(codec_one(_DIM.value, _BITS.value, _REPEATS.value)))


def _codec():
  codec([int(x) for x in _DIMS.value], [int(x) for x in _BITS_LIST.value],
        _REPEATS.value)


# The benchmarks by name: `python -m experiments.bench <name>` runs one.
_BENCHMARKS = {'codec': _codec, 'codec_one': _codec_one,
               'history': _history, 'rounds': _rounds, 'images': _images,
               'in_law': _in_law, 'accounting': _accounting}


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _AGGREGATORS, _PATHS, _DATA_DIR, _WORDS, _TAGS, _CLIENTS, _ROUNDS
  global _SIZES, _BASELINE_ROOT, _ROUNDS_SAMPLE
  global _DIM, _BITS, _DIMS, _BITS_LIST, _REPEATS
  _AGGREGATORS = flags.DEFINE_list(
      'aggregators', list(throughput.DEFAULT_AGGREGATORS),
      'rounds, images: the aggregators (images: fedavg and dp_rec unless '
      'given).')
  _PATHS = flags.DEFINE_list('paths', list(throughput.PATHS),
                             'rounds: the paths through the TFF process.')
  _DATA_DIR = flags.DEFINE_string('data_dir', 'data_cache',
                                  'rounds, images: the data directory.')
  _WORDS = flags.DEFINE_integer('words', 1000, 'history: vocabulary size.')
  _TAGS = flags.DEFINE_integer('tags', 50, 'history: tags.')
  _CLIENTS = flags.DEFINE_integer('clients_per_round', 40,
                                  'history, rounds: clients per round.')
  _ROUNDS = flags.DEFINE_integer('rounds', None,
                                 'history: 60; rounds, images: 6; in_law: 4.')
  _SIZES = flags.DEFINE_list('sizes', ['40', '640', '2560'],
                             'in_law: the clients per round B.')
  _BASELINE_ROOT = flags.DEFINE_string(
      'baseline_root', None,
      'accounting: a checkout measured beside this one.')
  _ROUNDS_SAMPLE = flags.DEFINE_integer(
      'rounds_sample', 50,
      "accounting: the baseline's epsilon per round from every n-th of the "
      '1,000 rounds.', lower_bound=1)
  _DIM = flags.DEFINE_integer('dim', 10**4, 'codec_one: the dimension.')
  _BITS = flags.DEFINE_integer('bits', 7, 'codec_one: bits.')
  _DIMS = flags.DEFINE_list('dims', ['10000', '1000000'],
                            'codec: the dimensions.')
  _BITS_LIST = flags.DEFINE_list('bits_list', ['4', '7', '10'],
                                 'codec: the bits.')
  _REPEATS = flags.DEFINE_integer('repeats', 3,
                                  'Timings per measurement (the best kept).')
