"""Privacy tables of docs/PRIVACY.md: `python -m experiments.privacy_tables`.

1. channel: the one-group channel bounds against the Gaussian mechanism's
   a c^2 / 2.
2. table1: the paper's Table 1 clip ratios and the main job: epsilon under
   the paper's accounting, the RDP one and the PLD one (the default), and
   the clip ratio, local epsilon and DP-FedAvg noise calibrated to each
   target.

`--tables` prints some of them (both by default).
"""

import warnings

from absl import app
from absl import flags
import numpy as np

from experiments.runner import cli as cli_lib
from tff_dprec import accounting
from tff_dprec.accounting import channel

CHANNEL = 'channel'
TABLE1 = 'table1'
TABLES = (CHANNEL, TABLE1)

# (task, c, N, B, T, paper's epsilon, groups) from the paper's Appendix C;
# 7 bits per group. SO-LR's logistic regression has 2 tensors, but the
# paper's SO-LR message is 6 groups of 7 bits (grouping 10^6).
PAPER_ROWS = (
    ('mnist', 0.545, 100, 10, 1000, 3.0, 10),
    ('mnist', 0.87, 100, 10, 1000, 6.0, 10),
    ('emnist', 0.77, 3500, 100, 4000, 1.0, 10),
    ('emnist', 1.41, 3500, 100, 4000, 3.0, 10),
    ('emnist', 1.745, 3500, 100, 4000, 6.0, 10),
    ('shakespeare', 1.435, 660, 66, 200, 3.0, 10),
    ('stackoverflow_lr', 1.227, 342477, 60, 1500, 1.0, 6),
)
BITS = 7
PAPER_ROWS = tuple(row + (BITS,) for row in PAPER_ROWS)
# The main job (`python -m experiments.run --task=stackoverflow_lr`): one
# group of 4 bits; c is today's RDP calibration at epsilon 1.
MAIN_JOB = ('main job', 0.886, 4000, 40, 10, 1.0, 1, 4)


def channel_ratios(clips=(0.8, 1.25, 2.0), bits=(7, 10), orders=(2, 4, 8)):
  rows = []
  for c in clips:
    for b in bits:
      forward, reverse = channel.rec_channel_rdp(clip_ratio=c, bits=b,
                                                    orders=list(orders))
      gauss = np.asarray(orders) * c * c / 2
      rows.append((c, b, reverse / gauss, forward / gauss))
  return rows


def table1_rows():
  """Each Table 1 row (and the main job) under the paper's, RDP and PLD."""
  rows = []
  for task, c, n, b, t, paper_eps, groups, bits in PAPER_ROWS + (MAIN_JOB,):
    common = dict(population=n, clients_per_round=b, rounds=t,
                  delta=accounting.default_delta(n))
    paper = None
    if task != MAIN_JOB[0]:
      with warnings.catch_warnings():
        warnings.simplefilter('ignore', accounting.UnprovenPaperBoundWarning)
        try:
          paper = accounting.dp_rec_epsilon(
              clip_ratio=c, total_bits=bits * groups, accounting='paper',
              **common)
        except accounting.OverheadExceedsDeltaError:
          pass
    row = dict(task=task, clip_ratio=c, population=n, clients_per_round=b,
               rounds=t, num_groups=groups, bits=bits,
               paper_epsilon=paper_eps, paper_mode_epsilon=paper)
    message = dict(bits=bits, num_groups=groups)
    for kind in ('rdp', 'min_pld_rdp'):
      row[f'{kind}_epsilon'] = accounting.dp_rec_epsilon(
          clip_ratio=c, accounting=kind, **message, **common)
      row[f'{kind}_clip_ratio'] = accounting.calibrate_clip_ratio(
          target_epsilon=paper_eps, accounting=kind, tol=1e-5, **message,
          **common)
      row[f'{kind}_local_epsilon'] = accounting.dp_rec_local_epsilon(
          clip_ratio=row[f'{kind}_clip_ratio'], delta=common['delta'],
          accounting=kind, **message)
      row[f'{kind}_dp_fedavg_z'] = accounting.calibrate_dp_fedavg_noise(
          target_epsilon=paper_eps, accounting=kind, tol=1e-5, **common)
    rows.append(row)
  return rows


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  tables = _TABLES.value
  unknown = sorted(set(tables) - set(TABLES))
  if unknown or not tables:
    cli_lib.fail(f'--tables must name some of {", ".join(TABLES)}, found '
                 f'{",".join(tables)!r}.')
  if CHANNEL in tables:
    _print_channel()
  if CHANNEL in tables and TABLE1 in tables:
    print()
  if TABLE1 in tables:
    _print_table1()


def _print_channel():
  print('Channel bounds / Gaussian a c^2/2 (reverse exact / forward bound):')
  print('| c | bits | a=2 | a=4 | a=8 |\n|---|---|---|---|---|')
  for c, b, rev, fwd in channel_ratios():
    cells = ' | '.join(f'{r:.3f} / {f:.3f}' for r, f in zip(rev, fwd))
    print(f'| {c} | {b} | {cells} |')


def _print_table1():
  print('The paper\'s Table 1 clip ratios (7 bits per group) and the main '
        'job, delta = N^-1.1. eps at the paper\'s c; c, local eps (one '
        'participation at that c) and DP-FedAvg\'s z at the paper\'s eps '
        '(same N, B, T); RDP -> PLD:')
  print('| task | c | N | B | T | groups x bits | paper eps | paper mode | '
        'eps at c | c at eps | local eps | DP-FedAvg z |\n'
        '|---|---|---|---|---|---|---|---|---|---|---|---|')
  for r in table1_rows():
    paper = ('-' if r['paper_mode_epsilon'] is None else
             f"{r['paper_mode_epsilon']:.3f}")
    pair = lambda key, fmt: (f"{fmt.format(r['rdp_' + key])} -> "
                             f"{fmt.format(r['pld_' + key])}")
    print(f"| {r['task']} | {r['clip_ratio']} | {r['population']} | "
          f"{r['clients_per_round']} | {r['rounds']} | "
          f"{r['num_groups']} x {r['bits']} | {r['paper_epsilon']:g} | "
          f"{paper} | {pair('epsilon', '{:.4g}')} | "
          f"{pair('clip_ratio', '{:.4f}')} | "
          f"{pair('local_epsilon', '{:.3f}')} | "
          f"{pair('dp_fedavg_z', '{:.4f}')} |")



def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  global _TABLES  # pylint: disable=global-statement
  _TABLES = flags.DEFINE_list(
      'tables', list(TABLES),
      f'Which tables: {CHANNEL} (the channel bounds, a second), {TABLE1} '
      '(the Table 1 rows, calibrated under both accountings: minutes).')
