"""The accounting golden table: its cases, how each is computed, the file.

`tests/library/golden/accounting_v1.json` pins about 30 values of the
accountants, calibrations and planner (epsilons under each accounting,
calibrated clip ratios and noise multipliers, the planner's JSON,
per-round epsilons), computed by the accounting code before its speed-up.
The golden test (`accounting_golden_test`) recomputes each with the
current code and accepts a value only when it is equal (relative 1e-9) or
more private.
Cases of one group under the PLD (`uses_worst_pair`) moved with the worst
pair's profile (docs/PRIVACY.md Section 11); `accounting_v2.json` pins
every case to that accountant, written once with it.

`python -m tests.library.accounting_golden_cases --out=PATH` writes the
table from whatever `tff_dprec` is importable; it was run once, against the code
before the speed-up, and must not be rerun against later code (that would
pin the later code's values instead).
"""

import json
import sys
import warnings

from absl import app
from absl import flags

from tff_dprec import accounting
from tff_dprec import plan as plan_lib
from tff_dprec.accounting import calibration
from tff_dprec.plan import search as plan_search

# The main job's federation (SO-LR) and Fashion-MNIST's.
MAIN = dict(population=342477, clients_per_round=40, rounds=50)
MAIN_DIMENSION = 50050
FMNIST = dict(population=100, clients_per_round=10, rounds=1000)
FMNIST_DIMENSION = 61706
FMNIST_GROUPS = 10  # LeNet-5's tensors ('tensor' grouping).

# DP-REC epsilons: (c, bits, groups, population, clients per round, rounds)
# under the two proven accountings; the paper's with total_bits.
DP_REC_SETTINGS = (
    (1.0, 7, 1, 342477, 40, 50),
    (2.2, 8, 4, 342477, 40, 50),
    (1.2, 6, 10, 100, 10, 1000),
    (0.6, 5, 3, 5000, 20, 300),
)
PAPER_SETTINGS = (
    # (c, total_bits, population, clients per round, rounds)
    (1.0, 600, 342477, 40, 50),
    (0.545, 70, 100, 10, 1000),
)
LOCAL_SETTINGS = ((1.3, 7, 1), (0.9, 6, 10))  # (c, bits, groups), delta 1e-5
PLAN_SETTINGS = (
    dict(MAIN, target_epsilon=1.0, dimension=MAIN_DIMENSION),
    dict(FMNIST, target_epsilon=3.0, dimension=FMNIST_DIMENSION,
         num_groups=FMNIST_GROUPS),
    dict(population=20000, clients_per_round=50, rounds=200,
         target_epsilon=2.0, dimension=100000, num_groups=4),
)
PER_ROUND = 20  # Rounds of the per-round epsilon cases.


def uses_worst_pair(kind, args) -> bool:
  """Whether the case's DP-REC accounting takes the worst pair's profile.

  One group under the PLD accounting, amplified (docs/PRIVACY.md Section
  11); local epsilons use the pair (P_v, P_0) and do not.
  """
  if kind == 'dp_rec_epsilon':
    return args[2] == 1 and args[6] == 'min_pld_rdp'
  if kind == 'clip_ratio':
    return args[3] == 1 and args[4] == 'min_pld_rdp'
  if kind == 'dp_rec_rounds':
    return args[2] == 1
  if kind == 'plan':
    return args.get('num_groups', 1) == 1
  return False


def delta_of(population):
  return accounting.default_delta(population)


def dp_rec_epsilon(args):
  c, bits, groups, n, b, t, kind = args
  return accounting.dp_rec_epsilon(
      clip_ratio=c, bits=bits, num_groups=groups, population=n,
      clients_per_round=b, rounds=t, delta=delta_of(n), accounting=kind)


def paper_epsilon(args):
  c, total_bits, n, b, t = args
  return accounting.dp_rec_epsilon(
      clip_ratio=c, total_bits=total_bits, population=n, clients_per_round=b,
      rounds=t, delta=delta_of(n), accounting='paper')


def local_epsilon(args):
  c, bits, groups, kind = args
  return accounting.dp_rec_local_epsilon(
      clip_ratio=c, bits=bits, num_groups=groups, delta=1e-5, rounds=3,
      accounting=kind)


def clip_ratio(args):
  fed, target, bits, groups, kind = args
  return accounting.calibrate_clip_ratio(
      target_epsilon=target, bits=bits, num_groups=groups, accounting=kind,
      delta=delta_of(fed['population']), **fed)


def dp_fedavg_noise(args):
  fed, target, kind = args
  return accounting.calibrate_dp_fedavg_noise(
      target_epsilon=target, accounting=kind,
      delta=delta_of(fed['population']), **fed)


def ddgauss_noise(args):
  fed, target, dimension = args
  return accounting.calibrate_ddgauss_noise(
      target_epsilon=target, l2_clip=1.0, bits=16, dimension=dimension,
      delta=delta_of(fed['population']), **fed)


def plan_json(args):
  return plan_lib.plan(**args).to_json()


def dp_rec_rounds(args):
  """DP-REC's epsilon after each of rounds 1..PER_ROUND (from scratch)."""
  c, bits, groups, n, b = args
  return [accounting.dp_rec_epsilon(
      clip_ratio=c, bits=bits, num_groups=groups, population=n,
      clients_per_round=b, rounds=r, delta=delta_of(n))
          for r in range(1, PER_ROUND + 1)]


def dp_fedavg_rounds(args, rounds=None):
  """DP-FedAvg's epsilon after each of `rounds` (default 1..PER_ROUND)."""
  z, n, b = args
  return [accounting.dp_fedavg_epsilon(
      noise_multiplier=z, population=n, clients_per_round=b, rounds=r,
      delta=delta_of(n)) for r in rounds or range(1, PER_ROUND + 1)]


def ddgauss_rounds(args):
  z, n, b, dimension = args
  return [accounting.ddgauss_epsilon(
      noise_multiplier=z, l2_clip=0.2, bits=16, population=n,
      clients_per_round=b, rounds=r, delta=delta_of(n), dimension=dimension)
          for r in range(1, PER_ROUND + 1)]


# kind -> (compute, how a value may move: 'epsilon' (only up),
# 'clip_ratio' (only down), 'noise_multiplier' (only up), 'plan' (per
# field, see accounting_golden_test)).
KINDS = {
    'dp_rec_epsilon': (dp_rec_epsilon, 'epsilon'),
    'paper_epsilon': (paper_epsilon, 'epsilon'),
    'local_epsilon': (local_epsilon, 'epsilon'),
    'clip_ratio': (clip_ratio, 'clip_ratio'),
    'dp_fedavg_noise': (dp_fedavg_noise, 'noise_multiplier'),
    'ddgauss_noise': (ddgauss_noise, 'noise_multiplier'),
    'plan': (plan_json, 'plan'),
    'dp_rec_rounds': (dp_rec_rounds, 'epsilon'),
    'dp_fedavg_rounds': (dp_fedavg_rounds, 'epsilon'),
    'ddgauss_rounds': (ddgauss_rounds, 'epsilon'),
}


def planner_bits(fed, target, groups):
  """The bits the planner chooses from c (`plan.search.auto_bits`)."""
  delta = delta_of(fed['population'])
  return plan_search.auto_bits(lambda b: calibration.round_down(
      accounting.calibrate_clip_ratio(target_epsilon=target, bits=b,
                                      num_groups=groups, delta=delta,
                                      **fed)))[0]


def cases():
  """[(kind, args)] of the table."""
  out = []
  for c, bits, groups, n, b, t in DP_REC_SETTINGS:
    for kind in ('min_pld_rdp', 'rdp'):
      out.append(('dp_rec_epsilon', [c, bits, groups, n, b, t, kind]))
  out += [('paper_epsilon', list(s)) for s in PAPER_SETTINGS]
  out += [('local_epsilon', [c, bits, groups, kind])
          for c, bits, groups in LOCAL_SETTINGS
          for kind in ('min_pld_rdp', 'rdp')]
  main_bits = planner_bits(MAIN, 1.0, 1)
  fmnist_bits = planner_bits(FMNIST, 3.0, FMNIST_GROUPS)
  out += [('clip_ratio', [MAIN, 1.0, main_bits, 1, 'min_pld_rdp']),
          ('clip_ratio', [MAIN, 1.0, main_bits, 1, 'rdp']),
          ('clip_ratio',
           [FMNIST, 3.0, fmnist_bits, FMNIST_GROUPS, 'min_pld_rdp'])]
  out += [('dp_fedavg_noise', [MAIN, 1.0, 'min_pld_rdp']),
          ('dp_fedavg_noise', [MAIN, 1.0, 'rdp']),
          ('dp_fedavg_noise', [FMNIST, 3.0, 'min_pld_rdp']),
          ('ddgauss_noise', [MAIN, 1.0, MAIN_DIMENSION]),
          ('ddgauss_noise', [FMNIST, 3.0, FMNIST_DIMENSION])]
  out += [('plan', dict(s)) for s in PLAN_SETTINGS]
  out += [('dp_rec_rounds', [1.3, 7, 1, 342477, 40]),
          ('dp_rec_rounds', [0.9, 6, 10, 100, 10]),
          ('dp_fedavg_rounds', [0.8, 342477, 40]),
          ('ddgauss_rounds', [0.8, 342477, 40, MAIN_DIMENSION])]
  return out


def compute(kind, args):
  with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    return KINDS[kind][0](args)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  table = []
  for kind, case_args in cases():
    value = compute(kind, case_args)
    table.append(dict(kind=kind, args=case_args, value=value))
    print(kind, case_args, value, file=sys.stderr, flush=True)
  with open(flags.FLAGS.out, 'w') as f:
    # json writes floats with repr: the full double, read back exactly.
    json.dump(table, f, indent=1)
    f.write('\n')


if __name__ == '__main__':
  # Defined here only: the tests import this module.
  flags.DEFINE_string('out', None, 'Where the table is written (JSON).',
                      required=True)
  app.run(main)
