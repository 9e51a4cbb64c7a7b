"""StackOverflow tag prediction as in-memory arrays (the embedded data's fast path).

TFF's SO-LR pipeline reads every sampled client from SQLite and maps each
example through string splitting and vocabulary lookups inside the round
(`tag_prediction_preprocessing.build_to_ids_fn`): 37 ms per client here, more
than the client's training. This module applies the same preprocessing once per
split, in NumPy, and keeps the result in compressed sparse rows:

*   x: the bag of words of `tokens + ' ' + title`, counts of in-vocabulary
    words divided by their total (all zeros when there is none);
*   y: the multi-hot vector of in-vocabulary tags.

These are exactly TFF's `(tokens, tags)` tensors; `tests/experiments_test.py`
checks them element by element against `build_to_ids_fn` on every example of
sampled clients. A client's training dataset is then shuffled (TFF's default
buffer of 1000), truncated to `max_elements` and batched, as TFF's
`create_preprocess_fn` does.

The arrays are cached next to the SQLite file (`stackoverflow_arrays.npz`),
keyed by the file's size and modification time and by the vocabularies.
"""

import collections
import dataclasses
import hashlib
import json
import os
import sqlite3

import numpy as np
import tensorflow as tf

from experiments.data import stackoverflow_data

CACHE_NAME = 'stackoverflow_arrays.npz'
SPLITS = ('train', 'heldout', 'test')
SHUFFLE_BUFFER = 1000  # TFF's stackoverflow constants.DEFAULT_SHUFFLE_BUFFER_SIZE
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


class ClientDatasets:
  """Builds sampled clients' training datasets from `SplitArrays`."""

  def __init__(self, split: SplitArrays, batch_size: int, max_elements: int):
    self._split = split
    self._index = split.client_index()
    self._batch_size = batch_size
    self._max_elements = max_elements

  def __call__(self, client_ids) -> list:
    datasets = []
    for client_id in client_ids:
      x, y = self._split.client_dense(self._index[str(client_id)])
      datasets.append(
          tf.data.Dataset.from_tensor_slices((x, y)).shuffle(
              SHUFFLE_BUFFER).take(self._max_elements).batch(
                  self._batch_size))
    return datasets


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
  tmp = cache_path + f'.tmp{os.getpid()}.npz'
  np.savez(tmp, **arrays)
  os.replace(tmp, cache_path)
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
