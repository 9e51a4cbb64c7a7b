"""Centralized evaluation of a task's model on its test or validation split.

Metrics are computed here from the model's predictions: TFF's Keras metric
finalizers create variables inside a `tf.function` and cannot be called
twice in one process.
"""

from typing import Optional

import numpy as np
import tensorflow as tf

from experiments.data import tasks as tasks_lib

EVAL_BATCH = 2048


def evaluate(task: tasks_lib.Task, model_weights,
             max_examples: Optional[int] = None,
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


def evaluate_with_model(task: tasks_lib.Task, model_weights,
                        data) -> dict[str, float]:
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
    loss_sum += loss if task.spec.loss_summed_over_batch else loss * num
    count += num
    metric.update_state(batch[1], output.predictions)
  return {task.metric: float(metric.result()),
          'loss': loss_sum / max(count, 1), 'num_examples': count}


def _evaluator(task: tasks_lib.Task):
  """(model, its traced forward pass) for evaluation, made once per task.

  Tracing the forward pass costs about 0.3 s, more than evaluating the
  digits' test split; a run evaluates every `eval_every` rounds. The model
  is built eagerly and only its variables change between calls
  (`assign_weights_to`), so TFF's later tracing of other models in graphs
  does not touch it (`tests/experiments/evaluation_test.py`).
  """
  # pylint: disable=protected-access
  if task._evaluator is None:
    model = task.baseline.model_fn()
    task._evaluator = (model, tf.function(
        lambda batch: model.forward_pass(batch, training=False),
        reduce_retracing=True))
  return task._evaluator


def _evaluate_logistic_regression(task, model_weights, arrays, max_examples):
  """`evaluate` for TFF's SO-LR model on arrays, in NumPy (30x faster).

  The model is one sigmoid Dense layer (kernel, bias) with a summed binary
  cross-entropy; `tests/experiments/stackoverflow_arrays_test.py` checks
  this against the model's `forward_pass` and Keras' Recall(top_k=5).
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


def _eval_data(task: tasks_lib.Task, split: str, max_examples=None):
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


def frequent_tags_recall_at_5(task: tasks_lib.Task,
                              split: str = 'test') -> float:
  """Recall@5 of always predicting the 5 most frequent tags (SO-LR only).

  The tag vocabulary is ordered by training frequency, so these are tags 0-4.
  """
  if not task.spec.frequent_tags:
    raise ValueError(f'Only for tasks with tags (stackoverflow_lr), found '
                     f'{task.name!r}.')
  metric = tf.keras.metrics.Recall(top_k=5)
  for _, y in _eval_data(task, split):
    num_tags = int(y.shape[-1])
    scores = tf.concat([tf.ones([5]), tf.zeros([num_tags - 5])], axis=0)
    metric.update_state(y, tf.tile(scores[None], [tf.shape(y)[0], 1]))
  return float(metric.result())
