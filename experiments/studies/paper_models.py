"""The paper's models, built in Keras and counted (parameters, groups)."""

import dataclasses
import functools
from typing import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.studies import paper
from tff_dprec import history
from tff_dprec import message
from tff_dprec import rec


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


def lenet5():
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


def shakespeare_lstm():
  layers = tf.keras.layers
  vocab = paper.paper_int('shakespeare', 'vocabulary')
  return _sequential(
      (None,), layers.Embedding(vocab, 8),
      layers.LSTM(256, return_sequences=True),
      layers.LSTM(256, return_sequences=True), layers.Dense(vocab))


def _stackoverflow_lr():
  # TFF's tag-prediction model: one logistic regression per tag.
  task = 'stackoverflow_lr'
  return _sequential(
      (paper.paper_int(task, 'num_words'),),
      tf.keras.layers.Dense(paper.paper_int(task, 'num_tags'),
                            activation='sigmoid'))


# The model of each task: the one whose parameter count reproduces the
# paper's DP-FedAvg communication (see REPRODUCTION.md for the others).
MODELS = {
    'mnist': PaperModel(
        'CNN 5x5x32, 5x5x64 (valid), dense 512, 10', _mnist_cnn,
        'the appendix names LeNet-5, but 43 GiB needs this CNN'),
    'emnist': PaperModel(
        'CNN 3x3x32, pool, 3x3x64, pool, dense 128, 62',
        functools.partial(_emnist_cnn, True),
        "Kairouz et al.'s CNN without dropout, with a 2x2 max-pool after "
        'the second convolution (see "FEMNIST\'s 259 GiB")'),
    'shakespeare': PaperModel(
        'LEAF LSTM: embedding 8, 2 x LSTM 256, dense 80', shakespeare_lstm,
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
    MODELS['emnist'],
    PaperModel("TFF's original FedAvg CNN (experiments' emnist task)",
               _emnist_fedavg_cnn,
               'conv 5x5x32 same, pool, conv 5x5x64 same, pool, dense 512'),
)


def _server_optimizer(task):
  """The paper's server optimizer (Appendix C, lines 823-829), for sizes.

  Adam (MNIST), SGD (FEMNIST, Shakespeare), SGD with momentum (SO-LR); the
  learning rates do not change the state's size.
  """
  build = _SERVER_OPTIMIZERS.get(
      task, lambda _: tff.learning.optimizers.build_sgdm(1.0))
  return build(task)


_SERVER_OPTIMIZERS = {
    'mnist': lambda task: tff.learning.optimizers.build_adam(1.0),
    'stackoverflow_lr': lambda task: tff.learning.optimizers.build_sgdm(
        1.0, momentum=paper.paper_value(task, 'server_momentum')),
}
# The paper's groups of at most G elements, where it states G (SO-LR).
_GROUP_SIZE_TASKS = ('stackoverflow_lr',)


def _grouping(task):
  if task in _GROUP_SIZE_TASKS:
    return int(paper.paper_value(task, 'group_size', paper.DP_REC))
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
  layout = message.MessageLayout.from_value_type(
      tff.types.type_to_tf_tensor_specs(value_type),
      bits=paper.paper_int('*', 'bits', paper.DP_REC),
      grouping=_grouping(task) if grouping is None else grouping)
  return ModelStats(
      num_params=int(keras_model.count_params()),
      tensor_sizes=tuple(int(np.prod(w.shape)) for w in trainable),
      num_groups=layout.num_groups,
      message_bits=layout.message_bits,
      full_state_bits=history.structure_bits((weights, state)))
