"""The planner's lines for a run's own setting (`tff_dprec.plan`).

The main job prints them before it trains, so every run says how far DP-REC
is from DP-FedAvg's noise there and at which clients per round it would
match it. The planner calibrates each mechanism with its default accountant
(PLD for DP-REC and DP-FedAvg, RDP for DDGauss) and DP-REC's bits from c,
whatever `--accounting`, `--clip_ratio` or `--bits` the run itself uses: it
answers "what would the defaults give here". Calibrations go through the
run's on-disk cache (`calibration_cache`), under the names and keys the
aggregators' builders (`registry`) use, and so do the outcome of the
break-even search and the margin checks that settle DP-REC's bits: a run
built before finds every value there, each calibration checked against
the target once per process.
"""

import functools
import hashlib

import tensorflow as tf

from experiments.runner import calibration_cache
from experiments.runner import execution
from tff_dprec import accounting
from tff_dprec import history
from tff_dprec import plan as plan_lib
from tff_dprec import sizes
from tff_dprec.accounting import accountings
from tff_dprec.accounting import calibration
from tff_dprec.plan import markdown as plan_markdown
from tff_dprec.plan import planner as plan_planner
from tff_dprec.plan import search as plan_search


class CachedCalibrations(plan_lib.Calibrations):
  """`plan_lib.Calibrations` through the experiments' calibration cache.

  Each value is asked of the cache once per instance, as the base class
  computes each once.
  """

  @functools.lru_cache(maxsize=None)
  def dp_rec_clip_ratio(self, clients_per_round, bits, num_groups):
    fed = self.federation
    common = dict(population=fed.population,
                  clients_per_round=clients_per_round, delta=fed.delta)
    message = dict(bits=bits, num_groups=num_groups,
                   accounting=accountings.MIN_PLD_RDP)
    return calibration.round_down(calibration_cache.calibrate(
        'dp_rec_clip_ratio', accounting.calibrate_clip_ratio,
        lambda c: accounting.dp_rec_epsilon(
            clip_ratio=c, rounds=fed.rounds, **message, **common),
        fed.target_epsilon, rounds=fed.rounds, **message, **common))

  @functools.lru_cache(maxsize=None)
  def dp_fedavg_noise(self, accountant):
    fed = self.federation
    return calibration.round_up(calibration_cache.calibrate(
        'dp_fedavg_noise_multiplier', accounting.calibrate_dp_fedavg_noise,
        lambda z: accounting.dp_fedavg_epsilon(
            noise_multiplier=z, rounds=fed.rounds, accounting=accountant,
            **_common(fed)),
        fed.target_epsilon, rounds=fed.rounds, accounting=accountant,
        **_common(fed)))

  @functools.lru_cache(maxsize=None)
  def ddgauss_noise(self, l2_clip, bits):
    fed = self.federation
    settings = dict(l2_clip=l2_clip, bits=bits, rounds=fed.rounds,
                    dimension=fed.dimension, **_common(fed))
    return calibration_cache.calibrate(
        'ddgauss_noise_multiplier', accounting.calibrate_ddgauss_noise,
        lambda z: accounting.ddgauss_epsilon(noise_multiplier=z, **settings),
        fed.target_epsilon, **settings)

  def dp_rec_misses_margin(self, clients_per_round, bits, num_groups):
    """The planner's margin check (one epsilon), cached.

    Not checked again on a hit: it only settles which bits to calibrate,
    and the c calibrated at the bits chosen is checked as any other.
    """
    fed = self.federation
    return calibration_cache.remember(
        'plan_dp_rec_misses_margin',
        lambda: super(CachedCalibrations, self).dp_rec_misses_margin(
            clients_per_round, bits, num_groups),
        lambda missed: isinstance(missed, bool),
        target_epsilon=fed.target_epsilon, bits=bits, num_groups=num_groups,
        rounds=fed.rounds, population=fed.population,
        clients_per_round=clients_per_round, delta=fed.delta,
        planner=_planner_fingerprint())

  def dp_rec_break_even(self, target_noise, bits, num_groups, at_b):
    """The search's (B', bits) cached; c at B' from its own cache entry.

    A cached B' is returned where DP-REC's c there, checked against the
    target by its entry, still gives a relative noise within
    `target_noise`; otherwise the search runs again.
    """
    fed = self.federation

    def search():
      found = super(CachedCalibrations, self).dp_rec_break_even(
          target_noise, bits, num_groups, at_b)
      return None if found is None else [found[0], found[2]]

    def still_a_hit(found):
      if found is None:
        return True  # No B' <= N: nothing calibrated to check.
      clients, chosen = found
      return plan_search.dp_rec_relative_noise(
          self.dp_rec_clip_ratio(clients, chosen, num_groups),
          clients) <= target_noise

    found = calibration_cache.remember(
        'plan_dp_rec_break_even', search, still_a_hit,
        target_epsilon=fed.target_epsilon, target_noise=target_noise,
        bits=bits, num_groups=num_groups, rounds=fed.rounds,
        at_b=list(at_b), planner=_planner_fingerprint(), **_common(fed))
    if found is None:
      return None
    clients, chosen = found
    return clients, self.dp_rec_clip_ratio(clients, chosen,
                                           num_groups), chosen


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
  """The planner at the run's N, B, T, epsilon, delta and DP-REC layout."""
  dimension = dp_rec_aggregator.download_bits_per_client // sizes.FLOAT_BITS
  params = dp_rec_aggregator.params
  server_lr = config.server_lr_for(task, dp_rec_aggregator.private_setting)
  return plan_lib.plan(
      population=task.population, clients_per_round=config.clients_per_round,
      rounds=config.rounds, target_epsilon=config.target_epsilon,
      dimension=int(dimension), delta=config.delta,
      bits=None if params.get('bits_from_c') else params['bits'],
      num_groups=params['num_groups'],
      full_bits=full_state_bits(task, config, server_lr, int(dimension)),
      ddgauss_l2_clip=config.l2_clip, calibrations=CachedCalibrations)


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


@functools.lru_cache(maxsize=1)
def _planner_fingerprint() -> str:
  """Hash of the planner's searches (a cached outcome is theirs)."""
  digest = hashlib.sha256()
  for module in (plan_planner, plan_search):
    with open(module.__file__, 'rb') as f:
      digest.update(f.read())
  return digest.hexdigest()


def _common(fed):
  return dict(population=fed.population,
              clients_per_round=fed.clients_per_round, delta=fed.delta)
