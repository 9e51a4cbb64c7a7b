"""Tests of experiments.data.image_tasks: the Dirichlet split, and the digits
task's clients, validation and test data and its shared dataset computation."""

import numpy as np
from sklearn import datasets as sk_datasets
import tensorflow as tf
import tensorflow_federated as tff

from experiments.data import evaluation
from experiments.data import image_tasks
from experiments.data import tasks
from tests import support

_TINY = support.TINY_STACKOVERFLOW


class DirichletSplitTest(tf.test.TestCase):

  def test_partition(self):
    labels = np.repeat(np.arange(10), 50)
    parts = image_tasks.dirichlet_split(labels, 20, 1.0, seed=0)
    self.assertLen(parts, 20)
    joined = np.sort(np.concatenate(parts))
    np.testing.assert_array_equal(joined, np.arange(500))
    self.assertTrue(all(len(p) > 0 for p in parts))


class DigitsSplitTest(tf.test.TestCase):

  def test_clients_validation_and_test_partition_the_dataset(self):
    task = tasks.create_task('digits', self.create_tempdir().full_path)
    data = task.baseline.datasets

    def rows(dataset):
      return [(e['x'].tobytes(), int(e['y']))
              for e in dataset.as_numpy_iterator()]

    train = [r for client in data.train_data.client_ids
             for r in rows(data.train_data.create_tf_dataset_for_client(
                 client))]
    validation = rows(
        data.validation_data.create_tf_dataset_from_all_clients())
    test = rows(data.test_data)
    self.assertLen(data.train_data.client_ids, 100)
    self.assertEqual((len(train), len(validation), len(test)),
                     (1257, 180, 360))
    digits = sk_datasets.load_digits()
    everything = [
        ((x.astype(np.float32) / 16.0)[..., None].tobytes(), int(y))
        for x, y in zip(digits.images, digits.target)]
    self.assertCountEqual(train + validation + test, everything)
    weights = tff.learning.models.ModelWeights.from_model(
        task.baseline.model_fn())
    self.assertEqual(
        evaluation.evaluate(task, weights, split='validation')['num_examples'],
        180)

  def test_tasks_of_one_key_share_their_dataset_computation(self):
    data_dir = self.create_tempdir().full_path
    first, again = (tasks.create_task('digits', data_dir) for _ in range(2))
    other = tasks.create_task('digits', data_dir, seed=1)
    self.assertIs(again.dataset_computation, first.dataset_computation)
    self.assertIsNot(other.dataset_computation, first.dataset_computation)
    # The shared one gives the clients' datasets that the second task's own
    # computation gives (batches, order and all).
    data = again.baseline.datasets
    own = data.train_data.preprocess(
        data.train_preprocess_fn).dataset_computation
    for client in ('client_000', 'client_042', 'client_099'):
      shared = list(first.dataset_computation(client).as_numpy_iterator())
      want = list(own(client).as_numpy_iterator())
      self.assertNotEmpty(want)
      self.assertLen(shared, len(want))
      for (x, y), (want_x, want_y) in zip(shared, want):
        self.assertAllEqual(x, want_x)
        self.assertAllEqual(y, want_y)
    self.assertIsNone(tasks.create_task(
        'stackoverflow_lr', data_dir, embedded_config=_TINY).dataset_key)


if __name__ == '__main__':
  tf.test.main()
