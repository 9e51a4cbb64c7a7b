"""What the runs of one process compute alike, computed once.

The runs of a `training.run` (or of one of its jobs) share a seed's inputs:
every aggregator starts from the same model (R', a function of the seed),
and aggregators that sample alike (`AggregatorSpec.sampling`) draw the same
clients each round, whose examples are ordered by the same seed
(`sampling.client_data_seed`). A `RunCache` keeps the round inputs and the
evaluations those runs would otherwise each compute again. Both are pure
functions of their keys (the clients and the seed; the model's values bit
for bit), so a run gets from the cache exactly what it would compute.
"""

import collections
import hashlib
from typing import Optional

import numpy as np
import tensorflow as tf

from experiments.data import evaluation

# Round inputs kept at most (bytes): the main job's rounds take about 150 KB
# each, and an aggregator's seeds are trained before the next aggregator's.
ROUND_INPUT_BYTES = 256 * 2**20
# Evaluations kept at most (each a few floats).
EVALUATIONS = 1024


class RunCache:
  """Round inputs and evaluations of one task, least recently used first out.

  Args:
    task: The task whose inputs and evaluations are kept.
    max_input_bytes: The round inputs' budget (their arrays' bytes).
    max_evaluations: How many evaluations are kept.
  """

  def __init__(self, task, max_input_bytes: int = ROUND_INPUT_BYTES,
               max_evaluations: int = EVALUATIONS):
    self._task = task
    self._max_input_bytes = max_input_bytes
    self._max_evaluations = max_evaluations
    self._inputs = collections.OrderedDict()
    self._input_bytes = 0
    self._evaluations = collections.OrderedDict()
    self.hits = collections.Counter()

  def round_input(self, client_ids, seed) -> list:
    """`task.round_input(client_ids, seed)`, made once per clients and seed.

    Tasks whose round input is the clients' ids (TFF builds their datasets
    inside the round) are not kept: there is nothing to save.
    """
    if self._task.client_data is None:
      return self._task.round_input(client_ids, seed)
    key = (tuple(str(c) for c in client_ids), _seed_key(seed))
    if key in self._inputs:
      self._inputs.move_to_end(key)
      self.hits['round input'] += 1
      return self._inputs[key][0]
    value = self._task.round_input(client_ids, seed)
    size = sum(np.asarray(a).nbytes for a in tf.nest.flatten(value))
    if size <= self._max_input_bytes:
      self._inputs[key] = (value, size)
      self._input_bytes += size
      while self._input_bytes > self._max_input_bytes:
        _, (_, dropped) = self._inputs.popitem(last=False)
        self._input_bytes -= dropped
    return value

  def evaluate(self, model_weights, max_examples: Optional[int] = None,
               split: str = 'test') -> dict:
    """`evaluation.evaluate` of the task, once per model (bit for bit)."""
    key = (weights_digest(model_weights), max_examples, split)
    if key in self._evaluations:
      self._evaluations.move_to_end(key)
      self.hits['evaluation'] += 1
      return dict(self._evaluations[key])
    metrics = evaluation.evaluate(self._task, model_weights,
                                  max_examples=max_examples, split=split)
    self._evaluations[key] = dict(metrics)
    if len(self._evaluations) > self._max_evaluations:
      self._evaluations.popitem(last=False)
    return metrics


def weights_digest(model_weights) -> str:
  """SHA-256 of a model's values: dtype, shape and bytes of every array."""
  digest = hashlib.sha256()
  for leaf in tf.nest.flatten((list(model_weights.trainable),
                               list(model_weights.non_trainable))):
    array = np.asarray(leaf)
    digest.update(array.dtype.str.encode())
    digest.update(str(array.shape).encode())
    digest.update(np.ascontiguousarray(array).tobytes())
  return digest.hexdigest()


def _seed_key(seed):
  """A hashable form of a seed (an int or a sequence of ints)."""
  if isinstance(seed, (list, tuple, np.ndarray)):
    return tuple(int(s) for s in seed)
  return int(seed)
