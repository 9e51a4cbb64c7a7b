"""The attribution study's rows: what each trains, at which target.

The rows and blocks are described in `experiments.studies.attribution`.
`all_rows` lists them in training order; `row_config` is a row's run
configuration, in its own folder; `targets` gives each row's target
epsilon (a paper-c row is charged the proven epsilon of the paper's c).
"""

import dataclasses
import os
from typing import Optional

from experiments.runner import config as config_lib
from experiments.runner import registry
from tff_dprec.plan import search as plan_search
from experiments.runner import aggregator_builders
from experiments.studies import paper
from experiments.studies import real_images
from experiments.studies import tuning

TASK = real_images.TASK
ROUNDS = 1000  # The paper's (Appendix C).
EVAL_EVERY = 25
LAST_ROUNDS = 100  # The steadier figure: the mean of these rounds' points.
REC_SEEDS = 5  # DP-REC rows and their exact-sample controls.
OTHER_SEEDS = 3
# The 300-round study's validation choices
# (docs/figures/fashion_mnist_table.md).
CHOSEN_CLIP = 0.005  # DP-FedAvg's clip; DDGauss16 takes it too.
CHOSEN_SIGMA = 0.0025  # DP-REC's prior sigma.
NEIGHBOURS = {'dp_fedavg': ('l2_clip', (0.0025, 0.005, 0.01)),
              'dp_rec': ('noise_stddev', (0.00125, 0.0025, 0.005))}
# The proven rows' block and control names keep their earlier word 'sound'
# ('eps6_sound', 'exact_sound_<tag>'): they name the committed records'
# directories (results/attribution/).
BLOCKS = ('eps3', 'neighbours', 'eps6_paper', 'eps6_sound')


@dataclasses.dataclass(frozen=True)
class Row:
  """One table row: what it trains, at which target, and how it is named.

  `epsilon` is the epsilon the row is meant to have (the paper's claim for
  a paper row, the calibration target for a proven one; None for FedAvg).
  A paper DP-REC row and its control train at the proven epsilon of the
  paper's c (`target`), which the accountant then charges.
  """
  key: str
  aggregator: str
  label: str
  kind: str  # 'paper', 'proven', 'reference', 'control' or 'nonprivate'.
  epsilon: Optional[float]
  setting: dict
  seeds: int
  accountant: str
  block: str

  @property
  def uses_paper_c(self) -> bool:
    return 'clip_ratio' in self.setting


def paper_value(quantity, method=None, eps=None):
  """The paper's MNIST value of `quantity` (`paper.paper_value`)."""
  return paper.paper_value('mnist', quantity, method, eps)


def _paper_rows(eps, block) -> list[Row]:
  fedavg = dict(l2_clip=paper_value('l2_clip', paper.DP_FEDAVG),
                noise_multiplier=paper_value('noise_multiplier',
                                             paper.DP_FEDAVG, eps))
  rec = dict(noise_stddev=paper_value('noise_stddev', paper.DP_REC),
             clip_ratio=paper_value('clip_ratio', paper.DP_REC, eps))
  tag = f'eps{eps:g}'
  return [
      Row(f'paper_dp_fedavg_{tag}', 'dp_fedavg', "DP-FedAvg, paper's z",
          'paper', eps, fedavg, OTHER_SEEDS, 'PLD', block),
      Row(f'paper_dp_rec_{tag}', 'dp_rec', "DP-REC, paper's c", 'paper', eps,
          rec, REC_SEEDS, 'PLD (proven, bits from c)', block)]


def _exact_rows(eps, block) -> list[Row]:
  rec = dict(noise_stddev=paper_value('noise_stddev', paper.DP_REC),
             clip_ratio=paper_value('clip_ratio', paper.DP_REC, eps))
  tag = f'eps{eps:g}'
  return [
      Row(f'exact_paper_{tag}', registry.EXACT_SAMPLE,
          "DP-REC's exact-sample control at the paper's c", 'control', eps,
          rec, REC_SEEDS, '-', block),
      Row(f'exact_sound_{tag}', registry.EXACT_SAMPLE,
          "DP-REC's exact-sample control at the proven c", 'control', eps,
          dict(noise_stddev=CHOSEN_SIGMA), REC_SEEDS, '-', block)]


def _proven_rows(eps, block, reference: bool) -> list[Row]:
  tag = f'eps{eps:g}'
  clip = dict(l2_clip=CHOSEN_CLIP)
  rows = [
      Row(f'dp_fedavg_{tag}', 'dp_fedavg', 'DP-FedAvg', 'proven', eps, clip,
          OTHER_SEEDS, 'PLD', block),
      Row(f'dp_rec_{tag}', 'dp_rec', 'DP-REC', 'proven', eps,
          dict(noise_stddev=CHOSEN_SIGMA), REC_SEEDS, 'PLD (bits from c)',
          block),
      Row(f'ddgauss16_{tag}', 'ddgauss16', 'DDGauss16', 'proven', eps, clip,
          OTHER_SEEDS, 'RDP', block)]
  if reference:
    rows.append(Row(f'dp_fedavg_rdp_{tag}', 'dp_fedavg', 'DP-FedAvg (RDP)',
                    'reference', eps, dict(clip, accounting='rdp'),
                    OTHER_SEEDS, 'RDP', block))
  return rows


def all_rows() -> list[Row]:
  """Every row, in training order (module doc)."""
  return (_paper_rows(3.0, 'eps3') + _exact_rows(3.0, 'eps3') +
          _proven_rows(3.0, 'eps3', reference=True) +
          [Row('fedavg', 'fedavg', 'FedAvg', 'nonprivate', None, {},
               OTHER_SEEDS, '-', 'eps3')] +
          _paper_rows(6.0, 'eps6_paper') +
          _proven_rows(6.0, 'eps6_sound', reference=False))


def base_config(output_dir, data_dir, rounds=ROUNDS,
                jobs=1) -> config_lib.RunConfig:
  return config_lib.RunConfig(
      task=TASK, aggregators=('fedavg',), data_dir=data_dir,
      output_dir=output_dir, rounds=rounds, eval_every=EVAL_EVERY,
      progress=False, jobs=jobs)


def row_config(base, row: Row, target_epsilon: float, seed: int = 0,
               num_seeds: Optional[int] = None) -> config_lib.RunConfig:
  """The configuration of `row`'s seeds `seed`, ..., in its own folder."""
  return config_lib.RunConfig(**{
      **base.asdict(), **row.setting, 'aggregators': (row.aggregator,),
      'target_epsilon': target_epsilon, 'seed': seed,
      'num_seeds': row.seeds if num_seeds is None else num_seeds,
      'jobs': min(base.jobs, row.seeds if num_seeds is None else num_seeds),
      'output_dir': os.path.join(base.output_dir, 'rows', row.key)})


def proven_epsilon_of_c(task, base) -> callable:
  """c -> DP-REC's proven (PLD) epsilon at c, with the bits chosen from c,
  over the study's rounds: what the paper-c rows are accounted at."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  config = base.resolved(task)
  value_type = tff.learning.models.weights_type_from_model(
      task.baseline.model_fn).trainable

  def epsilon(c):
    bits = plan_search.auto_bits(lambda _: c)[0]
    groups = aggregator_builders.num_groups(value_type, config.grouping)
    return accounting.dp_rec_epsilon(
        clip_ratio=c, bits=bits, num_groups=groups, rounds=config.rounds,
        population=task.population,
        clients_per_round=config.clients_per_round, delta=config.delta)

  return epsilon


def targets(rows, proven_epsilon) -> dict:
  """{row key: the target epsilon its runs are configured with}."""
  from tff_dprec.accounting import calibration  # pylint: disable=g-import-not-at-top
  out = {}
  for row in rows:
    if row.uses_paper_c:
      out[row.key] = calibration.round_up(
          proven_epsilon(row.setting['clip_ratio']), 4)
    else:
      out[row.key] = row.epsilon if row.epsilon is not None else 1.0
  return out


def neighbour_settings(name) -> list[dict]:
  field, values = NEIGHBOURS[name]
  return [{field: v} for v in values]


def neighbours_config(base, name) -> config_lib.RunConfig:
  """Validation runs of `name` at epsilon 3, one seed per setting."""
  return config_lib.RunConfig(**{
      **base.asdict(), 'aggregators': (name,), 'num_seeds': 1, 'jobs': 1,
      'target_epsilon': 3.0,
      'seed': base.seed + tuning.TUNE_SEED_OFFSET,
      'eval_split': 'validation', 'eval_every': 10**6,
      'output_dir': os.path.join(base.output_dir, 'neighbours', name)})
