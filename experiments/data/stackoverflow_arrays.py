"""StackOverflow tag prediction in memory: the embedded data's fast path.

TFF's SO-LR pipeline reads every sampled client from SQLite and maps each
example through string splitting and vocabulary lookups inside the round
(`tag_prediction_preprocessing.build_to_ids_fn`): 37 ms per client here, more
than the client's training. This module applies the same preprocessing once per
split, in NumPy, and keeps the result in compressed sparse rows:

*   x: the bag of words of `tokens + ' ' + title`, counts of in-vocabulary
    words divided by their total (all zeros when there is none);
*   y: the multi-hot vector of in-vocabulary tags.

These are exactly TFF's `(tokens, tags)` tensors; `stackoverflow_arrays_test`
checks them element by element against `build_to_ids_fn` on every example of
sampled clients. A client's training data is then put in a seeded random order
and truncated to `max_elements` (`client_orders`), and batched, as TFF's
`create_preprocess_fn` does with its shuffle. `ClientTensors` hands the round
CSR tensors and builds the datasets inside it (`dataset_computation`);
`ClientDatasets` builds the same datasets in Python (the reference: the
round path before the fast one, 2 to 2.5 times slower per round with TFF's
default client loop, `python -m experiments.bench rounds`).

The arrays are cached next to the SQLite file (`stackoverflow_arrays.npz`),
keyed by the file's size and modification time and by the vocabularies.
"""

import collections
import dataclasses
import functools
import hashlib
import json
import os
import sqlite3

import numpy as np
import tensorflow as tf

from experiments.data import stackoverflow_data
from experiments.infra import atomic_files

CACHE_NAME = 'stackoverflow_arrays.npz'
SPLITS = ('train', 'heldout', 'test')
# TFF's stackoverflow constants.DEFAULT_SHUFFLE_BUFFER_SIZE.
SHUFFLE_BUFFER = 1000
_FORMAT = 2  # Bumped whenever the preprocessing changes (invalidates caches).


@dataclasses.dataclass(frozen=True)
class SplitArrays:
  """One split: examples grouped by client, words in CSR form."""
  client_ids: tuple
  example_offsets: np.ndarray  # [clients + 1] into examples
  word_offsets: np.ndarray  # [examples + 1] into word_ids
  word_ids: np.ndarray  # in-vocabulary word ids, int32
  tags: np.ndarray  # [examples, num_tags] multi-hot, uint8
  num_words: int

  @property
  def num_examples(self) -> int:
    return len(self.word_offsets) - 1

  def client_index(self) -> dict:
    return {c: i for i, c in enumerate(self.client_ids)}

  def dense(self, first: int, last: int) -> tuple:
    """(x, y) float32 of examples [first, last)."""
    n = last - first
    x = np.zeros((n, self.num_words), np.float32)
    lo, hi = self.word_offsets[first], self.word_offsets[last]
    lengths = np.diff(self.word_offsets[first:last + 1])
    rows = np.repeat(np.arange(n), lengths)
    np.add.at(x, (rows, self.word_ids[lo:hi]), 1.0)
    x /= np.maximum(lengths, 1)[:, None]  # No in-vocabulary word: zeros.
    return x, self.tags[first:last].astype(np.float32)

  def client_dense(self, index: int) -> tuple:
    return self.dense(int(self.example_offsets[index]),
                      int(self.example_offsets[index + 1]))

  def all_dense(self) -> tuple:
    return self.dense(0, self.num_examples)


def client_orders(num_examples, max_elements: int, seed) -> list:
  """Each client's example order: a uniform permutation, truncated.

  TFF's preprocessing shuffles a client's examples with a buffer of 1000 and
  takes the first `max_elements` (1000): for clients of at most 1000 examples
  (all embedded clients) that is a uniform random permutation, truncated. Here
  it is drawn from `seed` (deterministic; TFF's unseeded shuffle is not).
  """
  rng = np.random.default_rng(seed)
  return [rng.permutation(int(n))[:max_elements] for n in num_examples]


def take_examples(word_ids, word_offsets, rows) -> tuple:
  """CSR words of examples `rows` (in that order): (word_ids, offsets)."""
  starts = word_offsets[rows]
  lengths = word_offsets[np.asarray(rows) + 1] - starts
  offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
  within = np.arange(offsets[-1]) - np.repeat(offsets[:-1], lengths)
  return word_ids[np.repeat(starts, lengths) + within], offsets


def dense_words(word_ids, word_offsets, num_words: int) -> np.ndarray:
  """float32 [examples, num_words]: word counts over each example's total."""
  n = len(word_offsets) - 1
  lengths = np.diff(word_offsets)
  x = np.zeros((n, num_words), np.float32)
  np.add.at(x, (np.repeat(np.arange(n), lengths), word_ids), 1.0)
  x /= np.maximum(lengths, 1)[:, None].astype(np.float32)
  return x


class SplitSource:
  """A `SplitArrays` split as a client source (`client_examples`)."""

  def __init__(self, split: SplitArrays):
    self._split = split
    self._index = split.client_index()
    self.num_words = split.num_words
    self.num_tags = int(split.tags.shape[1])

  @property
  def client_ids(self) -> tuple:
    return self._split.client_ids

  def client_examples(self, client_id) -> tuple:
    """(word_ids int32, word_offsets int64 [n + 1], tags uint8 [n, tags])."""
    try:
      index = self._index[str(client_id)]
    except KeyError:
      raise ValueError(f'client_ids: {client_id!r} is not a training client '
                       'of this split.') from None
    split = self._split
    first, last = split.example_offsets[index], split.example_offsets[index + 1]
    words, offsets = take_examples(split.word_ids, split.word_offsets,
                                   np.arange(first, last))
    return words, offsets, split.tags[first:last]


class _ClientData:
  """Shared by the two ways of feeding sampled clients (below).

  `source` is a `SplitSource` or an on-demand population
  (`stackoverflow_population.Population`): anything with `num_words`,
  `num_tags` and `client_examples(client_id)`.
  """

  def __init__(self, source, batch_size: int, max_elements: int):
    if batch_size < 1 or max_elements < 1:
      raise ValueError(f'batch_size={batch_size} and max_elements='
                       f'{max_elements} must both be at least 1.')
    if isinstance(source, SplitArrays):
      source = SplitSource(source)
    self._source = source
    self._batch_size = batch_size
    self._max_elements = max_elements

  @property
  def source(self):
    """Where the clients' examples come from (`client_examples`)."""
    return self._source

  def _ordered(self, client_ids, seed):
    """Per client: (word_ids, word_offsets, tags) of its ordered examples."""
    examples = [self._source.client_examples(c) for c in client_ids]
    orders = client_orders([len(t) for _, _, t in examples],
                           self._max_elements, seed)
    out = []
    for (words, offsets, tags), order in zip(examples, orders):
      words, offsets = take_examples(words, offsets, order)
      out.append((words.astype(np.int32), offsets, tags[order]))
    return out


class ClientDatasets(_ClientData):
  """Sampled clients' training datasets, built in Python (the reference path).

  `__call__(ids, seed)` returns one `tf.data.Dataset` per client. TFF then
  serializes each dataset's graph into the round; `ClientTensors` is the
  fast path that computes exactly the same batches.
  """

  def __call__(self, client_ids, seed) -> list:
    datasets = []
    for words, offsets, tags in self._ordered(client_ids, seed):
      x = dense_words(words, offsets, self._source.num_words)
      datasets.append(tf.data.Dataset.from_tensor_slices(
          (x, tags.astype(np.float32))).batch(self._batch_size))
    return datasets


class ClientTensors(_ClientData):
  """Sampled clients' training data as tensors (the fast path).

  `__call__(ids, seed)` returns per client the CSR words and the tags of its
  ordered examples: `(word_ids int32[w], word_offsets int64[n + 1],
  tags uint8[n, num_tags])`. `dataset_computation` (a TFF computation, run
  inside the round) makes of them the same batched dataset as
  `ClientDatasets`, bit for bit
  (`tests/experiments/stackoverflow_arrays_test.py`), at a fraction of the
  cost: TFF moves three tensors instead of a dataset graph with its data
  inlined.
  """

  def __call__(self, client_ids, seed) -> list:
    return self._ordered(client_ids, seed)

  @functools.cached_property
  def dataset_computation(self):
    """TFF computation: one client's tensors -> its batched dataset."""
    import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
    num_words = self._source.num_words
    num_tags = self._source.num_tags
    batch_size = self._batch_size

    @tff.tensorflow.computation(
        tff.TensorType(np.int32, [None]), tff.TensorType(np.int64, [None]),
        tff.TensorType(np.uint8, [None, num_tags]))
    def to_dataset(word_ids, word_offsets, tags):
      n = tf.shape(tags, out_type=tf.int64)[0]
      lengths = word_offsets[1:] - word_offsets[:-1]
      rows = tf.repeat(tf.range(n), lengths)
      # Counts are sums of ones (exact in float32), then one division per
      # row, as `dense_words` does in NumPy.
      counts = tf.scatter_nd(
          tf.stack([rows, tf.cast(word_ids, tf.int64)], axis=1),
          tf.ones_like(word_ids, tf.float32), tf.stack([n, num_words]))
      x = counts / tf.maximum(tf.cast(lengths, tf.float32), 1.0)[:, None]
      y = tf.cast(tags, tf.float32)
      dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size)
      return dataset.with_options(_plain_pipeline_options())

    return to_dataset


def load(data_dir: str, word_vocab, tag_vocab) -> dict:
  """{split: SplitArrays} for the SQLite file in `data_dir` (cached)."""
  sqlite_path = os.path.join(data_dir, stackoverflow_data.SQLITE_NAME)
  stat = os.stat(sqlite_path)
  key = hashlib.sha256(json.dumps(
      [_FORMAT, stat.st_size, stat.st_mtime_ns, list(word_vocab),
       list(tag_vocab)]).encode()).hexdigest()
  cache_path = os.path.join(data_dir, CACHE_NAME)
  if os.path.exists(cache_path):
    try:
      with np.load(cache_path, allow_pickle=False) as f:
        if str(f['key']) == key:
          return {s: _from_npz(f, s, len(word_vocab)) for s in SPLITS}
    except Exception:  # pylint: disable=broad-except
      pass  # A damaged cache (any error reading it) is rebuilt.
  splits = _build(sqlite_path, word_vocab, tag_vocab)
  arrays = {'key': np.array(key)}
  for name, split in splits.items():
    arrays[f'{name}/client_ids'] = np.array(split.client_ids)
    for field in ('example_offsets', 'word_offsets', 'word_ids', 'tags'):
      arrays[f'{name}/{field}'] = getattr(split, field)
  with atomic_files.replacing_path(cache_path, suffix='.npz') as tmp:
    np.savez(tmp, **arrays)
  return splits


def _from_npz(f, name, num_words):
  return SplitArrays(
      client_ids=tuple(str(c) for c in f[f'{name}/client_ids']),
      example_offsets=f[f'{name}/example_offsets'],
      word_offsets=f[f'{name}/word_offsets'], word_ids=f[f'{name}/word_ids'],
      tags=f[f'{name}/tags'], num_words=num_words)


def _build(sqlite_path, word_vocab, tag_vocab) -> dict:
  # Bytes throughout: tf.strings.split splits on ASCII whitespace only, as
  # bytes.split() does (str.split() also splits on Unicode spaces).
  word_id = {w.encode('utf-8'): i for i, w in enumerate(word_vocab)}
  tag_id = {t.encode('utf-8'): i for i, t in enumerate(tag_vocab)}
  connection = sqlite3.connect(f'file:{sqlite_path}?mode=ro', uri=True)
  try:
    rows = connection.execute(
        'SELECT split_name, client_id, serialized_example_proto FROM examples '
        'ORDER BY rowid').fetchall()
  finally:
    connection.close()
  grouped = {s: collections.OrderedDict() for s in SPLITS}
  for split, client_id, blob in rows:
    if split not in grouped:
      continue
    feature = tf.train.Example.FromString(blob).features.feature
    text = (feature['tokens'].bytes_list.value[0] + b' ' +
            feature['title'].bytes_list.value[0])
    words = [word_id[w] for w in text.split() if w in word_id]
    tags = [tag_id[t] for t in feature['tags'].bytes_list.value[0].split(b'|')
            if t in tag_id]
    grouped[split].setdefault(client_id, []).append((words, tags))
  return {s: _to_split(clients, len(word_vocab), len(tag_vocab))
          for s, clients in grouped.items()}


def _to_split(clients, num_words, num_tags) -> SplitArrays:
  examples = [e for client in clients.values() for e in client]
  example_offsets = np.cumsum([0] + [len(c) for c in clients.values()])
  word_offsets = np.cumsum([0] + [len(w) for w, _ in examples])
  word_ids = np.fromiter((i for w, _ in examples for i in w), np.int32,
                         count=int(word_offsets[-1]))
  tags = np.zeros((len(examples), num_tags), np.uint8)
  for j, (_, tag_ids) in enumerate(examples):
    # TFF sums one-hot tags: a repeated tag counts twice.
    np.add.at(tags[j], tag_ids, 1)
  return SplitArrays(tuple(clients), example_offsets.astype(np.int64),
                     word_offsets.astype(np.int64), word_ids, tags, num_words)


def _plain_pipeline_options() -> tf.data.Options:
  """tf.data options for a client's slice-and-batch pipeline.

  By default tf.data rewrites a pipeline with Grappler and starts its
  autotuner each time an iterator is made, i.e. once per client per round;
  for a two-op pipeline that is most of the cost of iterating it (17.8 ->
  9.3 ms per client's dataset made and read in one `tf.function`, one core).
  Neither changes the elements or their order.
  """
  options = tf.data.Options()
  options.experimental_optimization.apply_default_optimizations = False
  options.autotune.enabled = False
  return options
