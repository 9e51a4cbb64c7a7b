"""Communication of each method: the paper's protocols and our history
downlink, simulated over the sampled clients."""

import dataclasses
import time
from typing import Optional

import numpy as np
import tensorflow as tf

from experiments.studies import paper
from experiments.studies import paper_models
from tff_dprec import history
from tff_dprec import sizes
from tff_dprec.accounting import baselines


@dataclasses.dataclass(frozen=True)
class Traffic:
  """Bits moved by a whole training run."""
  upload_bits: int
  download_bits: int
  history_downlinks: int = 0
  full_downlinks: int = 0

  @property
  def total_bits(self) -> int:
    return self.upload_bits + self.download_bits

  @property
  def gib(self) -> float:
    return self.total_bits / paper.GIB_BITS


@dataclasses.dataclass(frozen=True)
class Protocol:
  """The sizes of DP-REC's messages and histories.

  The library's protocol (`library_protocol`): a message is a 64-bit seed
  and M b index bits; a history of rounds [s, t) has a 32-bit message count
  per round, every message of those rounds (the client's own included: the
  server sees messages without identities), and R' (64 bits) for a
  first-time client. `own_message=False` drops the client's own messages
  from its history, as the paper's Algorithm 5 does.
  """
  seed_bits: int
  index_bits: int
  header_bits: int
  initial_seed_bits: int
  own_message: bool = True

  @property
  def message_bits(self) -> int:
    return self.seed_bits + self.index_bits


def library_protocol(message_bits: int, index_bits: int) -> Protocol:
  """The library's sizes; `message_bits` from `DpRecSumFactory`."""
  return Protocol(seed_bits=message_bits - index_bits, index_bits=index_bits,
                  header_bits=history.ROUND_HEADER_BITS,
                  initial_seed_bits=history.INITIAL_SEED_BITS)


def protocol_variants(message_bits: int, index_bits: int) -> dict:
  """The library's protocol and one column per choice that moves the total."""
  base = library_protocol(message_bits, index_bits)
  return {
      'library': base,
      '32-bit seeds': dataclasses.replace(base, seed_bits=32),
      'no round headers': dataclasses.replace(base, header_bits=0),
      'without own message': dataclasses.replace(base, own_message=False),
      'all three (paper-like)': dataclasses.replace(
          base, seed_bits=32, header_bits=0, own_message=False),
  }


def sample_draws(*, population: int, clients_per_round: int, rounds: int,
                 seed: int) -> np.ndarray:
  """[rounds, B] client indices, drawn with replacement (Algorithm 7)."""
  rng = np.random.default_rng([seed, 0x5245])
  return rng.integers(population, size=(rounds, clients_per_round))


def history_server_traffic(draws: np.ndarray, *, message_bits: int,
                           full_bits: int) -> Traffic:
  """DP-REC's traffic with every downlink decided by `HistoryServer`.

  One downlink per distinct client of a round (as the training loop does),
  one message per draw. The round's message matrix is a placeholder of the
  right number of rows: HistoryServer sizes a round by its rows only.
  """
  server = history.HistoryServer(message_bits=message_bits,
                                 full_bits=full_bits, initial_seed=0)
  download = histories = fulls = 0
  for round_num, round_draws in enumerate(draws):
    for client in np.unique(round_draws).tolist():
      downlink = server.downlink(client, round_num)
      download += downlink.bits
      if downlink.kind == history.HISTORY:
        histories += 1
      else:
        fulls += 1
    server.record_round(round_num,
                        np.zeros((len(round_draws), 1), np.int64))
  return Traffic(upload_bits=int(draws.size) * message_bits,
                 download_bits=download, history_downlinks=histories,
                 full_downlinks=fulls)


def size_only_traffic(draws: np.ndarray, protocol: Protocol,
                      full_bits: int) -> Traffic:
  """DP-REC's traffic from sizes alone, vectorized over each round's clients.

  With `library_protocol` it equals `history_server_traffic` (tested): a
  history of rounds [s, t) is sum_{r=s}^{t-1} (header + n_r message) bits
  (+ R' for a first-time client), sent when it is no larger than the full
  state; HistoryServer's pruning only drops rounds no client can still get.
  """
  rounds, per_round = draws.shape
  message = protocol.message_bits
  round_bits = protocol.header_bits + per_round * message
  before = np.arange(rounds + 1, dtype=np.int64) * round_bits
  last = np.full(int(draws.max()) + 1, -1, np.int64)  # last round, or -1
  own = np.zeros(len(last), np.int64)  # messages sent in that round
  download = histories = downlinks = 0
  for t in range(rounds):
    clients, counts = np.unique(draws[t], return_counts=True)
    first = last[clients]
    new = first < 0
    bits = before[t] - before[np.where(new, 0, first)]
    bits += np.where(new, protocol.initial_seed_bits, 0)
    if not protocol.own_message:
      bits -= np.where(new, 0, own[clients] * message)
    send_history = bits <= full_bits
    download += int(np.where(send_history, bits, full_bits).sum())
    histories += int(send_history.sum())
    downlinks += len(clients)
    last[clients] = t
    own[clients] = counts
  return Traffic(upload_bits=int(draws.size) * message,
                 download_bits=download, history_downlinks=histories,
                 full_downlinks=downlinks - histories)


def fixed_traffic(*, rounds: int, clients_per_round: int, upload_bits: int,
                  download_bits: int) -> Traffic:
  """Every sampled client downloads and uploads fixed sizes, every round."""
  upload = download = 0
  for _ in range(rounds):
    upload += clients_per_round * upload_bits
    download += clients_per_round * download_bits
  return Traffic(upload_bits=upload, download_bits=download,
                 full_downlinks=rounds * clients_per_round)


def dp_fedavg_traffic(*, rounds, clients_per_round, num_params) -> Traffic:
  """DP-FedAvg (and FedAvg): the model down, a float update up."""
  model = sizes.FLOAT_BITS * num_params
  return fixed_traffic(rounds=rounds, clients_per_round=clients_per_round,
                       upload_bits=model, download_bits=model)


def ddgauss_traffic(*, rounds, clients_per_round, num_params, bits,
                    upload_dim) -> Traffic:
  """DDGauss: the model down, `bits` per coordinate of `upload_dim` up."""
  return fixed_traffic(rounds=rounds, clients_per_round=clients_per_round,
                       upload_bits=bits * upload_dim,
                       download_bits=sizes.FLOAT_BITS * num_params)


def ddgauss_padded_dim(dimension: int, rotation_type: str) -> int:
  """TFF's padded dimension ('hd': power of 2, 'dft': even)."""
  # The padding depends on the dimension and the rotation only; the other
  # arguments are nominal.
  return baselines.ddgauss_params(
      noise_multiplier=1.0, l2_clip=1.0, bits=16, clients_per_round=1,
      dimension=dimension, rotation_type=rotation_type).padded_dim


def federation(task, method):
  return dict(population=paper.paper_int(task, 'population'),
              clients_per_round=paper.paper_int(task, 'clients_per_round'),
              rounds=paper.paper_int(task, 'rounds', method))


def _comm_note(task, method, ours):
  """Rounding verdict: is `ours` within the paper's printed precision?"""
  entry = paper.paper_number(task, method, None, 'total_comm')
  if entry is None or ours is None:
    return ''
  text = entry.tex.replace(r'\emph{', '').replace('}', '').strip('$')
  decimals = len(text.split('.')[1]) if '.' in text else 0
  if abs(ours - entry.value) <= 0.5 * 10**-decimals:
    return f'rounds to the paper\'s {text}. '
  return ''


def _baseline_comm_cells(task) -> list:
  """DP-FedAvg, and DDGauss where the paper has it, at the paper's scale."""
  fed = federation(task, paper.DP_FEDAVG)
  d = paper_models.model_stats(task).num_params
  fedavg = dp_fedavg_traffic(rounds=fed['rounds'],
                             clients_per_round=fed['clients_per_round'],
                             num_params=d)
  cells = [paper.paper_cell(task, paper.DP_FEDAVG, None, 'total_comm',
                            fedavg.gib, 'T B (32 d down + 32 d up)',
                            _comm_note(task, paper.DP_FEDAVG, fedavg.gib) +
                            _fedavg_why(task, fedavg.gib))]
  for method in (paper.DDG16, paper.DDG12):
    if paper.paper_number(task, method, None, 'total_comm') is None:
      continue
    bits = int(method[3:])
    for basis, dim in (
        ('paper convention: T B (32 + b) d', d),
        ("TFF 'dft' padding (TFF's default, ours)",
         ddgauss_padded_dim(d, 'dft')),
        ("TFF 'hd' padding (power of 2)", ddgauss_padded_dim(d, 'hd'))):
      traffic = ddgauss_traffic(
          rounds=fed['rounds'], clients_per_round=fed['clients_per_round'],
          num_params=d, bits=bits, upload_dim=dim)
      note = (_comm_note(task, method, traffic.gib) +
              f'{bits} bits x {dim:,} coordinates up, the float model down.')
      cells.append(paper.paper_cell(task, method, None, 'total_comm',
                                    traffic.gib, basis, note))
  return cells


def _fedavg_why(task, ours):
  """Why DP-FedAvg's communication may differ, from the models we built."""
  why = _FEDAVG_WHY.get(task)
  return why(task, ours) if why else ''


def _mnist_why(task, ours):
  del ours
  lenet, _ = paper_models.keras_params(
      paper_models.PaperModel('LeNet-5', paper_models.lenet5, ''))
  fed = federation(task, paper.DP_FEDAVG)
  other = dp_fedavg_traffic(rounds=fed['rounds'],
                            clients_per_round=fed['clients_per_round'],
                            num_params=lenet).gib
  return (f'The appendix names LeNet-5 ({lenet:,} parameters: '
          f'{other:.3g} GiB); 43 needs the {paper_models.MODELS[task].name}.')


def _shakespeare_why(task, ours):
  del ours
  keras_model = paper_models.shakespeare_lstm()
  extra = sum(4 * layer.units for layer in keras_model.layers
              if isinstance(layer, tf.keras.layers.LSTM))
  d = paper_models.model_stats(task).num_params
  fed = federation(task, paper.DP_FEDAVG)
  torch = dp_fedavg_traffic(rounds=fed['rounds'],
                            clients_per_round=fed['clients_per_round'],
                            num_params=d + extra).gib
  return (f"Keras's LSTM has one bias per gate; PyTorch's nn.LSTM (the "
          f"paper's framework) has two, {extra:,} more parameters: "
          f'{d + extra:,} give {torch:.2f} GiB.')


def _stackoverflow_why(task, ours):
  rounds = paper.paper_int(task, 'rounds')
  theirs = paper.paper_value(task, 'total_comm', paper.DP_FEDAVG)
  return (f'{ours / theirs - 1:+.2%}:'
          ' not explained by the model (10,000 x 500 + 500) or by GB vs '
          f'GiB; T + 1 = {rounds + 1} rounds would give '
          f'{ours * (rounds + 1) / rounds:.1f}.')


# Per paper task: what explains its DP-FedAvg communication figure.
_FEDAVG_WHY = {
    'mnist': _mnist_why,
    'shakespeare': _shakespeare_why,
    'stackoverflow_lr': _stackoverflow_why,
    'emnist': lambda task, ours: 'See "FEMNIST\'s 259 GiB" for the model.',
}


@dataclasses.dataclass
class DpRecRun:
  """DP-REC's communication at one task's scale, per protocol variant."""
  task: str
  protocol_gib: dict  # variant -> GiB per sampling seed
  library: Traffic  # seed 0, through HistoryServer
  message_bits: int
  full_state_bits: int
  history_server_seconds: float  # all seeds
  size_only_seconds: float  # all seeds

  @property
  def seeds(self) -> int:
    return len(self.protocol_gib['library'])


def simulate_dp_rec(task: str, seeds: int, grouping=None,
                    rounds: Optional[int] = None) -> DpRecRun:
  """DP-REC at the paper's scale; HistoryServer must agree with the sizes."""
  fed = federation(task, paper.DP_REC)
  if rounds is not None:
    fed['rounds'] = rounds
  stats = paper_models.model_stats(task, grouping)
  index_bits = paper.paper_int('*', 'bits', paper.DP_REC) * stats.num_groups
  variants = protocol_variants(stats.message_bits, index_bits)
  message = variants['library'].message_bits
  gib = {name: [] for name in variants}
  library, hs_seconds, size_seconds = None, 0.0, 0.0
  for seed in range(seeds):
    draws = sample_draws(seed=seed, **fed)
    start = time.time()
    traffic = history_server_traffic(draws, message_bits=message,
                                     full_bits=stats.full_state_bits)
    hs_seconds += time.time() - start
    if seed == 0:
      library = traffic
    start = time.time()
    for name, protocol in variants.items():
      sized = size_only_traffic(draws, protocol, stats.full_state_bits)
      if name == 'library' and sized != traffic:
        raise AssertionError(f'Size-only count {sized} differs from '
                             f'HistoryServer {traffic} ({task}).')
      gib[name].append(sized.gib)
    size_seconds += time.time() - start
  return DpRecRun(task, gib, library, message, stats.full_state_bits,
                  hs_seconds, size_seconds)


def _dp_rec_comm_cells(run: DpRecRun, method: str = paper.DP_REC) -> list:
  cells = []
  library = float(np.mean(run.protocol_gib['library']))
  paper_like = float(np.mean(run.protocol_gib['all three (paper-like)']))
  seeds = run.protocol_gib['library']
  for name, values in run.protocol_gib.items():
    ours = float(np.mean(values))
    if name == 'library':
      basis = 'library protocol through HistoryServer'
      note = (_comm_note(run.task, method, ours) +
              f'{run.message_bits}-bit messages (64-bit seed); with 32-bit '
              f'seeds {np.mean(run.protocol_gib["32-bit seeds"]):.4g} GiB, '
              'and also without round headers and the own message '
              f'(paper-like) {paper_like:.4g} GiB. Full state '
              f'{run.full_state_bits:,} '
              f'bits; seed 0: {run.library.history_downlinks:,} histories, '
              f'{run.library.full_downlinks:,} full states; mean of '
              f'{len(seeds)} sampling seed(s), range {min(seeds):.4g}-'
              f'{max(seeds):.4g}.')
    else:
      basis = f'protocol variant: {name}'
      note = (_comm_note(run.task, method, ours) +
              f'{ours / library - 1:+.2%} against the library protocol.')
    cells.append(paper.paper_cell(run.task, method, None, 'total_comm', ours,
                                  basis, note))
  return cells


def communication_cells(config: paper.ReproduceConfig, log) -> tuple:
  """All communication cells, and the DP-REC runs (for REPRODUCTION.md)."""
  seeds = 1 if config.quick else config.sampling_seeds
  cells, runs = [], {}
  for task in paper.TASKS:
    cells.extend(_baseline_comm_cells(task))
    runs[task] = simulate_dp_rec(task, seeds)
    cells.extend(_dp_rec_comm_cells(runs[task]))
    log(f'communication {task}: DP-REC {runs[task].library.gib:.4g} GiB '
        f'(seed 0), {runs[task].history_server_seconds / seeds:.2f} s per '
        'seed through HistoryServer')
  cells.extend(_compression_only_cells(seeds, runs['emnist']))
  return cells, runs


def _compression_only_cells(seeds, dp_rec_run) -> list:
  """Table 4 of the paper (FEMNIST, 4k rounds, no DP): FedAvg, REC, REC-64."""
  task = 'emnist'
  rounds = paper.paper_int(task, 'rounds_compression_only')
  fed = federation(task, paper.DP_REC)
  fedavg = dp_fedavg_traffic(
      rounds=rounds, clients_per_round=fed['clients_per_round'],
      num_params=paper_models.model_stats(task).num_params)
  cells = [paper.paper_cell(task, paper.FEDAVG, None, 'total_comm', fedavg.gib,
                      'T B (32 d down + 32 d up)',
                      _comm_note(task, paper.FEDAVG, fedavg.gib) +
                      'Independent check of the FEMNIST model (4k rounds).')]
  same = _dp_rec_comm_cells(dp_rec_run, paper.REC)[0]
  same.note = 'Same protocol and message sizes as DP-REC. ' + same.note
  cells.append(same)
  group = paper.paper_int(task, 'group_size', paper.REC64)
  rec64 = simulate_dp_rec(task, seeds, grouping=group, rounds=rounds)
  cell = _dp_rec_comm_cells(rec64, paper.REC64)[0]
  stats = paper_models.model_stats(task, group)
  cell.note = (f'{stats.num_groups:,} groups of at most {group} per tensor '
               f'(7 bits each). ' + cell.note)
  cells.append(cell)
  return cells
