"""Federated tasks for the experiments, built on `tff.simulation.baselines`."""

import collections
import dataclasses
import functools
import os
from typing import Any, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
# `create_tag_prediction_task_from_datasets` is not exported by TFF 0.87 (the
# public `create_tag_prediction_task` downloads the vocabularies), so it is
# imported from its module, here only.
from tensorflow_federated.python.simulation.baselines.stackoverflow import tag_prediction_tasks

from experiments.data import images
from experiments.data import names
from experiments.data import stackoverflow_arrays
from experiments.data import stackoverflow_data
from experiments.data import stackoverflow_population

TASKS = names.TASKS
STORED = names.STORED


class MissingDataError(FileNotFoundError):
  """The real dataset of a task is not in the data directory."""


@dataclasses.dataclass(frozen=True)
class Defaults:
  """Per-task defaults (the DP-REC paper's Appendix C, scaled where needed)."""
  rounds: int
  clients_per_round: int
  client_lr: float
  server_lr: float
  server_momentum: float
  batch_size: int
  bits: Optional[int]  # None: DP-REC picks them from c (registry.auto_bits).
  grouping: Any
  noise_stddev: float  # DP-REC prior stddev sigma.
  l2_clip: float  # DP-FedAvg and DDGauss clip.
  server_optimizer: str = 'sgdm'  # or 'adam'
  eval_every: int = 10
  # Server optimizer and learning rate for private aggregators (default:
  # server_optimizer, server_lr). With Adam, noise-only coordinates move as
  # far as informative ones.
  private_server_lr: Optional[float] = None
  private_server_optimizer: Optional[str] = None


@dataclasses.dataclass
class Task:
  """A federated task ready for a training loop."""
  name: str
  baseline: tff.simulation.baselines.BaselineTask
  metric: str  # key in the evaluation metrics
  metric_label: str
  data_source: str  # 'real' or 'embedded'
  data_note: str
  defaults: Defaults
  # The embedded SO-LR data preprocessed once into arrays
  # (`stackoverflow_arrays`): {split: SplitArrays}; None elsewhere.
  arrays: Optional[dict] = None
  # (ids, seed) -> the clients' training data as tensors when `arrays` are
  # held (`stackoverflow_arrays.ClientTensors`); else None and TFF builds the
  # datasets from ids inside the round (`dataset_computation`).
  client_data: Any = None
  # 'stored' (the data files' clients) or 'on demand'
  # (`stackoverflow_population`).
  population_source: str = 'stored'
  # The training clients where they are not the TFF dataset's (on demand).
  client_ids: Any = None
  # Tasks of one key have the same training data and preprocessing (digits:
  # its name, batch size and seed) and share one `dataset_computation` in a
  # process, traced once; None: a computation of its own.
  dataset_key: Optional[tuple] = None
  _dense: dict = dataclasses.field(default_factory=dict, repr=False)
  # `evaluate_with_model`'s (model, traced forward pass), made once.
  _evaluator: Any = dataclasses.field(default=None, repr=False)

  def learning_process(self, process):
    """`process` fed as `round_input` requires (ids or tensors)."""
    computation = (self.dataset_computation if self.client_data is None else
                   self.client_data.dataset_computation)
    return tff.simulation.compose_dataset_computation_with_learning_process(
        computation, process)

  def round_input(self, client_ids, seed) -> list:
    """What `learning_process(...).next` takes for these clients.

    Args:
      client_ids: The round's clients.
      seed: Seeds the order of the clients' examples where the task holds
        its data as arrays (an int or a sequence of ints, for
        `np.random.default_rng`); TFF's loaders shuffle unseeded.
    """
    if self.client_data is not None:
      return self.client_data(client_ids, seed)
    return [str(i) for i in client_ids]

  def eval_arrays(self, split: str):
    """(x, y) of a split held as arrays (built once), or None."""
    if self.arrays is None:
      return None
    if split not in self._dense:
      self._dense[split] = self.arrays[split].all_dense()
    return self._dense[split]

  @property
  def train_client_ids(self):
    """The training clients' ids (a sequence; not a list when on demand)."""
    if self.client_ids is not None:
      return self.client_ids
    return list(self.baseline.datasets.train_data.client_ids)

  @property
  def population(self) -> int:
    return len(self.train_client_ids)

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    """TFF computation client id -> preprocessed dataset.

    Building datasets inside TFF's runtime from client ids avoids building a
    preprocessing graph per client in Python (2x faster rounds on SO-LR).
    """
    if self.dataset_key in _DATASET_COMPUTATIONS:
      return _DATASET_COMPUTATIONS[self.dataset_key]
    datasets = self.baseline.datasets
    data = datasets.train_data
    if datasets.train_preprocess_fn is not None:
      data = data.preprocess(datasets.train_preprocess_fn)
    computation = data.dataset_computation
    if self.dataset_key is not None:
      _DATASET_COMPUTATIONS[self.dataset_key] = computation
    return computation


# `Task.dataset_computation` by `Task.dataset_key`.
_DATASET_COMPUTATIONS = {}


# Appendix C of the DP-REC paper, scaled for the embedded SO-LR data (1/10 of
# the model: 1000 words x 50 tags; the paper's 342,477 training clients, made
# on demand) and for a main job within 10 minutes on 2 cores: 50 rounds of 40
# clients. Tuned on the validation split at epsilon 1, 50 rounds of 40, one
# seed (docs/EXPERIMENTS.md, Tuning): DP-FedAvg and DDGauss clip 0.2 with
# server SGD (momentum 0.9) at rate 10 (40.8% against 31.7% at clip 0.5 and
# rate 3); DP-REC sigma 0.006 at the same rate, its bits chosen from its
# clip ratio (registry.auto_bits). Non-private FedAvg: server Adam 0.03 (SGD
# with momentum 0.9 at rate 1.0 saturates the biases on unclipped updates).
# TFF's SO-LR model sums its loss over the batch; client SGD 1.0 keeps the
# biases from saturating.
_DEFAULTS = {
    'stackoverflow_lr': Defaults(
        rounds=50, clients_per_round=40, client_lr=1.0, server_lr=0.03,
        server_momentum=0.9, batch_size=100, bits=None, grouping='network',
        noise_stddev=0.006, l2_clip=0.2, server_optimizer='adam',
        eval_every=10, private_server_lr=10.0,
        private_server_optimizer='sgdm'),
    'emnist': Defaults(
        rounds=1500, clients_per_round=100, client_lr=0.05, server_lr=1.0,
        server_momentum=0.0, batch_size=20, bits=7, grouping='tensor',
        noise_stddev=0.03, l2_clip=0.1, eval_every=50),
    'shakespeare': Defaults(
        rounds=200, clients_per_round=66, client_lr=1.0, server_lr=1.0,
        server_momentum=0.0, batch_size=10, bits=7, grouping='tensor',
        noise_stddev=0.1, l2_clip=0.3, eval_every=20),
    'mnist': Defaults(
        rounds=1000, clients_per_round=10, client_lr=0.01, server_lr=2e-3,
        server_momentum=0.0, batch_size=20, bits=7, grouping='tensor',
        noise_stddev=0.005, l2_clip=0.01, server_optimizer='adam',
        eval_every=50),
    # The paper's MNIST hyperparameters (Appendix C) on real Fashion-MNIST:
    # client SGD 0.01, 1 epoch of batches of 20, server Adam 2e-3, B = 10,
    # DP-FedAvg's clip 0.01, DP-REC's sigma 0.005; DP-REC's bits from c.
    'fashion_mnist': Defaults(
        rounds=1000, clients_per_round=10, client_lr=0.01, server_lr=2e-3,
        server_momentum=0.0, batch_size=20, bits=None, grouping='tensor',
        noise_stddev=0.005, l2_clip=0.01, server_optimizer='adam',
        eval_every=50),
    # Small real-data task that always runs: sklearn's 8x8 digits. client_lr
    # and DP-REC's noise_stddev tuned on the validation split (2 seeds each,
    # private ones at epsilon 3; docs/EXPERIMENTS.md): FedAvg 75.6% at client
    # rate 0.2 against 36.7% at 0.05; DP-FedAvg 22.2% and 22.8% (a tie);
    # DP-REC at 0.2: 18.3% at sigma 0.1 against 10.8% at 0.02.
    'digits': Defaults(
        rounds=60, clients_per_round=10, client_lr=0.2, server_lr=1.0,
        server_momentum=0.0, batch_size=20, bits=7, grouping='tensor',
        noise_stddev=0.1, l2_clip=0.5, eval_every=10),
}

# Sizes of the embedded StackOverflow task (vocabulary and tags kept).
TRAIN_MAX_ELEMENTS = 1000  # SO-LR ClientSpec max_elements, as in TFF's task.
EMBEDDED_WORD_VOCAB = 1000
EMBEDDED_TAG_VOCAB = 50
REAL_WORD_VOCAB = 10000
REAL_TAG_VOCAB = 500


def defaults(task_name: str) -> Defaults:
  _check_task(task_name)
  return _DEFAULTS[task_name]


def create_task(task_name: str,
                data_dir: str,
                *,
                batch_size: Optional[int] = None,
                seed: int = 0,
                embedded_config: Optional[dict] = None,
                population=None) -> Task:
  """Builds `task_name` from `data_dir` (see each builder for the files).

  Args:
    task_name: One of `TASKS`.
    data_dir: The data directory.
    batch_size: The training batch size (default: the task's).
    seed: The task's data seed (where it has one).
    embedded_config: Overrides of the embedded SO-LR data's generator.
    population: Embedded SO-LR only: None (the paper's 342,477 training
      clients, made on demand), 'stored' (the data files' clients) or an
      int >= 2 (that many, on demand; `stackoverflow_population`).

  Raises:
    ValueError: For an unknown task or a population that does not apply.
    MissingDataError: When a real dataset is required and missing.
  """
  _check_task(task_name)
  task_defaults = _DEFAULTS[task_name]
  batch = batch_size or task_defaults.batch_size
  builder = {
      'stackoverflow_lr': _stackoverflow_lr,
      'emnist': _emnist,
      'shakespeare': _shakespeare,
      'mnist': _mnist,
      'fashion_mnist': _fashion_mnist,
      'digits': _digits,
  }[task_name]
  kwargs = dict(embedded_config=embedded_config) if (
      task_name == 'stackoverflow_lr') else {}
  baseline, metric, label, source, note, *image_data = builder(
      data_dir, batch, seed, **kwargs)
  if population is not None and not (task_name == 'stackoverflow_lr' and
                                     source == 'embedded'):
    raise ValueError(
        f'population={population!r} applies to the embedded stackoverflow_lr '
        f'data only; {task_name} here has {source} data.')
  arrays, client_ids = None, None
  client_data = image_data[0] if image_data else None
  population_source = 'stored'
  if task_name == 'stackoverflow_lr' and source == 'embedded':
    arrays, client_data, client_ids, population_source, more = (
        _embedded_clients(data_dir, batch, population, embedded_config))
    note += more
  # Digits' data ships with scikit-learn: batch size and seed fix the rest.
  dataset_key = ('digits', batch, seed) if task_name == 'digits' else None
  return Task(task_name, baseline, metric, label, source, note, task_defaults,
              arrays, client_data, population_source, client_ids,
              dataset_key=dataset_key)


def _embedded_clients(data_dir, batch, population, embedded_config):
  """The embedded SO-LR arrays and training clients (stored or on demand).

  Returns (arrays, client tensors, client ids or None, population source,
  a note to add).
  """
  vocab = _vocab(data_dir, EMBEDDED_WORD_VOCAB, EMBEDDED_TAG_VOCAB)
  arrays = stackoverflow_arrays.load(data_dir, *vocab)
  clients, client_ids, source, note = arrays['train'], None, 'stored', ''
  if population != STORED:
    clients = stackoverflow_population.Population(
        stackoverflow_population.PAPER_POPULATION if population is None
        else population, *vocab, embedded_config=embedded_config)
    client_ids, source = clients.client_ids, 'on demand'
    note = (f' Training clients: {clients.size}, each made on demand '
            'from the same generator (validation and test: the stored '
            'held-out clients).')
  return (arrays, stackoverflow_arrays.ClientTensors(
      clients, batch, TRAIN_MAX_ELEMENTS), client_ids, source, note)


def evaluate(task: Task, model_weights, max_examples: Optional[int] = None,
             split: str = 'test') -> dict[str, float]:
  """Centralized evaluation of `model_weights` on a split of the task.

  Returns the task's metric (`task.metric`), the mean loss and the number of
  examples. Metrics are computed here from the model's predictions: TFF's Keras
  metric finalizers create variables inside a `tf.function` and cannot be
  called twice in one process. `split` is 'test' or 'validation' (SO-LR's
  held-out clients, digits' 180 held-out examples; used for tuning, never
  the test split).

  Raises:
    ValueError: For another split, or 'validation' on a task without one.
  """
  if split not in ('test', 'validation'):
    raise ValueError(f"split must be 'test' or 'validation', found {split!r}.")
  arrays = task.eval_arrays('heldout' if split == 'validation' else 'test')
  if arrays is not None:
    return _evaluate_logistic_regression(task, model_weights, arrays,
                                         max_examples)
  return evaluate_with_model(task, model_weights,
                             _eval_data(task, split, max_examples))


def evaluate_with_model(task: Task, model_weights, data) -> dict[str, float]:
  """`evaluate` through the model's `forward_pass` on (x, y) batches."""
  model, eval_step = _evaluator(task)
  model_weights.assign_weights_to(model)
  if task.metric == 'recall_at_5':
    metric = tf.keras.metrics.Recall(top_k=5)
  else:
    metric = tf.keras.metrics.SparseCategoricalAccuracy()
  loss_sum, count = 0.0, 0
  for batch in data:
    output = eval_step(batch)
    num = int(output.num_examples)
    loss = float(output.loss)
    # TFF's SO-LR model sums the loss over the batch; the others average.
    loss_sum += loss if task.name == 'stackoverflow_lr' else loss * num
    count += num
    metric.update_state(batch[1], output.predictions)
  return {task.metric: float(metric.result()),
          'loss': loss_sum / max(count, 1), 'num_examples': count}


def _evaluator(task: Task):
  """(model, its traced forward pass) for evaluation, made once per task.

  Tracing the forward pass costs about 0.3 s, more than evaluating the
  digits' test split; a run evaluates every `eval_every` rounds. The model
  is built eagerly and only its variables change between calls
  (`assign_weights_to`), so TFF's later tracing of other models in graphs
  does not touch it (`tests/experiments_test.py`'s EvaluationTest).
  """
  # pylint: disable=protected-access
  if task._evaluator is None:
    model = task.baseline.model_fn()
    task._evaluator = (model, tf.function(
        lambda batch: model.forward_pass(batch, training=False),
        reduce_retracing=True))
  return task._evaluator


EVAL_BATCH = 2048


def _evaluate_logistic_regression(task, model_weights, arrays, max_examples):
  """`evaluate` for TFF's SO-LR model on arrays, in NumPy (30x faster).

  The model is one sigmoid Dense layer (kernel, bias) with a summed binary
  cross-entropy; `tests/stackoverflow_arrays_test.py` checks this against
  the model's `forward_pass` and Keras' Recall(top_k=5).
  """
  kernel, bias = (np.asarray(w, np.float32) for w in model_weights.trainable)
  x, y = arrays
  if max_examples is not None:
    x, y = x[:max_examples], y[:max_examples]
  logits = x @ kernel + bias
  # Keras' Recall(top_k=5): the 5 highest float32 probabilities of each
  # example are positive, ties to the lower index (tf.math.top_k), labels
  # read as booleans.
  probabilities = 1.0 / (1.0 + np.exp(-logits, dtype=np.float32))
  top = np.argsort(-probabilities, axis=1, kind='stable')[:, :5]
  positive = y > 0
  true_positives = float(np.take_along_axis(positive, top, axis=1).sum())
  recall = true_positives / max(float(positive.sum()), 1.0)
  # Keras' binary_crossentropy on probabilities, in float32: TFF's
  # forward_pass gets no logits from the model, so Keras clips to
  # [1e-7, 1 - 1e-7] and adds 1e-7 inside the logs.
  eps = np.float32(1e-7)
  p = np.clip(probabilities, eps, np.float32(1) - eps)
  loss = -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps),
                  axis=1, dtype=np.float64)
  return {task.metric: recall, 'loss': float(loss.mean()),
          'num_examples': len(x)}


def _eval_data(task: Task, split: str, max_examples=None):
  """The split's (x, y) batches (at most `max_examples` examples)."""
  arrays_split = 'heldout' if split == 'validation' else 'test'
  arrays = task.eval_arrays(arrays_split)
  if arrays is not None:
    # NumPy slices: a tf.data pipeline would copy the arrays into its graph.
    x, y = arrays
    if max_examples is not None:
      x, y = x[:max_examples], y[:max_examples]
    return [(x[i:i + EVAL_BATCH], y[i:i + EVAL_BATCH])
            for i in range(0, len(x), EVAL_BATCH)]
  datasets = task.baseline.datasets
  if split == 'test':
    data = datasets.get_centralized_test_data()
  elif datasets.validation_data is None:
    raise ValueError(f'split: the {task.name} task has no validation data.')
  else:
    data = datasets.validation_data.create_tf_dataset_from_all_clients(
    ).apply(datasets.eval_preprocess_fn)
  if max_examples is not None:
    data = data.unbatch().take(max_examples).batch(EVAL_BATCH)
  return data


def frequent_tags_recall_at_5(task: Task, split: str = 'test') -> float:
  """Recall@5 of always predicting the 5 most frequent tags (SO-LR only).

  The tag vocabulary is ordered by training frequency, so these are tags 0-4.
  """
  if task.name != 'stackoverflow_lr':
    raise ValueError(f'Only for stackoverflow_lr, found {task.name!r}.')
  metric = tf.keras.metrics.Recall(top_k=5)
  for _, y in _eval_data(task, split):
    num_tags = int(y.shape[-1])
    scores = tf.concat([tf.ones([5]), tf.zeros([num_tags - 5])], axis=0)
    metric.update_state(y, tf.tile(scores[None], [tf.shape(y)[0], 1]))
  return float(metric.result())


def _stackoverflow_lr(data_dir, batch, seed, embedded_config=None):
  del seed
  sqlite = os.path.join(data_dir, stackoverflow_data.SQLITE_NAME)
  if os.path.exists(sqlite) and not stackoverflow_data.is_embedded(data_dir):
    source = 'real'
    word_vocab_size, tag_vocab_size = REAL_WORD_VOCAB, REAL_TAG_VOCAB
    note = f'Real StackOverflow data from {sqlite}.'
  else:
    source = 'embedded'
    stackoverflow_data.generate(data_dir, embedded_config)
    word_vocab_size, tag_vocab_size = EMBEDDED_WORD_VOCAB, EMBEDDED_TAG_VOCAB
    note = (
        'Embedded synthetic StackOverflow data (generated in TFF\'s format). '
        'To use the real dataset, place TFF\'s stackoverflow.sqlite and the '
        'extracted stackoverflow.word_count and stackoverflow.tag_count in '
        f'--data_dir (now {data_dir}; the counts may sit in its datasets/ '
        'subfolder, as TFF caches them).')
  word_vocab, tag_vocab = _vocab(data_dir, word_vocab_size, tag_vocab_size)
  train, heldout, test = tff.simulation.datasets.stackoverflow.load_data(
      cache_dir=data_dir)
  baseline = tag_prediction_tasks.create_tag_prediction_task_from_datasets(
      train_client_spec=tff.simulation.baselines.ClientSpec(
          num_epochs=1, batch_size=batch,
          max_elements=TRAIN_MAX_ELEMENTS),
      eval_client_spec=tff.simulation.baselines.ClientSpec(
          num_epochs=1, batch_size=256, shuffle_buffer_size=1),
      word_vocab=word_vocab, tag_vocab=tag_vocab, train_data=train,
      test_data=test, validation_data=heldout)
  return baseline, 'recall_at_5', 'recall@5', source, note


def _vocab(data_dir, word_vocab_size, tag_vocab_size):
  return (list(_read_word_counts(data_dir))[:word_vocab_size],
          list(_read_tag_counts(data_dir))[:tag_vocab_size])


def _read_word_counts(data_dir):
  path = _find(data_dir, stackoverflow_data.WORD_COUNT_NAME)
  counts = collections.OrderedDict()
  with open(path) as f:
    for line in f:
      word, count = line.split()
      counts[word] = int(count)
  return counts


def _read_tag_counts(data_dir):
  import json  # pylint: disable=g-import-not-at-top
  with open(_find(data_dir, stackoverflow_data.TAG_COUNT_NAME)) as f:
    counts = json.load(f)
  return collections.OrderedDict(
      sorted(counts.items(), key=lambda item: item[1], reverse=True))


def _find(data_dir, name):
  for path in (os.path.join(data_dir, 'datasets', name),
               os.path.join(data_dir, name)):
    if os.path.exists(path):
      return path
  raise MissingDataError(
      f'{name} not found in {data_dir} or {data_dir}/datasets: place TFF\'s '
      f'extracted {name} there to use the real StackOverflow data.')


def _require(path, what, how):
  if not os.path.exists(path):
    raise MissingDataError(
        f'The {what} task needs {os.path.basename(path)} at {path}; {how}')


def _emnist(data_dir, batch, seed):
  del seed
  _require(os.path.join(data_dir, 'emnist_all.sqlite'), 'emnist',
           'place TFF\'s emnist_all.sqlite (decompressed from '
           'emnist_all.sqlite.lzma) in --data_dir.')
  baseline = tff.simulation.baselines.emnist.create_character_recognition_task(
      tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=batch),
      model_id='cnn', only_digits=False, cache_dir=data_dir)
  return baseline, 'accuracy', 'accuracy', 'real', (
      f'TFF FEMNIST from {data_dir}/emnist_all.sqlite.')


def _shakespeare(data_dir, batch, seed):
  del seed
  _require(os.path.join(data_dir, 'shakespeare.sqlite'), 'shakespeare',
           'place TFF\'s shakespeare.sqlite (decompressed from '
           'shakespeare.sqlite.lzma) in --data_dir.')
  baseline = (
      tff.simulation.baselines.shakespeare.create_character_prediction_task(
          tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=batch),
          sequence_length=80, cache_dir=data_dir))
  return baseline, 'accuracy', 'accuracy', 'real', (
      f'TFF Shakespeare from {data_dir} (accuracy over all positions).')


def _mnist(data_dir, batch, seed):
  """MNIST from Keras' mnist.npz or LeCun's four IDX files in --data_dir."""
  path = os.path.join(data_dir, 'mnist.npz')
  if os.path.exists(path):
    with np.load(path) as f:
      arrays = {k: f[k] for k in images.IDX_FILES}
  else:
    folder = images.find_idx_folder([data_dir, os.path.join(data_dir,
                                                            'mnist')])
    _require(path if folder is None else folder, 'mnist',
             "place Keras' mnist.npz (x_train, y_train, x_test, y_test) or "
             'the four IDX files (train-images-idx3-ubyte[.gz], ...) in '
             '--data_dir.')
    path = folder
    arrays = images.load_idx_folder(folder)
  baseline, client_data = _paper_image_task(arrays, batch, seed)
  return baseline, 'accuracy', 'accuracy', 'real', (
      f'MNIST (real images) from {path}; {_PAPER_SPLIT_NOTE}'), client_data


def _fashion_mnist(data_dir, batch, seed):
  """Fashion-MNIST's four IDX files: --data_dir, Keras' cache, Debian's."""
  places = images.fashion_mnist_folders(data_dir)
  folder = images.find_idx_folder(places)
  if folder is None:
    raise MissingDataError(
        'The fashion_mnist task needs the four Fashion-MNIST IDX files '
        '(train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, '
        't10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz), found in '
        f'none of --data_dir ({data_dir} or {places[1]}), '
        f'{images.KERAS_FASHION_MNIST} and {images.DEBIAN_FASHION_MNIST}; '
        f'install them with {images.FASHION_MNIST_INSTALL}.')
  arrays = images.load_idx_folder(folder)
  baseline, client_data = _paper_image_task(arrays, batch, seed)
  return baseline, 'accuracy', 'accuracy', 'real', (
      f'Fashion-MNIST (real images, Xiao et al. 2017) from {folder}; '
      f'{_PAPER_SPLIT_NOTE}'), client_data


_PAPER_SPLIT_NOTE = (
    "the paper's MNIST protocol: the first 50,000 training images over 100 "
    'clients (500 +- 73 examples, Dirichlet(1.0) labels; '
    'images.paper_split), the other 10,000 the validation split, the '
    'official 10,000 test images the test split.')


def _paper_image_task(arrays, batch, seed):
  """The paper's MNIST protocol on 28 x 28 images (`images.paper_split`).

  Returns the baseline task and the clients' images as round tensors
  (`images.ClientImages`, the fast path).
  """
  x_train = (arrays['x_train'].astype(np.float32) / 255.0)[..., None]
  y_train = arrays['y_train'].astype(np.int32)
  x_test = (arrays['x_test'].astype(np.float32) / 255.0)[..., None]
  n = len(y_train) * 5 // 6  # 50,000 of 60,000.
  parts = images.paper_split(y_train[:n], seed=seed)
  baseline = _image_task(x_train[:n], y_train[:n], parts, x_test,
                         arrays['y_test'].astype(np.int32), batch, seed,
                         _lenet5, validation=(x_train[n:], y_train[n:]))
  client_data = images.ClientImages(
      [_client_id(i) for i in range(len(parts))], x_train[:n], y_train[:n],
      parts, batch)
  return baseline, client_data


def _digits(data_dir, batch, seed):
  del data_dir
  from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top
  digits = sk_datasets.load_digits()
  x = (digits.images.astype(np.float32) / 16.0)[..., None]
  y = digits.target.astype(np.int32)
  order = np.random.default_rng(1234).permutation(len(y))
  # 360 test examples, 180 validation examples (for `experiments.studies.tune`), the
  # other 1257 dealt to the clients.
  test, validation, train = order[:360], order[360:540], order[540:]
  baseline = _dirichlet_image_task(x[train], y[train], x[test], y[test], 100,
                                   1.0, batch, seed, _small_cnn,
                                   validation=(x[validation], y[validation]))
  return baseline, 'accuracy', 'accuracy', 'real', (
      'scikit-learn\'s 8x8 handwritten digits (shipped with the package), '
      '100 Dirichlet(1.0) clients; 360 test and 180 validation examples '
      'held out.')


def dirichlet_split(labels: np.ndarray, num_clients: int, alpha: float,
                    seed: int) -> list[np.ndarray]:
  """Splits example indices over clients with Dirichlet label proportions.

  Hsu et al. 2019: each client draws class proportions from Dir(alpha); each
  class's examples are dealt to clients in proportion. Every client gets at
  least one example.
  """
  rng = np.random.default_rng(seed)
  classes = np.unique(labels)
  proportions = rng.dirichlet(np.full(len(classes), alpha), size=num_clients)
  return images.deal_by_class(labels, proportions, rng, round_cuts=False)


def _dirichlet_image_task(x_train, y_train, x_test, y_test, num_clients,
                          alpha, batch, seed, model_builder, validation=None):
  """Dirichlet clients of the training arrays; `validation` is (x, y)."""
  parts = dirichlet_split(y_train, num_clients, alpha, seed)
  return _image_task(x_train, y_train, parts, x_test, y_test, batch, seed,
                     model_builder, validation)


def _image_task(x_train, y_train, parts, x_test, y_test, batch, seed,
                model_builder, validation=None):
  """Clients holding `parts` of the training arrays; `validation` is (x, y)."""
  client_arrays = {
      _client_id(i): collections.OrderedDict(x=x_train[p], y=y_train[p])
      for i, p in enumerate(parts)
  }
  train = tff.simulation.datasets.TestClientData(client_arrays)
  test = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x_test, y=y_test))

  def train_preprocess(ds):
    return ds.shuffle(1000, seed=seed).batch(batch).map(
        lambda e: (e['x'], e['y']))

  def eval_preprocess(ds):
    return ds.batch(256).map(lambda e: (e['x'], e['y']))

  validation_data = None
  if validation is not None:
    validation_data = tff.simulation.datasets.TestClientData({
        'validation': collections.OrderedDict(x=validation[0],
                                              y=validation[1])})
  datasets = tff.simulation.baselines.BaselineTaskDatasets(
      train_data=train, test_data=test, validation_data=validation_data,
      train_preprocess_fn=train_preprocess,
      eval_preprocess_fn=eval_preprocess)
  input_shape = x_train.shape[1:]
  num_classes = int(max(y_train.max(), y_test.max())) + 1

  def model_fn():
    return tff.learning.models.from_keras_model(
        model_builder(input_shape, num_classes),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(),
        input_spec=datasets.element_type_structure,
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])

  return tff.simulation.baselines.BaselineTask(datasets, model_fn)


def _client_id(i: int) -> str:
  return f'client_{i:03d}'


def _lenet5(input_shape, num_classes):
  layers = tf.keras.layers
  return tf.keras.Sequential([
      layers.Conv2D(6, 5, padding='same', activation='relu',
                    input_shape=input_shape),
      layers.MaxPooling2D(2),
      layers.Conv2D(16, 5, activation='relu'),
      layers.MaxPooling2D(2),
      layers.Flatten(),
      layers.Dense(120, activation='relu'),
      layers.Dense(84, activation='relu'),
      layers.Dense(num_classes, activation='softmax'),
  ])


def _small_cnn(input_shape, num_classes):
  layers = tf.keras.layers
  return tf.keras.Sequential([
      layers.Conv2D(16, 3, padding='same', activation='relu',
                    input_shape=input_shape),
      layers.MaxPooling2D(2),
      layers.Conv2D(32, 3, padding='same', activation='relu'),
      layers.MaxPooling2D(2),
      layers.Flatten(),
      layers.Dense(64, activation='relu'),
      layers.Dense(num_classes, activation='softmax'),
  ])


def _check_task(task_name):
  if task_name not in TASKS:
    raise ValueError(f'Unknown task {task_name!r}; choose one of {TASKS}.')

