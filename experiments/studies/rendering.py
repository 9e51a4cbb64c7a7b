"""Rendering of the reproduction: reproduce.json and REPRODUCTION.md."""

import math
import os
from typing import Sequence

from experiments.infra import atomic_files
from experiments.studies import communication
from experiments.studies import paper
from experiments.studies import paper_models
from experiments.studies import utility
from tff_dprec import sizes


def write_json(path: str, cells: Sequence[paper.Cell]) -> None:
  atomic_files.write_json(path, [c.to_dict() for c in cells])


def _fmt(value):
  if value is None:
    return '-'
  if abs(value) >= 1000:
    return f'{value:,.0f}'
  if abs(value) >= 100:
    return f'{value:.1f}'
  return f'{value:.4g}'


def _ratio(cell):
  if cell.paper in (None, 0) or cell.ours is None:
    return '-'
  return f'{cell.ours / cell.paper:.4g}'


def _table1_markdown(cells) -> list:
  lines = ['## Table 1, side by side', '',
           'Every number of the paper\'s Table 1 (lines '
           f'{paper.TABLE1_LINES[0]}-{paper.TABLE1_LINES[1]} of dp-rec.tex), '
           'our primary number beside it, and why they differ. '
           'Comm. is in GiB (the paper\'s "GB"); accuracy in %.', '',
           '| task | method | row | paper | ours | ours / paper | why |',
           '|---|---|---|---|---|---|---|']
  for entry in paper.PAPER:
    if not paper.in_table1(entry):
      continue
    # The first cell with a number (a task without data has none).
    match = sorted((c for c in cells
                    if (c.task, c.method, c.epsilon, c.quantity) ==
                    (entry.task, entry.method, entry.epsilon, entry.quantity)
                    and paper.part_of(c) != 'ablations'),
                   key=lambda c: c.ours is None)
    row = ('Comm.' if entry.quantity == 'total_comm' else
           f'Acc. (eps = {entry.epsilon:g})')
    if match:
      cell = match[0]
      lines.append(f'| {entry.task} | {entry.method} | {row} | '
                   f'{entry.value:g} | {_fmt(cell.ours)} | {_ratio(cell)} | '
                   f'{cell.basis}. {cell.note} |')
    else:
      why = ('not run: training (--part=utility)'
             if entry.quantity == 'metric' else 'not computed')
      lines.append(f'| {entry.task} | {entry.method} | {row} | '
                   f'{entry.value:g} | - | - | {why} |')
  return lines + ['']


def _cells_markdown(title, intro, cells) -> list:
  lines = [f'## {title}', '', *intro, '',
           '| task | method | eps | quantity | paper | ours | ours / paper | '
           'basis | note |', '|---|---|---|---|---|---|---|---|---|']
  for c in cells:
    eps = '-' if c.epsilon is None else f'{c.epsilon:g}'
    paper = '-' if c.paper is None else f'{c.paper:g}'
    lines.append(f'| {c.task} | {c.method} | {eps} | {c.quantity} | {paper} '
                 f'| {_fmt(c.ours)} | {_ratio(c)} | {c.basis} | {c.note} |')
  return lines + ['']


def _models_markdown() -> list:
  lines = ['## The models', '',
           'Built in Keras and counted (`model_stats`); DP-REC groups by '
           'tensor, SO-LR by groups of at most 10^6 (6 groups), 7 bits '
           'each; the full state is the model and the server optimizer\'s '
           'state (Appendix C: Adam for MNIST, SGD for FEMNIST and '
           'Shakespeare, SGD with momentum for SO-LR).', '',
           '| task | model | parameters | tensors | DP-REC groups | message '
           'bits | full state bits | why this model |',
           '|---|---|---|---|---|---|---|---|']
  for task in paper.TASKS:
    s = paper_models.model_stats(task)
    model = paper_models.MODELS[task]
    lines.append(f'| {task} | {model.name} | {s.num_params:,} | '
                 f'{len(s.tensor_sizes)} | {s.num_groups} | '
                 f'{s.message_bits} | '
                 f'{s.full_state_bits:,} | {model.description} |')
  return lines + ['']


def _emnist_markdown() -> list:
  """Which parameter count reproduces FEMNIST's 259 GiB (and 690.6)."""
  task = 'emnist'
  fed = communication.federation(task, paper.DP_FEDAVG)
  client_rounds = fed['rounds'] * fed['clients_per_round']
  rounds_4k = paper.paper_int(task, 'rounds_compression_only')
  bits_per_param = 2 * sizes.FLOAT_BITS * client_rounds / paper.GIB_BITS
  bits_per_param_4k = (2 * sizes.FLOAT_BITS * rounds_4k *
                       fed['clients_per_round'] / paper.GIB_BITS)
  dp_fedavg = paper.paper_value(task, 'total_comm', paper.DP_FEDAVG)
  fedavg_4k = paper.paper_value(task, 'total_comm', paper.FEDAVG)
  lo, hi = ((dp_fedavg - 0.5) / bits_per_param,
            (dp_fedavg + 0.5) / bits_per_param)
  lo4, hi4 = ((fedavg_4k - 0.05) / bits_per_param_4k,
              (fedavg_4k + 0.05) / bits_per_param_4k)
  lines = ["## FEMNIST's 259 GiB", '',
           f'DP-FedAvg sends 2 x 32 bits per parameter per client-round; at '
           f'T = {fed["rounds"]}, B = {fed["clients_per_round"]} the paper\'s '
           f'{dp_fedavg:g} (+-0.5) needs d in [{math.ceil(lo):,}, '
           f'{math.floor(hi):,}], and Table 4\'s FedAvg {fedavg_4k:g} GB '
           f'(+-0.05) at {rounds_4k} rounds needs d in [{math.ceil(lo4):,}, '
           f'{math.floor(hi4):,}].', '',
           '| candidate | parameters | DP-FedAvg GiB (paper 259) | FedAvg 4k '
           'GiB (paper 690.6) | layers |', '|---|---|---|---|---|']
  for model in paper_models.FEMNIST_CANDIDATES:
    d, _ = paper_models.keras_params(model)
    lines.append(f'| {model.name} | {d:,} | {d * bits_per_param:.2f} | '
                 f'{d * bits_per_param_4k:.2f} | {model.description} |')
  lines += ['', 'The network the appendix names (Kairouz et al.\'s EMNIST CNN '
            'without dropout) gives 4.4x the paper\'s number. The same '
            'network with a 2x2 max-pool after the second convolution (as '
            'after the first) falls inside both intervals: it reproduces '
            'the DP-FedAvg 259, the DDGauss 194/178 (as (32 + b)/64 of it) '
            'and Table 4\'s independent 690.6. We take it as the model the '
            'paper\'s communication was computed with.', '']
  return lines


def _dp_rec_runs_markdown(runs) -> list:
  lines = ['## DP-REC communication: the simulation', '',
           'B draws per round with replacement from N clients, T rounds; '
           'every round\'s downlinks go through `HistoryServer` (sizes only); '
           'the protocol variants re-count the same draws with '
           '`size_only_traffic`, which equals HistoryServer for the '
           'library\'s protocol (checked on every run).', '',
           '| task | N | B | T | GiB (seed 0) | histories | full states | '
           'HistoryServer s per seed | size-only s per seed (5 variants) |',
           '|---|---|---|---|---|---|---|---|---|']
  for task, run in runs.items():
    fed = communication.federation(task, paper.DP_REC)
    lines.append(f'| {task} | {fed["population"]:,} | '
                 f'{fed["clients_per_round"]} | {fed["rounds"]} | '
                 f'{run.library.gib:.4g} | '
                 f'{run.library.history_downlinks:,} | '
                 f'{run.library.full_downlinks:,} | '
                 f'{run.history_server_seconds / run.seeds:.2f} | '
                 f'{run.size_only_seconds / run.seeds:.2f} |')
  return lines + ['']


def _ratios_markdown(cells) -> list:
  lines = []
  for task in paper.TASKS:
    entry = paper.paper_number(task, paper.DP_REC, None, 'comm_ratio')
    fedavg = [c for c in cells if (c.task, c.method, c.quantity) ==
              (task, paper.DP_FEDAVG, 'total_comm')]
    ours = [c for c in cells if (c.task, c.method, c.quantity) ==
            (task, paper.DP_REC, 'total_comm')]
    if entry is None or not fedavg or not ours:
      continue
    lines.append(f'* {task}: DP-FedAvg / DP-REC = '
                 f'{fedavg[0].ours / ours[0].ours:,.0f}x with the library '
                 f'protocol, {fedavg[0].ours / ours[-1].ours:,.0f}x '
                 f'paper-like; the paper says {entry.value:g}x '
                 f'(line {entry.line}).')
  if lines:
    lines = ['Compression against DP-FedAvg (total communication):', '',
             *lines, '']
  return lines


def render_markdown(config, cells, runs, seconds, ablations=None) -> str:
  """REPRODUCTION.md."""
  by_part = {p: [c for c in cells if paper.part_of(c) == p]
             for p in paper.PARTS}
  lines = ['# Reproducing DP-REC\'s Table 1', '',
           f'`python -m experiments.reproduce --output_dir={config.output_dir}'
           f' --part={",".join(config.parts)}'
           f'{" --quick" if config.quick else ""}`; wall time '
           + ', '.join(f'{p} {s:.1f} s' for p, s in seconds.items()) + '.',
           '', 'Paper numbers come from `experiments.studies.paper.PAPER` '
           '(each with its line in the paper\'s LaTeX source, '
           'arXiv:2111.05454). The paper\'s "GB" are GiB. delta = N^-1.1 '
           '(Figure 5) except for DDGauss (1/N, as Kairouz et al.).', '']
  if config.quick:
    lines += ['**--quick**: privacy for MNIST only and without calibration; '
              'one sampling seed; toy training runs. Not the full result.', '']
  lines += _table1_markdown(cells)
  if 'privacy' in config.parts:
    lines += _cells_markdown(
        'Privacy', ['epsilon at the paper\'s c (DP-REC) or z (DP-FedAvg), '
                    'and c or z calibrated to the paper\'s epsilon, under '
                    'the paper\'s accounting and the library\'s default.'],
        by_part['privacy'])
  if 'communication' in config.parts:
    lines += _models_markdown() + _emnist_markdown()
    lines += _dp_rec_runs_markdown(runs) + _ratios_markdown(cells)
    lines += _cells_markdown(
        'Communication', ['At the paper\'s N, B and T (GiB).'],
        by_part['communication'])
  intros = {
      'utility': ['**Not the paper\'s datasets, nor its rounds**: digits '
                  'stands in for MNIST and the embedded StackOverflow data '
                  'for TFF\'s; each run has the experiments\' budget '
                  '(`experiments.data.tasks` defaults), not the paper\'s '
                  '1000 to 4000 rounds. DP-REC uses the library\'s default '
                  '(PLD) '
                  'accounting. `ours` is the mean over seeds; the note '
                  'gives the standard error and each seed.'],
      'ablations': ['On the embedded StackOverflow data (the paper used '
                    'FEMNIST), with the experiments\' budget per run.'] +
                   [''] + utility.markdown(ablations)}
  for part in ('utility', 'ablations'):
    if part in config.parts:
      lines += _cells_markdown(part.capitalize(), intros[part],
                               by_part[part])
    else:
      lines += [f'## {part.capitalize()}', '',
                f'Not run: `--part={part}` trains.', '']
  return '\n'.join(lines + _real_data_markdown(config.output_dir))


def _real_data_markdown(output_dir) -> list:
  """The fashion_mnist part's table, where it has been written there."""
  path = os.path.join(output_dir, 'fashion_mnist.md')
  if not os.path.exists(path):
    return []
  with open(path) as f:
    table = f.read()
  return ['## Real data: Fashion-MNIST beside the paper\'s MNIST row', '',
          "`--part=fashion_mnist`: real Fashion-MNIST under the paper's "
          'MNIST protocol (experiments.studies.real_images). The paper\'s '
          'numbers are on MNIST, an easier dataset of the same shapes: '
          'compare the gaps, not the levels.', '', table]
