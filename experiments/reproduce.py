"""Reproduces the DP-REC paper's Table 1 side by side with our numbers.

  python -m experiments.reproduce --output_dir=D \
      [--part=privacy,communication,utility,ablations] [--quick]

writes D/reproduce.json, a list of cells `{task, method, epsilon, quantity,
unit, paper, ours, basis, note}` (quantity: epsilon, clip_ratio,
noise_multiplier, total_comm or metric; `basis` says how `ours` was obtained,
`paper` is null where the paper prints no number), and D/REPRODUCTION.md: the
paper's Table 1 with our number beside each paper number and why they differ,
then the details of each part.

Parts (the default is all four):
* privacy: for every DP-REC and DP-FedAvg setting of the paper's Appendix C,
  epsilon at the paper's c (DP-REC) or z (DP-FedAvg) under the paper's
  accounting (Theorem 1 with total_bits = M b; the classic RDP conversion)
  and under the library's default (sound, b bits in each of M groups;
  dp_accounting's conversion), and the c or z calibrated to the paper's
  epsilon under both. DDGauss: the noise multiplier our accountant calibrates
  at Kairouz et al.'s settings; their own noise is not published.
* communication: the paper's N, B, T and the parameter counts of Keras builds
  of the paper's models. DP-FedAvg and DDGauss are sums over rounds. DP-REC
  draws B clients with replacement per round and runs every downlink through
  `tff_dprec.history.HistoryServer` with placeholder message matrices (it
  counts rows only); the same draws then go through `size_only_traffic`,
  equal to HistoryServer for the library's protocol, to show each protocol
  choice as its own column.
* utility and ablations train (`experiments.reproduce_training`), on the
  data available here (digits for MNIST, the embedded StackOverflow data;
  the real tasks when their files are in --data_dir) with the experiments'
  per-run budget, not the paper's rounds.

--quick gives a version for the tests (about 2 minutes): privacy for MNIST
without calibration, communication at full scale with one sampling seed, and
toy training runs on tiny embedded data.

Every number attributed to the paper comes from `PAPER`, one entry per
number with the line of shared/paper/dp-rec.tex it is printed on
(tests/reproduce_test.py checks each against the .tex).
"""

import argparse
import dataclasses
import functools
import json
import math
import os
import time
from typing import Callable, Optional, Sequence
import warnings

import numpy as np
from scipy import special
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import accounting
from tff_dprec import history
from tff_dprec import rec
from tff_dprec.aggregators import dp_rec

PARTS = ('privacy', 'communication', 'utility', 'ablations')
DEFAULT_PARTS = PARTS
TASKS = ('mnist', 'femnist', 'shakespeare', 'stackoverflow_lr')
QUANTITIES = ('epsilon', 'clip_ratio', 'noise_multiplier', 'total_comm',
              'metric')
UNITS = {'epsilon': 'epsilon', 'clip_ratio': 'c = clip / sigma',
         'noise_multiplier': 'z = noise stddev / clip', 'total_comm': 'GiB',
         'metric': '%'}
# The paper's "GB" are GiB: 2 T B d 32 bits reproduces its DP-FedAvg
# column only with 2^30-byte units.
GIB_BITS = 8 * 2**30
FLOAT_BITS = 32  # A float32 parameter on the wire.
PAPER_TEX = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared', 'paper',
    'dp-rec.tex'))

DP_REC, DP_FEDAVG, DDG16, DDG12 = 'DP-REC', 'DP-FedAvg', 'DDG16', 'DDG12'
FEDAVG, REC, REC64 = 'FedAvg', 'REC', 'REC-64'


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
# Every paper number used here, with its line in shared/paper/dp-rec.tex.
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
    _p('femnist', None, 1, 'epsilon', 1, r'Acc. ($\varepsilon\!=\!1$)', 313),
    _p('femnist', DP_FEDAVG, 1, 'metric', 66.0, '$66.0', 313),
    _p('femnist', DP_REC, 1, 'metric', 59.7, '$59.7', 313),
    _p('femnist', None, 3, 'epsilon', 3, r'Acc. ($\varepsilon\!=\!3$)', 314),
    _p('femnist', DP_FEDAVG, 3, 'metric', 74.6, '$74.6', 314),
    _p('femnist', DDG16, 3, 'metric', 72, '^\\sim}72$', 314),
    _p('femnist', DDG12, 3, 'metric', 25, '^\\sim}25$', 314),
    _p('femnist', DP_REC, 3, 'metric', 67.1, '$67.1', 314),
    _p('femnist', None, 6, 'epsilon', 6, r'Acc. ($\varepsilon\!=\!6$)', 315),
    _p('femnist', DP_FEDAVG, 6, 'metric', 75.6, '$75.6', 315),
    _p('femnist', DDG16, 6, 'metric', 77, '^\\sim}77$', 315),
    _p('femnist', DDG12, 6, 'metric', 71, '^\\sim}71$', 315),
    _p('femnist', DP_REC, 6, 'metric', 69.2, '$69.2', 315),
    _p('femnist', DP_FEDAVG, None, 'total_comm', 259, r'\emph{259}', 316),
    _p('femnist', DDG16, None, 'total_comm', 194, r'\emph{194}', 316),
    _p('femnist', DDG12, None, 'total_comm', 178, r'\emph{178}', 316),
    _p('femnist', DP_REC, None, 'total_comm', 14.2, r'\emph{14.2}', 316),
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
    _p('femnist', 'DDGauss', None, 'population', 3400,
       'FEMNIST dataset ($3.4k$', 297),
    # Section 4.1: the compression ratios quoted in the text.
    _p('mnist', DP_REC, None, 'comm_ratio', 4300, '$4300$x compression',
       369),
    _p('stackoverflow_lr', DP_REC, None, 'comm_ratio', 105,
       '$105$x for SO-LR', 369),
    _p('femnist', DP_REC, None, 'comm_ratio', 18, '$18$x on FEMNIST', 369),
    # Appendix C, datasets (Shakespeare's alphabet) and Table 2 (clients).
    _p('shakespeare', None, None, 'vocabulary', 80,
       'library of $80$ characters', 796),
    _p('stackoverflow_lr', None, None, 'num_tags', 500, 'one of $500$ tags',
       799),
    _p('stackoverflow_lr', None, None, 'num_words', 10000,
       'the $10,000$ most frequent words', 799),
    _p('mnist', None, None, 'population', 100, 'MNIST&  100', 809),
    _p('femnist', None, None, 'population', 3500, 'FEMNIST & 3500', 810),
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
    _p('femnist', None, None, 'clients_per_round', 100,
       'we sampled $100$ clients', 825),
    _p('femnist', DP_FEDAVG, None, 'rounds', 1500,
       'we trained for $1.5$k rounds', 825),
    _p('femnist', DP_REC, None, 'rounds', 4000, 'train for $4$k rounds', 825),
    _p('femnist', DP_FEDAVG, None, 'l2_clip', 0.1,
       'with a clipping threshold of $0.1$', 825),
    _p('femnist', DP_REC, None, 'noise_stddev', 0.03,
       r'the $\sigma$ was fixed to $0.03$', 825),
    _p('femnist', DP_FEDAVG, 1, 'noise_multiplier', 5,
       'noise scale of $5$', 825),
    _p('femnist', DP_FEDAVG, 3, 'noise_multiplier', 1.85, '$5$, $1.85$', 825),
    _p('femnist', DP_FEDAVG, 6, 'noise_multiplier', 1.15, 'and $1.15$ for',
       825),
    _p('femnist', DP_REC, 1, 'clip_ratio', 0.77, '$c$ of $0.77$', 825),
    _p('femnist', DP_REC, 3, 'clip_ratio', 1.41, '$0.77$, $1.41$', 825),
    _p('femnist', DP_REC, 6, 'clip_ratio', 1.745, 'and $1.745$', 825),
    _p('femnist', None, None, 'rounds_compression_only', 4000,
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
    _p('femnist', FEDAVG, None, 'metric', 86.28, '$86.28$', 903),
    _p('femnist', FEDAVG, None, 'total_comm', 690.6, '$690.6$', 903),
    _p('femnist', REC, None, 'metric', 80.69, '$80.69$', 904),
    _p('femnist', REC, None, 'total_comm', 14.2, '$14.2$', 904),
    _p('femnist', REC64, None, 'group_size', 64, 'clipping, $64$)', 905),
    _p('femnist', REC64, None, 'metric', 84.14, '$84.14$', 905),
    _p('femnist', REC64, None, 'total_comm', 332.2, '$332.2$', 905),
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


def _paper_int(task, quantity, method=None, epsilon=None) -> int:
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
# The paper's models, built in Keras and counted.


@dataclasses.dataclass(frozen=True)
class PaperModel:
  """A Keras build of a model of the paper, and why this one."""
  name: str
  build: Callable[[], tf.keras.Model]
  description: str


@dataclasses.dataclass(frozen=True)
class ModelStats:
  """What communication needs from a model and the server's optimizer."""
  num_params: int
  tensor_sizes: tuple
  num_groups: int  # DP-REC groups under the paper's grouping
  message_bits: int  # DP-REC's message: seed and num_groups indices
  full_state_bits: int  # model + server optimizer state (HistoryServer)


def _sequential(input_shape, *layers):
  return tf.keras.Sequential([tf.keras.Input(input_shape), *layers])


def _mnist_cnn():
  layers = tf.keras.layers
  return _sequential(
      (28, 28, 1), layers.Conv2D(32, 5, activation='relu'),
      layers.MaxPooling2D(2), layers.Conv2D(64, 5, activation='relu'),
      layers.MaxPooling2D(2), layers.Flatten(),
      layers.Dense(512, activation='relu'), layers.Dense(10))


def _lenet5():
  layers = tf.keras.layers
  return _sequential(
      (28, 28, 1), layers.Conv2D(6, 5, padding='same', activation='relu'),
      layers.MaxPooling2D(2), layers.Conv2D(16, 5, activation='relu'),
      layers.MaxPooling2D(2), layers.Flatten(),
      layers.Dense(120, activation='relu'),
      layers.Dense(84, activation='relu'), layers.Dense(10))


def _emnist_cnn(pool_after_second_conv: bool):
  layers = tf.keras.layers
  pool = [layers.MaxPooling2D(2)] if pool_after_second_conv else []
  return _sequential(
      (28, 28, 1), layers.Conv2D(32, 3, activation='relu'),
      layers.MaxPooling2D(2), layers.Conv2D(64, 3, activation='relu'),
      *pool, layers.Flatten(), layers.Dense(128, activation='relu'),
      layers.Dense(62))


def _emnist_fedavg_cnn():
  layers = tf.keras.layers
  return _sequential(
      (28, 28, 1), layers.Conv2D(32, 5, padding='same', activation='relu'),
      layers.MaxPooling2D(2),
      layers.Conv2D(64, 5, padding='same', activation='relu'),
      layers.MaxPooling2D(2), layers.Flatten(),
      layers.Dense(512, activation='relu'), layers.Dense(62))


def _shakespeare_lstm():
  layers = tf.keras.layers
  vocab = _paper_int('shakespeare', 'vocabulary')
  return _sequential(
      (None,), layers.Embedding(vocab, 8),
      layers.LSTM(256, return_sequences=True),
      layers.LSTM(256, return_sequences=True), layers.Dense(vocab))


def _stackoverflow_lr():
  # TFF's tag-prediction model: one logistic regression per tag.
  task = 'stackoverflow_lr'
  return _sequential(
      (_paper_int(task, 'num_words'),),
      tf.keras.layers.Dense(_paper_int(task, 'num_tags'),
                            activation='sigmoid'))


# The model of each task: the one whose parameter count reproduces the
# paper's DP-FedAvg communication (see REPRODUCTION.md for the others).
MODELS = {
    'mnist': PaperModel(
        'CNN 5x5x32, 5x5x64 (valid), dense 512, 10', _mnist_cnn,
        'the appendix names LeNet-5, but 43 GiB needs this CNN'),
    'femnist': PaperModel(
        'CNN 3x3x32, pool, 3x3x64, pool, dense 128, 62',
        functools.partial(_emnist_cnn, True),
        "Kairouz et al.'s CNN without dropout, with a 2x2 max-pool after "
        'the second convolution (see "FEMNIST\'s 259 GiB")'),
    'shakespeare': PaperModel(
        'LEAF LSTM: embedding 8, 2 x LSTM 256, dense 80', _shakespeare_lstm,
        "LEAF's and TFF's character LSTM"),
    'stackoverflow_lr': PaperModel(
        'logistic regression 10,000 words x 500 tags', _stackoverflow_lr,
        "TFF's tag-prediction model"),
}
# Candidates for FEMNIST's model, for the investigation of its 259 GiB.
FEMNIST_CANDIDATES = (
    PaperModel("Kairouz et al.'s CNN without dropout (the appendix's words)",
               functools.partial(_emnist_cnn, False),
               'conv 3x3x32, pool, conv 3x3x64, dense 128, 62'),
    MODELS['femnist'],
    PaperModel("TFF's original FedAvg CNN (experiments' emnist task)",
               _emnist_fedavg_cnn,
               'conv 5x5x32 same, pool, conv 5x5x64 same, pool, dense 512'),
)


def _server_optimizer(task):
  """The paper's server optimizer (Appendix C, lines 823-829), for sizes.

  Adam (MNIST), SGD (FEMNIST, Shakespeare), SGD with momentum (SO-LR); the
  learning rates do not change the state's size.
  """
  if task == 'mnist':
    return tff.learning.optimizers.build_adam(1.0)
  if task == 'stackoverflow_lr':
    return tff.learning.optimizers.build_sgdm(
        1.0, momentum=paper_value(task, 'server_momentum'))
  return tff.learning.optimizers.build_sgdm(1.0)


def _grouping(task):
  if task == 'stackoverflow_lr':
    return int(paper_value(task, 'group_size', DP_REC))
  return rec.GROUPING_TENSOR


@functools.lru_cache(maxsize=None)
def keras_params(model: PaperModel) -> tuple:
  """(number of parameters, trainable tensor sizes) of a Keras build."""
  keras_model = model.build()
  sizes = tuple(int(np.prod(w.shape)) for w in keras_model.trainable_weights)
  return int(keras_model.count_params()), sizes


@functools.lru_cache(maxsize=None)
def model_stats(task: str, grouping=None) -> ModelStats:
  """Counts the paper's model of `task`, its groups and its full state.

  The full state is what `HistoryServer` sends instead of a longer history:
  the model's weights and the server optimizer's state as TFF initializes it
  (the experiments' `structure_bits((model weights, state.finalizer))`).
  """
  keras_model = MODELS[task].build()
  weights = keras_model.get_weights()
  trainable = keras_model.trainable_weights
  specs = tuple(tf.TensorSpec(w.shape, w.dtype) for w in trainable)
  optimizer = _server_optimizer(task)
  # TF types, as in TFF's state (float32 hyperparameters, not float64).
  state = tf.nest.map_structure(tf.convert_to_tensor,
                                optimizer.initialize(specs))
  # The library's own message size for this model (sizes only: no clip).
  value_type = tff.to_type(
      [tff.TensorType(np.float32, list(w.shape)) for w in trainable])
  factory = dp_rec.DPRecSumFactory(
      noise_stddev=paper_value(task, 'noise_stddev', DP_REC), l2_clip=None,
      bits=_paper_int('*', 'bits', DP_REC),
      grouping=_grouping(task) if grouping is None else grouping)
  return ModelStats(
      num_params=int(keras_model.count_params()),
      tensor_sizes=tuple(int(np.prod(w.shape)) for w in trainable),
      num_groups=factory.num_groups(value_type),
      message_bits=factory.message_bits(value_type),
      full_state_bits=history.structure_bits((weights, state)))


# ---------------------------------------------------------------------------
# Communication.


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
    return self.total_bits / GIB_BITS


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
  """The library's sizes; `message_bits` from `DPRecSumFactory`."""
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
  model = FLOAT_BITS * num_params
  return fixed_traffic(rounds=rounds, clients_per_round=clients_per_round,
                       upload_bits=model, download_bits=model)


def ddgauss_traffic(*, rounds, clients_per_round, num_params, bits,
                    upload_dim) -> Traffic:
  """DDGauss: the model down, `bits` per coordinate of `upload_dim` up."""
  return fixed_traffic(rounds=rounds, clients_per_round=clients_per_round,
                       upload_bits=bits * upload_dim,
                       download_bits=FLOAT_BITS * num_params)


def ddgauss_padded_dim(dimension: int, rotation_type: str) -> int:
  """TFF's padded dimension ('hd': power of 2, 'dft': even)."""
  # The padding depends on the dimension and the rotation only; the other
  # arguments are nominal.
  return accounting.ddgauss_params(
      noise_multiplier=1.0, l2_clip=1.0, bits=16, clients_per_round=1,
      dimension=dimension, rotation_type=rotation_type).padded_dim


def _federation(task, method):
  return dict(population=_paper_int(task, 'population'),
              clients_per_round=_paper_int(task, 'clients_per_round'),
              rounds=_paper_int(task, 'rounds', method))


def _comm_note(task, method, ours):
  """Rounding verdict: is `ours` within the paper's printed precision?"""
  entry = paper_number(task, method, None, 'total_comm')
  if entry is None or ours is None:
    return ''
  text = entry.tex.replace(r'\emph{', '').replace('}', '').strip('$')
  decimals = len(text.split('.')[1]) if '.' in text else 0
  if abs(ours - entry.value) <= 0.5 * 10**-decimals:
    return f'rounds to the paper\'s {text}. '
  return ''


def _baseline_comm_cells(task) -> list:
  """DP-FedAvg, and DDGauss where the paper has it, at the paper's scale."""
  fed = _federation(task, DP_FEDAVG)
  d = model_stats(task).num_params
  fedavg = dp_fedavg_traffic(rounds=fed['rounds'],
                             clients_per_round=fed['clients_per_round'],
                             num_params=d)
  cells = [paper_cell(task, DP_FEDAVG, None, 'total_comm', fedavg.gib,
                      'T B (32 d down + 32 d up)',
                      _comm_note(task, DP_FEDAVG, fedavg.gib) +
                      _fedavg_why(task, fedavg.gib))]
  for method in (DDG16, DDG12):
    if paper_number(task, method, None, 'total_comm') is None:
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
      cells.append(paper_cell(task, method, None, 'total_comm', traffic.gib,
                              basis, note))
  return cells


def _fedavg_why(task, ours):
  """Why DP-FedAvg's communication may differ, from the models we built."""
  if task == 'mnist':
    lenet, _ = keras_params(PaperModel('LeNet-5', _lenet5, ''))
    fed = _federation(task, DP_FEDAVG)
    other = dp_fedavg_traffic(rounds=fed['rounds'],
                              clients_per_round=fed['clients_per_round'],
                              num_params=lenet).gib
    return (f'The appendix names LeNet-5 ({lenet:,} parameters: '
            f'{other:.3g} GiB); 43 needs the {MODELS[task].name}.')
  if task == 'shakespeare':
    keras_model = _shakespeare_lstm()
    extra = sum(4 * layer.units for layer in keras_model.layers
                if isinstance(layer, tf.keras.layers.LSTM))
    d = model_stats(task).num_params
    fed = _federation(task, DP_FEDAVG)
    torch = dp_fedavg_traffic(rounds=fed['rounds'],
                              clients_per_round=fed['clients_per_round'],
                              num_params=d + extra).gib
    return (f"Keras's LSTM has one bias per gate; PyTorch's nn.LSTM (the "
            f"paper's framework) has two, {extra:,} more parameters: "
            f'{d + extra:,} give {torch:.2f} GiB.')
  if task == 'stackoverflow_lr':
    rounds = _paper_int(task, 'rounds')
    return (f'{ours / paper_value(task, "total_comm", DP_FEDAVG) - 1:+.2%}:'
            ' not explained by the model (10,000 x 500 + 500) or by GB vs '
            f'GiB; T + 1 = {rounds + 1} rounds would give '
            f'{ours * (rounds + 1) / rounds:.1f}.')
  if task == 'femnist':
    return 'See "FEMNIST\'s 259 GiB" for the model.'
  return ''


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
  fed = _federation(task, DP_REC)
  if rounds is not None:
    fed['rounds'] = rounds
  stats = model_stats(task, grouping)
  index_bits = _paper_int('*', 'bits', DP_REC) * stats.num_groups
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


def _dp_rec_comm_cells(run: DpRecRun, method: str = DP_REC) -> list:
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
    cells.append(paper_cell(run.task, method, None, 'total_comm', ours, basis,
                            note))
  return cells


def communication_cells(config: ReproduceConfig, log) -> tuple:
  """All communication cells, and the DP-REC runs (for REPRODUCTION.md)."""
  seeds = 1 if config.quick else config.sampling_seeds
  cells, runs = [], {}
  for task in TASKS:
    cells.extend(_baseline_comm_cells(task))
    runs[task] = simulate_dp_rec(task, seeds)
    cells.extend(_dp_rec_comm_cells(runs[task]))
    log(f'communication {task}: DP-REC {runs[task].library.gib:.4g} GiB '
        f'(seed 0), {runs[task].history_server_seconds / seeds:.2f} s per '
        'seed through HistoryServer')
  cells.extend(_compression_only_cells(seeds, runs['femnist']))
  return cells, runs


def _compression_only_cells(seeds, dp_rec_run) -> list:
  """Table 4 of the paper (FEMNIST, 4k rounds, no DP): FedAvg, REC, REC-64."""
  task = 'femnist'
  rounds = _paper_int(task, 'rounds_compression_only')
  fed = _federation(task, DP_REC)
  fedavg = dp_fedavg_traffic(rounds=rounds,
                             clients_per_round=fed['clients_per_round'],
                             num_params=model_stats(task).num_params)
  cells = [paper_cell(task, FEDAVG, None, 'total_comm', fedavg.gib,
                      'T B (32 d down + 32 d up)',
                      _comm_note(task, FEDAVG, fedavg.gib) +
                      'Independent check of the FEMNIST model (4k rounds).')]
  same = _dp_rec_comm_cells(dp_rec_run, REC)[0]
  same.note = 'Same protocol and message sizes as DP-REC. ' + same.note
  cells.append(same)
  group = _paper_int(task, 'group_size', REC64)
  rec64 = simulate_dp_rec(task, seeds, grouping=group, rounds=rounds)
  cell = _dp_rec_comm_cells(rec64, REC64)[0]
  stats = model_stats(task, group)
  cell.note = (f'{stats.num_groups:,} groups of at most {group} per tensor '
               f'(7 bits each). ' + cell.note)
  cells.append(cell)
  return cells


# ---------------------------------------------------------------------------
# Privacy.


def _delta(population):
  return population**-paper_value('*', 'delta_exponent')


def _attempt(fn):
  """(value, '') or (None, why) for the accountant's domain failures."""
  try:
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', accounting.UnprovenPaperBound)
      return fn(), ''
  except accounting.OverheadExceedsDeltaError as e:
    return None, f'unreachable: {e}'
  except accounting.TargetUnreachableError as e:
    return None, f'unreachable: {e}'


def _rows(method, quantity, tasks):
  for entry in PAPER:
    if (entry.method, entry.quantity) == (method, quantity) and (
        entry.task in tasks):
      yield entry.task, entry.epsilon, entry.value


def dp_rec_privacy_cells(task, epsilon, c, calibrate) -> list:
  """Epsilon at the paper's c, and c at the paper's epsilon, both ways."""
  fed = _federation(task, DP_REC)
  common = dict(fed, delta=_delta(fed['population']))
  bits = _paper_int('*', 'bits', DP_REC)
  groups = model_stats(task).num_groups
  modes = (
      ('paper accounting (Theorem 1, total_bits = M b)',
       dict(total_bits=bits * groups, accounting='paper'),
       f'M = {groups} groups x {bits} bits as one index of {bits * groups} '
       'bits; for M > 1 this rests on an unproven step (docs/PRIVACY.md '
       's. 6). '),
      ('RDP accounting (sound, docs/PRIVACY.md s. 2-3)',
       dict(bits=bits, num_groups=groups, accounting='rdp'),
       f'{groups} groups x {bits} bits; what it bounds and assumes: '
       'docs/PRIVACY.md. '),
      ('PLD accounting (library default, docs/PRIVACY.md s. 9)',
       dict(bits=bits, num_groups=groups, accounting='pld'),
       f'{groups} groups x {bits} bits; the smaller of the PLD and RDP '
       'epsilons. '))
  cells = []
  for basis, kwargs, why in modes:
    eps, error = _attempt(lambda kw=kwargs: accounting.dp_rec_epsilon(
        clip_ratio=c, **kw, **common))
    cells.append(paper_cell(task, DP_REC, epsilon, 'epsilon', eps,
                            f'{basis} at the paper\'s c', why + error))
    if calibrate:
      cal, error = _attempt(lambda kw=kwargs: accounting.calibrate_clip_ratio(
          target_epsilon=epsilon, tol=1e-4, **kw, **common))
      cells.append(paper_cell(task, DP_REC, epsilon, 'clip_ratio', cal,
                              f'{basis}, calibrated to the paper\'s epsilon',
                              why + error))
  return cells


def dp_fedavg_privacy_cells(task, epsilon, z, calibrate) -> list:
  fed = _federation(task, DP_FEDAVG)
  common = dict(fed, delta=_delta(fed['population']))
  modes = (('paper accounting (classic RDP conversion)',
            dict(conversion='classic', accounting='rdp')),
           ("RDP (dp_accounting's conversion)",
            dict(conversion='tight', accounting='rdp')),
           ("PLD (library default, dp_accounting's pessimistic PLD)",
            dict(accounting='pld')))
  cells = []
  for basis, options in modes:
    eps = accounting.dp_fedavg_epsilon(noise_multiplier=z, **options,
                                       **common)
    cells.append(paper_cell(task, DP_FEDAVG, epsilon, 'epsilon', eps,
                            f'{basis} at the paper\'s z',
                            'Poisson-subsampled Gaussian, q = B/N; the paper '
                            'does not state its RDP orders.'))
    if calibrate:
      cal = accounting.calibrate_dp_fedavg_noise(
          target_epsilon=epsilon, tol=1e-4, **options, **common)
      cells.append(paper_cell(task, DP_FEDAVG, epsilon, 'noise_multiplier', cal,
                              f'{basis}, calibrated to the paper\'s epsilon'))
  return cells


# Kairouz, Liu, Steinke (ICML 2021) as their published code sets DDGauss up
# (google-research/federated, distributed_dp): delta = 1/N, conditional
# rounding beta = exp(-0.5), k = 4 standard deviations for modular clipping,
# the randomized Hadamard rotation (padding to a power of 2), and their EMNIST
# CNN. Not published: the noise of each run (their code derives it from
# epsilon) and the clip; we use the DP-REC paper's DP-FedAvg clip.
DDGAUSS_BETA = math.exp(-0.5)
DDGAUSS_K_STDDEVS = 4.0
DDGAUSS_MODELS = {'femnist': FEMNIST_CANDIDATES[0],
                  'stackoverflow_lr': MODELS['stackoverflow_lr']}


def ddgauss_privacy_cells(task, epsilon, bits) -> list:
  """Our noise multiplier for DDGauss at Kairouz et al.'s settings."""
  method = f'DDG{bits}'
  population = (_paper_int(task, 'population', 'DDGauss')
                if task == 'femnist' else _paper_int(task, 'population'))
  dimension, _ = keras_params(DDGAUSS_MODELS[task])
  settings = dict(
      l2_clip=paper_value(task, 'l2_clip', DP_FEDAVG), bits=bits,
      clients_per_round=_paper_int(task, 'clients_per_round'),
      population=population, rounds=_paper_int(task, 'rounds', DP_FEDAVG),
      delta=1.0 / population, dimension=dimension, beta=DDGAUSS_BETA,
      modclip_prob=float(special.erfc(DDGAUSS_K_STDDEVS / math.sqrt(2))),
      rotation_type='hd')
  z, error = _attempt(lambda: accounting.calibrate_ddgauss_noise(
      target_epsilon=epsilon, **settings))
  where = (f'N = {population:,}, n = {settings["clients_per_round"]}, '
           f'T = {settings["rounds"]}, delta = 1/N, d = {dimension:,} '
           f"(Hadamard-padded), beta = e^-0.5, k = 4, clip "
           f'{settings["l2_clip"]}. ')
  eps_note = ('Not known: Kairouz et al. publish no noise multiplier (their '
              'code derives it from epsilon), so our epsilon at their noise '
              'cannot be given. ')
  if z is None:
    error += (" With TFF's scale heuristic, which our accountant mirrors, "
              'the rounding-inflated sensitivity grows with the noise at '
              'this bit width (Kairouz et al. choose the scale by their own '
              'search).')
  if z is not None:
    eps_note += f'Our calibrated z = {z:.4g} meets it under our accountant.'
  return [
      paper_cell(task, method, epsilon, 'epsilon', None,
                 "our accountant at Kairouz et al.'s noise", eps_note + error),
      paper_cell(task, method, epsilon, 'noise_multiplier', z,
                 "ours, calibrated at Kairouz et al.'s settings",
                 where + error),
  ]


def privacy_cells(config: ReproduceConfig, log) -> list:
  """--quick: MNIST only, no calibration, no DDGauss."""
  tasks = ('mnist',) if config.quick else TASKS
  calibrate = not config.quick
  cells = []
  for task, epsilon, c in _rows(DP_REC, 'clip_ratio', tasks):
    cells.extend(dp_rec_privacy_cells(task, epsilon, c, calibrate))
    log(f'privacy {task} DP-REC epsilon={epsilon:g}')
  for task, epsilon, z in _rows(DP_FEDAVG, 'noise_multiplier', tasks):
    cells.extend(dp_fedavg_privacy_cells(task, epsilon, z, calibrate))
    log(f'privacy {task} DP-FedAvg epsilon={epsilon:g}')
  if not config.quick:
    for method in (DDG16, DDG12):
      for task, epsilon, _ in _rows(method, 'metric', tasks):
        cells.extend(ddgauss_privacy_cells(task, epsilon, int(method[3:])))
        log(f'privacy {task} {method} epsilon={epsilon:g}')
  return cells


# ---------------------------------------------------------------------------
# Utility and ablations (opt-in; training).

# The experiments' aggregator names (experiments.reproduce_training trains).
AGGREGATORS = {DP_REC: 'dp_rec', DP_FEDAVG: 'dp_fedavg', DDG16: 'ddgauss16',
               DDG12: 'ddgauss12', FEDAVG: 'fedavg', REC: 'rec'}


# ---------------------------------------------------------------------------
# Output.


def write_json(path: str, cells: Sequence[Cell]) -> None:
  with open(path + '.tmp', 'w') as f:
    json.dump([c.to_dict() for c in cells], f, indent=1)
  os.replace(path + '.tmp', path)


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
           f'{TABLE1_LINES[0]}-{TABLE1_LINES[1]} of dp-rec.tex), our primary '
           'number beside it, and why they differ. '
           'Comm. is in GiB (the paper\'s "GB"); accuracy in %.', '',
           '| task | method | row | paper | ours | ours / paper | why |',
           '|---|---|---|---|---|---|---|']
  for entry in PAPER:
    if not in_table1(entry):
      continue
    # The first cell with a number (a task without data has none).
    match = sorted((c for c in cells
                    if (c.task, c.method, c.epsilon, c.quantity) ==
                    (entry.task, entry.method, entry.epsilon, entry.quantity)
                    and _part_of(c) != 'ablations'),
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
  for task in TASKS:
    s = model_stats(task)
    lines.append(f'| {task} | {MODELS[task].name} | {s.num_params:,} | '
                 f'{len(s.tensor_sizes)} | {s.num_groups} | '
                 f'{s.message_bits} | '
                 f'{s.full_state_bits:,} | {MODELS[task].description} |')
  return lines + ['']


def _femnist_markdown() -> list:
  """Which parameter count reproduces FEMNIST's 259 GiB (and 690.6)."""
  task = 'femnist'
  fed = _federation(task, DP_FEDAVG)
  client_rounds = fed['rounds'] * fed['clients_per_round']
  rounds_4k = _paper_int(task, 'rounds_compression_only')
  bits_per_param = 2 * FLOAT_BITS * client_rounds / GIB_BITS
  bits_per_param_4k = (2 * FLOAT_BITS * rounds_4k * fed['clients_per_round']
                       / GIB_BITS)
  dp_fedavg = paper_value(task, 'total_comm', DP_FEDAVG)
  fedavg_4k = paper_value(task, 'total_comm', FEDAVG)
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
  for model in FEMNIST_CANDIDATES:
    d, _ = keras_params(model)
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
    fed = _federation(task, DP_REC)
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
  for task in TASKS:
    entry = paper_number(task, DP_REC, None, 'comm_ratio')
    fedavg = [c for c in cells if (c.task, c.method, c.quantity) ==
              (task, DP_FEDAVG, 'total_comm')]
    ours = [c for c in cells if (c.task, c.method, c.quantity) ==
            (task, DP_REC, 'total_comm')]
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
  from experiments import reproduce_training  # pylint: disable=g-import-not-at-top
  by_part = {p: [c for c in cells if _part_of(c) == p] for p in PARTS}
  lines = ['# Reproducing DP-REC\'s Table 1', '',
           f'`python -m experiments.reproduce --output_dir={config.output_dir}'
           f' --part={",".join(config.parts)}'
           f'{" --quick" if config.quick else ""}`; wall time '
           + ', '.join(f'{p} {s:.1f} s' for p, s in seconds.items()) + '.',
           '', 'Paper numbers come from `experiments.reproduce.PAPER` (each '
           'with its line in shared/paper/dp-rec.tex). The paper\'s "GB" are '
           'GiB. delta = N^-1.1 (Figure 5) except for DDGauss (1/N, as '
           'Kairouz et al.).', '']
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
    lines += _models_markdown() + _femnist_markdown()
    lines += _dp_rec_runs_markdown(runs) + _ratios_markdown(cells)
    lines += _cells_markdown(
        'Communication', ['At the paper\'s N, B and T (GiB).'],
        by_part['communication'])
  intros = {
      'utility': ['**Not the paper\'s datasets, nor its rounds**: digits '
                  'stands in for MNIST and the embedded StackOverflow data '
                  'for TFF\'s; each run has the experiments\' budget '
                  '(`experiments.tasks` defaults), not the paper\'s 1000 to '
                  '4000 rounds. DP-REC uses the library\'s default (PLD) '
                  'accounting. `ours` is the mean over seeds; the note '
                  'gives the standard error and each seed.'],
      'ablations': ['On the embedded StackOverflow data (the paper used '
                    'FEMNIST), with the experiments\' budget per run.'] +
                   [''] + reproduce_training.markdown(ablations)}
  for part in ('utility', 'ablations'):
    if part in config.parts:
      lines += _cells_markdown(part.capitalize(), intros[part],
                               by_part[part])
    else:
      lines += [f'## {part.capitalize()}', '',
                f'Not run: `--part={part}` trains.', '']
  return '\n'.join(lines)


def _part_of(cell) -> str:
  if cell.basis.startswith('ablation'):
    return 'ablations'
  if cell.quantity == 'total_comm':
    return 'communication'
  if cell.quantity == 'metric':
    return 'utility'
  return 'privacy'


def reproduce(config: ReproduceConfig, log=print) -> list:
  """Runs the selected parts; writes reproduce.json and REPRODUCTION.md."""
  from experiments import reproduce_training  # pylint: disable=g-import-not-at-top
  os.makedirs(config.output_dir, exist_ok=True)
  cells, runs, seconds, ablations = [], {}, {}, None
  for part in PARTS:
    if part not in config.parts:
      continue
    start = time.time()
    if part == 'privacy':
      part_cells = privacy_cells(config, log)
    elif part == 'communication':
      part_cells, runs = communication_cells(config, log)
    elif part == 'utility':
      part_cells = reproduce_training.utility_cells(config, log)
    else:
      part_cells, ablations = reproduce_training.ablation_cells(config, log)
      reproduce_training.write_json(config.output_dir, ablations)
      reproduce_training.write_plots(config.output_dir, ablations)
    cells.extend(part_cells)
    seconds[part] = time.time() - start
    # What is done so far is written after every part.
    _write(config, cells, runs, seconds, ablations)
  return cells


def _write(config, cells, runs, seconds, ablations):
  write_json(os.path.join(config.output_dir, 'reproduce.json'), cells)
  path = os.path.join(config.output_dir, 'REPRODUCTION.md')
  with open(path + '.tmp', 'w') as f:
    f.write(render_markdown(config, cells, runs, seconds, ablations))
  os.replace(path + '.tmp', path)


def main(argv=None):
  parser = argparse.ArgumentParser(prog='python -m experiments.reproduce',
                                   description=__doc__.splitlines()[0])
  parser.add_argument('--output_dir', required=True)
  parser.add_argument('--part', default=','.join(DEFAULT_PARTS),
                      help=f'comma-separated subset of {",".join(PARTS)}')
  parser.add_argument('--quick', action='store_true',
                      help='a version for the tests (about 2 minutes: toy '
                      'training)')
  parser.add_argument('--data_dir', default='data_cache',
                      help='data for --part=utility,ablations')
  parser.add_argument('--sampling_seeds', type=int, default=3)
  parser.add_argument('--training_seeds', type=int, default=3)
  args = parser.parse_args(argv)
  try:
    config = ReproduceConfig(
        output_dir=args.output_dir,
        parts=tuple(p for p in args.part.split(',') if p), quick=args.quick,
        data_dir=args.data_dir, sampling_seeds=args.sampling_seeds,
        training_seeds=args.training_seeds)
  except ValueError as e:
    parser.error(str(e))
  start = time.time()
  reproduce(config, log=lambda text: print(text, flush=True))
  print(f'Wrote {config.output_dir}/reproduce.json and REPRODUCTION.md in '
        f'{time.time() - start:.1f} s.')


if __name__ == '__main__':
  main()
