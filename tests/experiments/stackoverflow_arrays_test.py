"""The SO-LR arrays fast path equals TFF's preprocessing and evaluation."""

import os

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.simulation.baselines.stackoverflow import (
    tag_prediction_preprocessing)

from experiments.data import stackoverflow_arrays
from experiments.data import stackoverflow_data
from experiments.data import tasks
from experiments.data import stackoverflow_task
from experiments.data import evaluation

_TINY = dict(seed=5, train_clients=30, heldout_clients=6, test_clients=10,
             num_words=300, num_tags=30, num_topics=6, mean_examples=12.0,
             std_examples=30.0, max_examples=200)


class StackOverflowArraysTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = os.path.join(tf.compat.v1.test.get_temp_dir(), 'so_arrays')
    stackoverflow_data.generate(cls.data_dir, _TINY)
    # A vocabulary smaller than the data's: out-of-vocabulary words and tags
    # occur, and must be dropped exactly as TFF drops them.
    cls.task = tasks.create_task('stackoverflow_lr', cls.data_dir,
                                 embedded_config=_TINY)
    cls.words, cls.tags = stackoverflow_task.vocab(cls.data_dir, 120, 12)  # pylint: disable=protected-access

  def test_every_example_equals_tff_to_ids(self):
    arrays = stackoverflow_arrays.load(self.data_dir, self.words, self.tags)
    to_ids = tag_prediction_preprocessing.build_to_ids_fn(self.words,
                                                          self.tags)
    raw = tff_splits(self.task)
    for split in stackoverflow_arrays.SPLITS:
      split_arrays = arrays[split]
      self.assertCountEqual(split_arrays.client_ids, raw[split].client_ids)
      # Every example of 4 clients per split, the largest among them (TFF
      # reads each client through SQLite: about a second each).
      sizes = np.diff(split_arrays.example_offsets)
      chosen = [int(np.argmax(sizes))] + list(
          np.random.default_rng(1).choice(len(sizes), 3, replace=False))
      for index in chosen:
        client_id = split_arrays.client_ids[index]
        x, y = split_arrays.client_dense(index)
        ref = list(raw[split].create_tf_dataset_for_client(client_id).map(
            to_ids).batch(10000))[0]
        # Exact: the same float32 division of the same counts.
        np.testing.assert_array_equal(x, ref[0].numpy(), err_msg=client_id)
        np.testing.assert_array_equal(y, ref[1].numpy(), err_msg=client_id)

  def test_cache_is_reused_and_rebuilt_for_another_vocabulary(self):
    first = stackoverflow_arrays.load(self.data_dir, self.words, self.tags)
    path = os.path.join(self.data_dir, stackoverflow_arrays.CACHE_NAME)
    mtime = os.stat(path).st_mtime_ns
    again = stackoverflow_arrays.load(self.data_dir, self.words, self.tags)
    self.assertEqual(os.stat(path).st_mtime_ns, mtime)
    np.testing.assert_array_equal(first['train'].word_ids,
                                  again['train'].word_ids)
    other = stackoverflow_arrays.load(self.data_dir, self.words[:50],
                                      self.tags)
    self.assertEqual(other['train'].num_words, 50)
    self.assertLess(len(other['train'].word_ids),
                    len(first['train'].word_ids))

  def test_damaged_cache_is_rebuilt(self):
    directory = self.create_tempdir().full_path
    stackoverflow_data.generate(directory, _TINY)
    with open(os.path.join(directory, stackoverflow_arrays.CACHE_NAME),
              'wb') as f:
      f.write(b'not an npz')
    arrays = stackoverflow_arrays.load(directory, self.words, self.tags)
    self.assertLen(arrays['train'].client_ids, _TINY['train_clients'])

  def test_client_datasets_order_truncate_and_batch(self):
    arrays = stackoverflow_arrays.load(self.data_dir, self.words, self.tags)
    train = arrays['train']
    sizes = np.diff(train.example_offsets)
    big = int(np.argmax(sizes))
    datasets = stackoverflow_arrays.ClientDatasets(train, batch_size=4,
                                                   max_elements=7)
    self.assertGreaterEqual(sizes[big], 8)
    (dataset,) = datasets([train.client_ids[big]], seed=3)
    batches = list(dataset)
    self.assertEqual([int(b[0].shape[0]) for b in batches], [4, 3])
    x, y = train.client_dense(big)
    (order,) = stackoverflow_arrays.client_orders([sizes[big]], 7, seed=3)
    np.testing.assert_array_equal(
        np.concatenate([b[0].numpy() for b in batches]), x[order])
    np.testing.assert_array_equal(
        np.concatenate([b[1].numpy() for b in batches]), y[order])
    # Seeded: the same seed, the same order; another seed, another order.
    (again,) = datasets([train.client_ids[big]], seed=3)
    for b, c in zip(batches, again):
      np.testing.assert_array_equal(b[0], c[0])
    (other,) = stackoverflow_arrays.client_orders([sizes[big]], 7, seed=4)
    self.assertFalse(np.array_equal(order, other))

  def test_client_orders_are_uniform_permutations(self):
    # Where each of 3 examples lands first, over 6000 draws: 1/3 each
    # (4 standard errors of a binomial proportion).
    orders = stackoverflow_arrays.client_orders([3] * 6000, 1000, seed=0)
    firsts = np.bincount([o[0] for o in orders], minlength=3) / 6000
    self.assertAllClose(firsts, [1 / 3] * 3,
                        atol=4 * np.sqrt(1 / 3 * 2 / 3 / 6000))
    self.assertTrue(all(sorted(o) == [0, 1, 2] for o in orders[:50]))

  def test_tensors_make_the_datasets_bit_for_bit(self):
    arrays = stackoverflow_arrays.load(self.data_dir, self.words, self.tags)
    train = arrays['train']
    tensors = stackoverflow_arrays.ClientTensors(train, batch_size=5,
                                                 max_elements=9)
    reference = stackoverflow_arrays.ClientDatasets(train, batch_size=5,
                                                    max_elements=9)
    sizes = np.diff(train.example_offsets)
    ids = [train.client_ids[int(np.argmax(sizes))], train.client_ids[0],
           train.client_ids[1]]
    to_dataset = tensors.dataset_computation
    for inputs, dataset in zip(tensors(ids, seed=7), reference(ids, seed=7)):
      built = list(to_dataset(*inputs))
      expected = list(dataset)
      self.assertEqual(len(built), len(expected))
      for b, e in zip(built, expected):
        np.testing.assert_array_equal(b[0], e[0].numpy())
        np.testing.assert_array_equal(b[1], e[1].numpy())
    with self.assertRaisesRegex(ValueError, "'nobody' is not a training"):
      tensors(['nobody'], seed=0)

  def test_task_uses_the_arrays_for_rounds_and_evaluation(self):
    self.assertIsNotNone(self.task.client_data)
    ids = self.task.train_client_ids[:3]
    self.assertLen(self.task.round_input(ids, seed=0), 3)
    x, y = self.task.eval_arrays('test')
    words, tags = stackoverflow_task.vocab(  # pylint: disable=protected-access
        self.data_dir, stackoverflow_task.EMBEDDED_WORD_VOCAB,
        stackoverflow_task.EMBEDDED_TAG_VOCAB)
    self.assertEqual(x.shape, (self.task.arrays['test'].num_examples,
                               len(words)))
    self.assertEqual(y.shape[1], len(tags))
    with self.assertRaisesRegex(ValueError, "split must be 'test' or"):
      evaluation.evaluate(self.task, None, split='train')


  def test_numpy_evaluation_equals_the_models_forward_pass(self):
    rng = np.random.default_rng(0)
    weights = tff.learning.models.ModelWeights.from_model(
        self.task.baseline.model_fn())
    shapes = [np.shape(w) for w in weights.trainable]
    # Spread logits (the top 5 matter); all zeros (every score ties: Keras
    # takes the lowest indices, the most frequent tags); saturated sigmoids
    # (large logits round to probability 1.0 and tie again).
    cases = {
        'spread': [rng.normal(size=s) for s in shapes],
        'zeros': [np.zeros(s) for s in shapes],
        'saturated': [40.0 * np.abs(rng.normal(size=s)) for s in shapes],
    }
    for case, trainable in cases.items():
      case_weights = tff.learning.models.ModelWeights(
          trainable=[t.astype(np.float32) for t in trainable],
          non_trainable=list(weights.non_trainable))
      for split in ('test', 'validation'):
        fast = evaluation.evaluate(self.task, case_weights, split=split)
        data = evaluation._eval_data(self.task, split)  # pylint: disable=protected-access
        slow = evaluation.evaluate_with_model(self.task, case_weights, data)
        self.assertEqual(fast['num_examples'], slow['num_examples'])
        self.assertAllClose(fast['recall_at_5'], slow['recall_at_5'],
                            rtol=1e-6, msg=f'{case} {split}')
        # Saturated sigmoids: TF's float32 logistic and NumPy's differ in
        # the last bit next to 1.0, which the clipped logs magnify (0.6%).
        self.assertAllClose(fast['loss'], slow['loss'],
                            rtol=1e-2 if case == 'saturated' else 1e-4,
                            msg=f'{case} {split}')
    zero_recall = evaluation.evaluate(
        self.task, tff.learning.models.ModelWeights(
            trainable=[np.zeros(s, np.float32) for s in shapes],
            non_trainable=list(weights.non_trainable)))['recall_at_5']
    self.assertAllClose(zero_recall,
                        evaluation.frequent_tags_recall_at_5(self.task))


def tff_splits(task):
  datasets = task.baseline.datasets
  return dict(train=datasets.train_data, heldout=datasets.validation_data,
              test=datasets.test_data)


if __name__ == '__main__':
  tf.test.main()
