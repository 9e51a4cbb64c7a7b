"""Real image data: IDX files (MNIST, Fashion-MNIST) and the paper's split.

IDX is the format of LeCun's MNIST files and of Fashion-MNIST (Xiao et al.
2017): a 4-byte magic number (two zero bytes, a type code, the number of
dimensions), one big-endian uint32 per dimension, then the values in
row-major order, big-endian. The files may be gzip-compressed (`.gz`), as
distributed and as Keras caches them.

The paper's MNIST protocol (Triastcyn et al., Appendix C and its table of
federated training sets): the first 50,000 training images over 100
clients, 500 +- 73.1 examples each, non-i.i.d. by label (Dirichlet
alpha = 1.0, Hsu et al. 2019). `paper_split` makes such a split; the other
10,000 training images are the validation split, the official 10,000 test
images the test split.
"""

import functools
import gzip
import os
from typing import Optional, Sequence

import numpy as np

# IDX type codes (the magic number's third byte) -> big-endian dtypes.
_IDX_TYPES = {0x08: '>u1', 0x09: '>i1', 0x0B: '>i2', 0x0C: '>i4',
              0x0D: '>f4', 0x0E: '>f8'}
IDX_FILES = {
    'x_train': 'train-images-idx3-ubyte',
    'y_train': 'train-labels-idx1-ubyte',
    'x_test': 't10k-images-idx3-ubyte',
    'y_test': 't10k-labels-idx1-ubyte',
}
KERAS_FASHION_MNIST = os.path.join('~', '.keras', 'datasets', 'fashion-mnist')
DEBIAN_FASHION_MNIST = '/usr/share/datasets/fashion-mnist'
FASHION_MNIST_INSTALL = (
    'apt-get install dataset-fashion-mnist, or Keras\' '
    'tf.keras.datasets.fashion_mnist.load_data() where the internet is '
    'reachable')
# The paper's federated MNIST: 50,000 training images, 100 clients of
# 500 +- 73.1 examples, Dirichlet(1.0) label proportions.
PAPER_TRAIN_IMAGES = 50_000
PAPER_CLIENTS = 100
PAPER_CLIENT_SD = 73.1
PAPER_CLIENT_CV = PAPER_CLIENT_SD / (PAPER_TRAIN_IMAGES / PAPER_CLIENTS)
PAPER_ALPHA = 1.0


class IdxError(ValueError):
  """A file is not a well-formed IDX file."""


def read_idx(path: str) -> np.ndarray:
  """The array in an IDX file (gzip-compressed when the name ends in .gz).

  Raises:
    IdxError: For a bad magic number, an unknown type, or a size that does
      not match the header (naming the file).
  """
  opener = gzip.open if path.endswith('.gz') else open
  with opener(path, 'rb') as f:
    data = f.read()
  if len(data) < 4 or data[0] != 0 or data[1] != 0:
    raise IdxError(f'{path}: not an IDX file (magic number '
                   f'{data[:4].hex() or "missing"}).')
  if data[2] not in _IDX_TYPES:
    raise IdxError(f'{path}: unknown IDX type code 0x{data[2]:02x}.')
  ndim = data[3]
  header = 4 + 4 * ndim
  if len(data) < header:
    raise IdxError(f'{path}: truncated header.')
  shape = tuple(int(d) for d in np.frombuffer(data[4:header], '>u4'))
  dtype = np.dtype(_IDX_TYPES[data[2]])
  expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
  if len(data) - header != expected:
    raise IdxError(f'{path}: {len(data) - header} bytes of data, the header '
                   f'{shape} says {expected}.')
  return np.frombuffer(data, dtype, offset=header).reshape(shape).astype(
      dtype.newbyteorder('='))


def write_idx(path: str, array: np.ndarray) -> None:
  """Writes `array` as an IDX file (gzip when `path` ends in .gz)."""
  array = np.asarray(array)
  codes = {np.dtype(v).newbyteorder('='): k for k, v in _IDX_TYPES.items()}
  code = codes[array.dtype]
  header = bytes([0, 0, code, array.ndim]) + np.asarray(
      array.shape, '>u4').tobytes()
  body = array.astype(np.dtype(_IDX_TYPES[code])).tobytes()
  opener = gzip.open if path.endswith('.gz') else open
  with opener(path, 'wb') as f:
    f.write(header + body)


def find_idx_folder(candidates: Sequence[str]) -> Optional[str]:
  """The first folder holding all four IDX files (plain or .gz), or None."""
  for folder in candidates:
    folder = os.path.expanduser(folder)
    if all(_idx_path(folder, name) for name in IDX_FILES.values()):
      return folder
  return None


def load_idx_folder(folder: str) -> dict:
  """{'x_train', 'y_train', 'x_test', 'y_test'} from a folder's IDX files."""
  arrays = {key: read_idx(_idx_path(folder, name))
            for key, name in IDX_FILES.items()}
  for split in ('train', 'test'):
    if len(arrays[f'x_{split}']) != len(arrays[f'y_{split}']):
      raise IdxError(f'{folder}: {len(arrays[f"x_{split}"])} {split} images '
                     f'but {len(arrays[f"y_{split}"])} labels.')
  return arrays


def _idx_path(folder, name) -> Optional[str]:
  for candidate in (name, name + '.gz'):
    path = os.path.join(folder, candidate)
    if os.path.isfile(path):
      return path
  return None


def fashion_mnist_folders(data_dir: str) -> list[str]:
  """Where Fashion-MNIST is looked for, in order: --data_dir (itself or its
  fashion-mnist/ folder), Keras' cache, Debian's dataset-fashion-mnist."""
  return [data_dir, os.path.join(data_dir, 'fashion-mnist'),
          KERAS_FASHION_MNIST, DEBIAN_FASHION_MNIST]


def size_concentration(clients: int, cv: float) -> float:
  """beta with sd / mean of Dir(beta 1_n)_i equal to `cv`.

  Var(Dir(beta 1_n)_i) = p (1 - p) / (n beta + 1) with p = 1 / n.
  """
  p = 1.0 / clients
  return ((1 - p) / (p * cv**2) - 1) / clients


def paper_split(labels: np.ndarray, *, num_clients: int = PAPER_CLIENTS,
                alpha: float = PAPER_ALPHA, size_cv: float = PAPER_CLIENT_CV,
                seed: int = 0) -> list[np.ndarray]:
  """Example indices of each client, with the paper's sizes and label skew.

  Client sizes: len(labels) * Dir(beta), beta from `size_concentration`
  (mean len / n, standard deviation `size_cv` times the mean: the paper's
  500 +- 73.1 at 50,000 examples). Labels: each client's class
  proportions Dir(alpha) (Hsu et al. 2019). The wanted counts
  size_i * proportion_ik are reconciled with the class totals by iterative
  proportional fitting, then each class's shuffled examples are dealt in
  those proportions. Every example goes to exactly one client; every client
  gets at least one.
  """
  rng = np.random.default_rng(seed)
  classes, totals = np.unique(labels, return_counts=True)
  beta = size_concentration(num_clients, size_cv)
  sizes = rng.dirichlet(np.full(num_clients, beta)) * len(labels)
  wanted = sizes[:, None] * rng.dirichlet(np.full(len(classes), alpha),
                                          size=num_clients)
  for _ in range(200):  # Iterative proportional fitting (Sinkhorn).
    wanted *= totals / wanted.sum(axis=0)
    wanted *= (sizes / wanted.sum(axis=1))[:, None]
  return deal_by_class(labels, wanted, rng, round_cuts=True)


def deal_by_class(labels, weights, rng, *, round_cuts: bool
                  ) -> list[np.ndarray]:
  """Deals each class's shuffled examples to clients by `weights`.

  `weights[i, k]` is client i's share of class k (the k-th of the sorted
  labels); the cuts are the cumulative shares times the class's count,
  rounded (`round_cuts`) or truncated. A client left empty gets one
  example of the largest client. Returns each client's sorted indices.
  """
  classes = np.unique(labels)
  shares = [[] for _ in range(len(weights))]
  for k, c in enumerate(classes):
    idx = rng.permutation(np.flatnonzero(labels == c))
    cumulative = np.cumsum(weights[:, k] / weights[:, k].sum()) * len(idx)
    cuts = (np.round(cumulative) if round_cuts else cumulative).astype(
        int)[:-1]
    for client, part in enumerate(np.split(idx, cuts)):
      shares[client].extend(part.tolist())
  for client in range(len(shares)):
    if not shares[client]:
      donor = int(np.argmax([len(s) for s in shares]))
      shares[client].append(shares[donor].pop())
  return [np.array(sorted(s)) for s in shares]


class ClientImages:
  """Sampled clients' images as tensors (the fast path for image tasks).

  `__call__(ids, seed)` returns per client its images (float32 in [0, 1],
  [n, h, w, 1], the arrays the task's datasets slice) and int32 labels [n],
  in a uniform random order drawn from `seed` (each client's shuffle, as
  the datasets' 1000-example buffer gives for clients of at most 1000
  examples). `dataset_computation` (a TFF computation run inside the round)
  batches them. TFF then moves two tensors per client instead of a dataset
  graph with every client's images inlined (TestClientData's), which made
  image rounds 10x slower.
  """

  def __init__(self, client_ids, x: np.ndarray, y: np.ndarray, parts,
               batch_size: int):
    self._index = {str(c): p for c, p in zip(client_ids, parts)}
    self._x, self._y = x, y.astype(np.int32)
    self._batch_size = batch_size

  def __call__(self, client_ids, seed) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for client in client_ids:
      rows = self._index[str(client)]
      rows = rows[rng.permutation(len(rows))]
      out.append((self._x[rows], self._y[rows]))
    return out

  @functools.cached_property
  def dataset_computation(self):
    """TFF computation: one client's (images, labels) -> batched dataset."""
    return _to_dataset_computation(self._x.shape[1:], self._batch_size)


def _to_dataset_computation(shape, batch_size):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

  @tff.tensorflow.computation(tff.TensorType(np.float32, [None, *shape]),
                              tff.TensorType(np.int32, [None]))
  def to_dataset(x, y):
    # Without tf.data's per-iterator Grappler rewrite and autotuner: one
    # per client per round (`stackoverflow_arrays._plain_pipeline_options`).
    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    options.autotune.enabled = False
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(
        batch_size).with_options(options)

  return to_dataset
