"""The image tasks: MNIST and Fashion-MNIST under the paper's MNIST
protocol (real images from IDX files), and scikit-learn's 8x8 digits.

The paper's protocol (`images.paper_split`): the first 50,000 training
images over 100 clients with Dirichlet(1.0) labels, the other 10,000 the
validation split, the official test images the test split; LeNet-5. The
digits: 100 Dirichlet(1.0) clients of 1,257 examples, 180 validation and
360 test examples held out; a small CNN.
"""

import collections
import os

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.data import images
from experiments.data import models
from experiments.data import task_types

_PAPER_SPLIT_NOTE = (
    "the paper's MNIST protocol: the first 50,000 training images over 100 "
    'clients (500 +- 73 examples, Dirichlet(1.0) labels; '
    'images.paper_split), the other 10,000 the validation split, the '
    'official 10,000 test images the test split.')


# The paper's protocol: 28 x 28 grey images of 10 classes.
PAPER_IMAGE_SHAPE = (28, 28, 1)
PAPER_CLASSES = 10


def build_paper_model_only(
    settings: task_types.BuildSettings) -> task_types.TaskData:
  """MNIST's or Fashion-MNIST's model and clients under the paper's
  protocol, without the images: what a report from stored records needs."""
  del settings
  input_spec = (tf.TensorSpec([None, *PAPER_IMAGE_SHAPE], tf.float32),
                tf.TensorSpec([None], tf.int32))
  return task_types.TaskData(
      task_types.ModelOnly(_model_fn(models.lenet5, PAPER_IMAGE_SHAPE,
                                     PAPER_CLASSES, input_spec)),
      'real', 'The model and clients of the paper\'s protocol, without the '
      'images (a report from stored records).',
      client_ids=[_client_id(i) for i in range(images.PAPER_CLIENTS)])


def build_mnist(settings: task_types.BuildSettings) -> task_types.TaskData:
  """MNIST from Keras' mnist.npz or LeCun's four IDX files in --data_dir."""
  data_dir = settings.data_dir
  path = os.path.join(data_dir, 'mnist.npz')
  if os.path.exists(path):
    with np.load(path) as f:
      arrays = {k: f[k] for k in images.IDX_FILES}
  else:
    folder = images.find_idx_folder([data_dir, os.path.join(data_dir,
                                                            'mnist')])
    if folder is None:
      raise task_types.MissingDataError(
          f'The mnist task needs mnist.npz at {path}; place Keras\' '
          'mnist.npz (x_train, y_train, x_test, y_test) or the four IDX '
          'files (train-images-idx3-ubyte[.gz], ...) in --data_dir.')
    path = folder
    arrays = images.load_idx_folder(folder)
  baseline, client_data = _paper_image_task(arrays, settings.batch_size,
                                            settings.seed)
  return task_types.TaskData(
      baseline, 'real', f'MNIST (real images) from {path}; {_PAPER_SPLIT_NOTE}',
      client_data=client_data)


def build_fashion_mnist(
    settings: task_types.BuildSettings) -> task_types.TaskData:
  """Fashion-MNIST's four IDX files: --data_dir, Keras' cache, Debian's."""
  data_dir = settings.data_dir
  places = images.fashion_mnist_folders(data_dir)
  folder = images.find_idx_folder(places)
  if folder is None:
    raise task_types.MissingDataError(
        'The fashion_mnist task needs the four Fashion-MNIST IDX files '
        '(train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, '
        't10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz), found in '
        f'none of --data_dir ({data_dir} or {places[1]}), '
        f'{images.KERAS_FASHION_MNIST} and {images.DEBIAN_FASHION_MNIST}; '
        f'install them with {images.FASHION_MNIST_INSTALL}.')
  arrays = images.load_idx_folder(folder)
  baseline, client_data = _paper_image_task(arrays, settings.batch_size,
                                            settings.seed)
  return task_types.TaskData(
      baseline, 'real', f'Fashion-MNIST (real images, Xiao et al. 2017) from '
      f'{folder}; {_PAPER_SPLIT_NOTE}', client_data=client_data)


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
                         models.lenet5, validation=(x_train[n:], y_train[n:]))
  client_data = images.ClientImages(
      [_client_id(i) for i in range(len(parts))], x_train[:n], y_train[:n],
      parts, batch)
  return baseline, client_data


def build_digits(settings: task_types.BuildSettings) -> task_types.TaskData:
  """scikit-learn's 8x8 handwritten digits (shipped with the package)."""
  batch, seed = settings.batch_size, settings.seed
  from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top
  digits = sk_datasets.load_digits()
  x = (digits.images.astype(np.float32) / 16.0)[..., None]
  y = digits.target.astype(np.int32)
  order = np.random.default_rng(1234).permutation(len(y))
  # 360 test examples, 180 validation examples (for
  # `experiments.studies.tune`), the other 1257 dealt to the clients.
  test, validation, train = order[:360], order[360:540], order[540:]
  baseline = _dirichlet_image_task(x[train], y[train], x[test], y[test], 100,
                                   1.0, batch, seed, models.small_cnn,
                                   validation=(x[validation], y[validation]))
  return task_types.TaskData(baseline, 'real', (
      'scikit-learn\'s 8x8 handwritten digits (shipped with the package), '
      '100 Dirichlet(1.0) clients; 360 test and 180 validation examples '
      'held out.'))


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
  num_classes = int(max(y_train.max(), y_test.max())) + 1
  return tff.simulation.baselines.BaselineTask(datasets, _model_fn(
      model_builder, x_train.shape[1:], num_classes,
      datasets.element_type_structure))


def _model_fn(model_builder, input_shape, num_classes, input_spec):
  """A `tff.learning` model function of a Keras classifier."""
  def model_fn():
    return tff.learning.models.from_keras_model(
        model_builder(input_shape, num_classes),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(),
        input_spec=input_spec,
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])
  return model_fn


def _client_id(i: int) -> str:
  return f'client_{i:03d}'
