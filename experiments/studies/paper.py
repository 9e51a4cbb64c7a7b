"""The paper's numbers (Table 1 and the text), each with its line in the .tex,
and the cells that put ours beside them."""

import dataclasses
import os
from typing import Optional


PARTS = ('privacy', 'communication', 'utility', 'ablations')
DEFAULT_PARTS = PARTS
TASKS = ('mnist', 'emnist', 'shakespeare', 'stackoverflow_lr')
QUANTITIES = ('epsilon', 'clip_ratio', 'noise_multiplier', 'total_comm',
              'metric')
UNITS = {'epsilon': 'epsilon', 'clip_ratio': 'c = clip / sigma',
         'noise_multiplier': 'z = noise stddev / clip', 'total_comm': 'GiB',
         'metric': '%'}
# The paper's "GB" are GiB: 2 T B d 32 bits reproduces its DP-FedAvg
# column only with 2^30-byte units.
GIB_BITS = 8 * 2**30
PAPER_TEX = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared', 'paper',
    'dp-rec.tex'))

DP_REC, DP_FEDAVG, DDG16, DDG12 = 'DP-REC', 'DP-FedAvg', 'DDG16', 'DDG12'
FEDAVG, REC, REC64 = 'FedAvg', 'REC', 'REC-64'
# The experiments' private aggregators -> the paper's method of the same
# mechanism (the in-law simulation and the controls have none).
METHODS = {'dp_rec': DP_REC, 'dp_fedavg': DP_FEDAVG, 'ddgauss16': DDG16,
           'ddgauss12': DDG12}


@dataclasses.dataclass(frozen=True)
class PaperNumber:
  """One number printed in the paper.

  `task` '*' is a setting of every task; `method` None is the task's setting
  shared by its methods; `epsilon` None for what does not depend on it.
  `tex` is the snippet of line `line` of dp-rec.tex that prints `value`.
  """
  task: str
  method: Optional[str]
  epsilon: Optional[float]
  quantity: str
  value: float
  tex: str
  line: int


def _p(task, method, epsilon, quantity, value, tex, line):
  return PaperNumber(task, method, epsilon, quantity, value, tex, line)


# Table 1 spans these lines of dp-rec.tex.
TABLE1_LINES = (297, 336)
# Every paper number used here, with its line in the paper's LaTeX source
# (arXiv:2111.05454).
PAPER = (
    # Table 1 (lines 297-336): accuracy (%) and "Comm." (in GB, i.e. GiB).
    _p('mnist', None, 3, 'epsilon', 3, r'Acc. ($\varepsilon\!=\!3$)', 303),
    _p('mnist', DP_FEDAVG, 3, 'metric', 82.1, '$82.1', 303),
    _p('mnist', DP_REC, 3, 'metric', 69.5, '$69.5', 303),
    _p('mnist', None, 6, 'epsilon', 6, r'Acc. ($\varepsilon\!=\!6$)', 304),
    _p('mnist', DP_FEDAVG, 6, 'metric', 90.0, '$90.0', 304),
    _p('mnist', DP_REC, 6, 'metric', 83.7, '$83.7', 304),
    _p('mnist', DP_FEDAVG, None, 'total_comm', 43, r'\emph{43}', 305),
    _p('mnist', DP_REC, None, 'total_comm', 0.01, r'\emph{0.01}', 305),
    _p('emnist', None, 1, 'epsilon', 1, r'Acc. ($\varepsilon\!=\!1$)', 313),
    _p('emnist', DP_FEDAVG, 1, 'metric', 66.0, '$66.0', 313),
    _p('emnist', DP_REC, 1, 'metric', 59.7, '$59.7', 313),
    _p('emnist', None, 3, 'epsilon', 3, r'Acc. ($\varepsilon\!=\!3$)', 314),
    _p('emnist', DP_FEDAVG, 3, 'metric', 74.6, '$74.6', 314),
    _p('emnist', DDG16, 3, 'metric', 72, '^\\sim}72$', 314),
    _p('emnist', DDG12, 3, 'metric', 25, '^\\sim}25$', 314),
    _p('emnist', DP_REC, 3, 'metric', 67.1, '$67.1', 314),
    _p('emnist', None, 6, 'epsilon', 6, r'Acc. ($\varepsilon\!=\!6$)', 315),
    _p('emnist', DP_FEDAVG, 6, 'metric', 75.6, '$75.6', 315),
    _p('emnist', DDG16, 6, 'metric', 77, '^\\sim}77$', 315),
    _p('emnist', DDG12, 6, 'metric', 71, '^\\sim}71$', 315),
    _p('emnist', DP_REC, 6, 'metric', 69.2, '$69.2', 315),
    _p('emnist', DP_FEDAVG, None, 'total_comm', 259, r'\emph{259}', 316),
    _p('emnist', DDG16, None, 'total_comm', 194, r'\emph{194}', 316),
    _p('emnist', DDG12, None, 'total_comm', 178, r'\emph{178}', 316),
    _p('emnist', DP_REC, None, 'total_comm', 14.2, r'\emph{14.2}', 316),
    _p('shakespeare', None, 3, 'epsilon', 3, r'Acc. ($\varepsilon\!=\!3$)',
       323),
    _p('shakespeare', DP_FEDAVG, 3, 'metric', 39.0, '$39.0', 323),
    _p('shakespeare', DP_REC, 3, 'metric', 29.2, '$29.2', 323),
    _p('shakespeare', DP_FEDAVG, None, 'total_comm', 81, r'\emph{81}', 324),
    _p('shakespeare', DP_REC, None, 'total_comm', 0.1, r'\emph{0.1}', 324),
    _p('stackoverflow_lr', None, 1, 'epsilon', 1,
       r'R@5 ($\varepsilon\!=\!1)$', 333),
    _p('stackoverflow_lr', DP_FEDAVG, 1, 'metric', 19.3, '$19.3', 333),
    _p('stackoverflow_lr', DDG16, 1, 'metric', 14, '^\\sim}14$', 333),
    _p('stackoverflow_lr', DDG12, 1, 'metric', 10, '^\\sim}10$', 333),
    _p('stackoverflow_lr', DP_REC, 1, 'metric', 18.4, '$18.4', 333),
    _p('stackoverflow_lr', DP_FEDAVG, None, 'total_comm', 3356,
       r'\emph{3356}', 334),
    _p('stackoverflow_lr', DDG16, None, 'total_comm', 2517, r'\emph{2517}',
       334),
    _p('stackoverflow_lr', DDG12, None, 'total_comm', 2307, r'\emph{2307}',
       334),
    _p('stackoverflow_lr', DP_REC, None, 'total_comm', 32, r'\emph{32}',
       334),
    # Table 1's caption: DDGauss's FEMNIST has 3.4k clients.
    _p('emnist', 'DDGauss', None, 'population', 3400,
       'FEMNIST dataset ($3.4k$', 297),
    # Section 4.1: the compression ratios quoted in the text.
    _p('mnist', DP_REC, None, 'comm_ratio', 4300, '$4300$x compression',
       369),
    _p('stackoverflow_lr', DP_REC, None, 'comm_ratio', 105,
       '$105$x for SO-LR', 369),
    _p('emnist', DP_REC, None, 'comm_ratio', 18, '$18$x on FEMNIST', 369),
    # Appendix C, datasets (Shakespeare's alphabet) and Table 2 (clients).
    _p('shakespeare', None, None, 'vocabulary', 80,
       'library of $80$ characters', 796),
    _p('stackoverflow_lr', None, None, 'num_tags', 500, 'one of $500$ tags',
       799),
    _p('stackoverflow_lr', None, None, 'num_words', 10000,
       'the $10,000$ most frequent words', 799),
    _p('mnist', None, None, 'population', 100, 'MNIST&  100', 809),
    _p('emnist', None, None, 'population', 3500, 'FEMNIST & 3500', 810),
    _p('shakespeare', None, None, 'population', 660, 'Shakespeare&  660',
       811),
    _p('stackoverflow_lr', None, None, 'population', 342477,
       'StackOverflow & $342,477$', 812),
    # Appendix C, hyperparameters.
    _p('*', DP_REC, None, 'bits', 7, '$7$-bit per tensor', 819),
    _p('stackoverflow_lr', DP_REC, None, 'group_size', 1e6,
       'each with $10^6$ entries', 819),
    _p('stackoverflow_lr', DP_REC, None, 'num_groups', 6,
       'we had 6 quantization groups in total', 819),
    _p('mnist', None, None, 'rounds', 1000,
       'trained for $1$k global communication rounds', 823),
    _p('mnist', None, None, 'clients_per_round', 10,
       'We used $10$ clients on each round', 823),
    _p('mnist', DP_FEDAVG, None, 'l2_clip', 0.01,
       'the clipping threshold was $0.01$', 823),
    _p('mnist', DP_REC, None, 'noise_stddev', 0.005, r'$\sigma = 0.005$',
       823),
    _p('mnist', DP_FEDAVG, 3, 'noise_multiplier', 3.8,
       'noise scale of $3.8$', 823),
    _p('mnist', DP_FEDAVG, 6, 'noise_multiplier', 2.15, '$3.8$ and $2.15$',
       823),
    _p('mnist', DP_REC, 3, 'clip_ratio', 0.545, '$c=0.545$', 823),
    _p('mnist', DP_REC, 6, 'clip_ratio', 0.87, '$c=0.87$', 823),
    _p('emnist', None, None, 'clients_per_round', 100,
       'we sampled $100$ clients', 825),
    _p('emnist', DP_FEDAVG, None, 'rounds', 1500,
       'we trained for $1.5$k rounds', 825),
    _p('emnist', DP_REC, None, 'rounds', 4000, 'train for $4$k rounds', 825),
    _p('emnist', DP_FEDAVG, None, 'l2_clip', 0.1,
       'with a clipping threshold of $0.1$', 825),
    _p('emnist', DP_REC, None, 'noise_stddev', 0.03,
       r'the $\sigma$ was fixed to $0.03$', 825),
    _p('emnist', DP_FEDAVG, 1, 'noise_multiplier', 5,
       'noise scale of $5$', 825),
    _p('emnist', DP_FEDAVG, 3, 'noise_multiplier', 1.85, '$5$, $1.85$', 825),
    _p('emnist', DP_FEDAVG, 6, 'noise_multiplier', 1.15, 'and $1.15$ for',
       825),
    _p('emnist', DP_REC, 1, 'clip_ratio', 0.77, '$c$ of $0.77$', 825),
    _p('emnist', DP_REC, 3, 'clip_ratio', 1.41, '$0.77$, $1.41$', 825),
    _p('emnist', DP_REC, 6, 'clip_ratio', 1.745, 'and $1.745$', 825),
    _p('emnist', None, None, 'rounds_compression_only', 4000,
       'on our $4$k round FEMNIST task', 885),
    _p('shakespeare', None, None, 'rounds', 200, 'We trained for $200$ rounds',
       827),
    _p('shakespeare', None, None, 'clients_per_round', 66,
       'we sampled $66$ clients', 827),
    _p('shakespeare', DP_FEDAVG, None, 'l2_clip', 0.3,
       'the clipping threshold was $0.3$', 827),
    _p('shakespeare', DP_REC, None, 'noise_stddev', 0.1, r'$\sigma = 0.1$',
       827),
    _p('shakespeare', DP_FEDAVG, 3, 'noise_multiplier', 2.15,
       'noise scale of $2.15$', 827),
    _p('shakespeare', DP_REC, 3, 'clip_ratio', 1.435, '$c$ of $1.435$', 827),
    _p('stackoverflow_lr', None, None, 'clients_per_round', 60,
       'We sampled $60$ clients per round', 829),
    _p('stackoverflow_lr', None, None, 'rounds', 1500,
       'model for $1.5$k rounds', 829),
    _p('stackoverflow_lr', None, None, 'server_momentum', 0.9,
       'a momentum of $0.9$', 829),
    _p('stackoverflow_lr', DP_FEDAVG, None, 'l2_clip', 0.05,
       'the clipping threshold was $0.05$', 829),
    _p('stackoverflow_lr', DP_REC, None, 'noise_stddev', 0.05,
       r'$\sigma=0.05$', 829),
    _p('stackoverflow_lr', DP_FEDAVG, 1, 'noise_multiplier', 0.957,
       'noise scale of $0.957$', 829),
    _p('stackoverflow_lr', DP_REC, 1, 'clip_ratio', 1.227, '$c$ of $1.227$',
       829),
    # Figure 5's caption: delta = 1 / N^1.1.
    _p('*', None, None, 'delta_exponent', 1.1, r'$\delta = 1/N^{1.1}$', 861),
    # Table 4 (compression only, FEMNIST, 4k rounds): accuracy and GB.
    _p('emnist', FEDAVG, None, 'metric', 86.28, '$86.28$', 903),
    _p('emnist', FEDAVG, None, 'total_comm', 690.6, '$690.6$', 903),
    _p('emnist', REC, None, 'metric', 80.69, '$80.69$', 904),
    _p('emnist', REC, None, 'total_comm', 14.2, '$14.2$', 904),
    _p('emnist', REC64, None, 'group_size', 64, 'clipping, $64$)', 905),
    _p('emnist', REC64, None, 'metric', 84.14, '$84.14$', 905),
    _p('emnist', REC64, None, 'total_comm', 332.2, '$332.2$', 905),
)


def in_table1(entry: PaperNumber) -> bool:
  """Whether `entry` is one of Table 1's numbers (accuracy or Comm.)."""
  return entry.quantity in ('metric', 'total_comm') and (
      TABLE1_LINES[0] <= entry.line <= TABLE1_LINES[1])


def paper_number(task: str, method: Optional[str], epsilon: Optional[float],
                 quantity: str) -> Optional[PaperNumber]:
  """The paper's number for a cell, or None (most specific entry first)."""
  for key in ((task, method, epsilon), (task, None, epsilon),
              (task, method, None), (task, None, None), ('*', method, None),
              ('*', None, None)):
    for entry in PAPER:
      if (entry.task, entry.method, entry.epsilon) == key and (
          entry.quantity == quantity):
        return entry
  return None


def paper_value(task, quantity, method=None, epsilon=None) -> float:
  entry = paper_number(task, method, epsilon, quantity)
  if entry is None:
    raise KeyError(f'The paper gives no {quantity} for {task} {method} '
                   f'{epsilon}.')
  return entry.value


def metric_of(task, aggregator, epsilon) -> Optional[float]:
  """The paper's metric for the experiments' `aggregator` on `task` at
  `epsilon`, or None where the paper prints none (or has no such method)."""
  method = METHODS.get(aggregator)
  entry = None if method is None else paper_number(task, method, epsilon,
                                                    'metric')
  return None if entry is None else entry.value


def paper_int(task, quantity, method=None, epsilon=None) -> int:
  return int(paper_value(task, quantity, method, epsilon))


@dataclasses.dataclass
class Cell:
  """One number of ours, beside the paper's (None where it prints none)."""
  task: str
  method: str
  epsilon: Optional[float]
  quantity: str
  paper: Optional[float]
  ours: Optional[float]
  basis: str
  note: str = ''

  @property
  def unit(self) -> str:
    return UNITS[self.quantity]

  def to_dict(self) -> dict:
    return dict(task=self.task, method=self.method, epsilon=self.epsilon,
                quantity=self.quantity, unit=self.unit, paper=self.paper,
                ours=self.ours, basis=self.basis, note=self.note)


def paper_cell(task, method, epsilon, quantity, ours, basis, note='',
               paper=True) -> Cell:
  """A cell whose `paper` is looked up in `PAPER` (never typed in)."""
  value = None
  if paper:
    entry = paper_number(task, method, epsilon, quantity)
    value = None if entry is None else entry.value
  return Cell(task, method, epsilon, quantity, value, ours, basis, note)


@dataclasses.dataclass(frozen=True)
class ReproduceConfig:
  """Everything a reproduction run depends on."""
  output_dir: str
  parts: tuple = DEFAULT_PARTS
  quick: bool = False
  data_dir: str = 'data_cache'
  sampling_seeds: int = 3
  training_seeds: int = 3

  def __post_init__(self):
    parts = tuple(self.parts)
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
      raise ValueError(f'part must be a non-empty subset of {PARTS}, found '
                       f'{",".join(parts)!r}.')
    object.__setattr__(self, 'parts', parts)
    for name in ('sampling_seeds', 'training_seeds'):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'{name} must be a positive int, found {value!r}.')


# ---------------------------------------------------------------------------
# Utility and ablations (opt-in; training).

# The experiments' aggregator names (experiments.studies.utility trains).
AGGREGATORS = {DP_REC: 'dp_rec', DP_FEDAVG: 'dp_fedavg', DDG16: 'ddgauss16',
               DDG12: 'ddgauss12', FEDAVG: 'fedavg', REC: 'rec'}


def part_of(cell) -> str:
  """The reproduction part a cell belongs to."""
  if cell.basis.startswith('ablation'):
    return 'ablations'
  if cell.quantity == 'total_comm':
    return 'communication'
  if cell.quantity == 'metric':
    return 'utility'
  return 'privacy'
