"""The planner's lines for a run's own setting (`tff_dprec.plan`).

The main job prints them before it trains, so every run says how far DP-REC
is from DP-FedAvg's noise there and at which clients per round it would
match it. The planner calibrates each mechanism with its default accountant
(PLD for DP-REC and DP-FedAvg, RDP for DDGauss) and DP-REC's bits from c,
whatever `--accounting`, `--clip_ratio` or `--bits` the run itself uses: it
answers "what would the defaults give here". It is the library's planner,
called with its own calibrations; the runner memoises its whole answer on
disk (`memoised_plan`), so a run planned before prints its lines at once.
"""

import functools
import glob
import hashlib
import json
import os

import attrs
import tensorflow as tf

from experiments.infra import atomic_files
from experiments.runner import calibration_cache
from experiments.runner import execution
from tff_dprec import history
from tff_dprec import plan as plan_lib
from tff_dprec import sizes
from tff_dprec.plan import markdown as plan_markdown
from tff_dprec.plan import planner as plan_planner


def full_state_bits(task, config, server_lr, dimension) -> int:
  """The model and DP-REC's server optimizer state, as a history counts it."""
  optimizer = execution.server_optimizer_for(task, server_lr, config,
                                             private=True)
  specs = [tf.TensorSpec([dimension], tf.float32)]
  # Hyperparameters as the process keeps them (float32 tensors).
  state = tf.nest.map_structure(tf.convert_to_tensor,
                                optimizer.initialize(specs))
  return sizes.FLOAT_BITS * dimension + history.structure_bits(state)


def plan_for_run(task, config, dp_rec_aggregator) -> plan_lib.Plan:
  """The planner at the run's N, B, T, epsilon, delta and DP-REC layout.

  The library's planner, called as a user would; its `Plan` is memoised on
  disk (`memoised_plan`).
  """
  return memoised_plan(planner_arguments(task, config, dp_rec_aggregator))


def planner_arguments(task, config, dp_rec_aggregator) -> dict:
  """`tff_dprec.plan.plan`'s arguments for the run's setting (JSON types)."""
  dimension = dp_rec_aggregator.download_bits_per_client // sizes.FLOAT_BITS
  params = dp_rec_aggregator.params
  server_lr = config.server_lr_for(task, dp_rec_aggregator.private_setting)
  return dict(
      population=task.population, clients_per_round=config.clients_per_round,
      rounds=config.rounds, target_epsilon=config.target_epsilon,
      dimension=int(dimension), delta=config.delta,
      bits=None if params.get('bits_from_c') else params['bits'],
      num_groups=params['num_groups'],
      full_bits=int(full_state_bits(task, config, server_lr,
                                    int(dimension))),
      ddgauss_l2_clip=config.l2_clip)


def print_plan(task, config, dp_rec_aggregator, print_fn):
  """Prints the planner's lines, each prefixed with the task's name.

  A planner that fails (a target out of its accountants' reach) prints why
  and returns None: the run itself goes on.
  """
  try:
    result = plan_for_run(task, config, dp_rec_aggregator)
  except ValueError as e:
    print_fn(f'[{task.name}] The planner could not plan this setting: {e}')
    return None
  print_fn(f'[{task.name}] The planner (python -m tff_dprec.plan) at this '
           'setting, before training:')
  for line in plan_markdown.format_plan(result):
    print_fn(f'[{task.name}] {line}')
  return result


def memoised_plan(arguments: dict) -> plan_lib.Plan:
  """`tff_dprec.plan.plan(**arguments)`, memoised on disk.

  A plain memo around the planner: keyed by the arguments, the accountants'
  fingerprint (`calibration_cache.accountant_fingerprint`) and the
  planner's source, stored as the plan's fields in JSON under the
  calibration cache's folder (`plans/`), and off where that cache is. The
  planner's lines only inform (a run's own parameters are calibrated and
  checked by `run_setup`), so a hit is not re-evaluated.
  """
  folder = calibration_cache.directory()
  if folder is None:
    return plan_lib.plan(**arguments)
  key = hashlib.sha256(json.dumps(
      [arguments, calibration_cache.accountant_fingerprint(),
       _planner_fingerprint()], sort_keys=True).encode()).hexdigest()
  path = os.path.join(folder, 'plans', key + '.json')
  try:
    with open(path) as f:
      return plan_from_json(json.load(f))
  except (OSError, ValueError, KeyError, TypeError):
    pass  # Not stored yet, or unreadable: planned again.
  result = plan_lib.plan(**arguments)
  try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_files.write_json(path, attrs.asdict(result))
  except OSError:
    pass  # A memo that cannot be written costs only time.
  return result


def plan_from_json(fields: dict) -> plan_lib.Plan:
  """The `Plan` whose `attrs.asdict` is `fields`."""
  dp_rec = dict(fields['dp_rec'])
  if dp_rec.get('break_even') is not None:
    dp_rec['break_even'] = plan_lib.BreakEven(**dp_rec['break_even'])
  return plan_lib.Plan(
      federation=plan_lib.Federation(**fields['federation']),
      dp_rec=plan_lib.DpRecPlan(**dp_rec),
      dp_fedavg=plan_lib.DpFedAvgPlan(**fields['dp_fedavg']),
      ddgauss=plan_lib.DdgaussPlan(**fields['ddgauss']))


@functools.lru_cache(maxsize=1)
def _planner_fingerprint() -> str:
  """Hash of the planner's source (a memoised plan is its answer)."""
  digest = hashlib.sha256()
  folder = os.path.dirname(plan_planner.__file__)
  for path in sorted(glob.glob(os.path.join(folder, '*.py'))):
    with open(path, 'rb') as f:
      digest.update(os.path.basename(path).encode() + b'\0' + f.read())
  return digest.hexdigest()
