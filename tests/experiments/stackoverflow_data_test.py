"""Tests of experiments.data.stackoverflow_data: the embedded StackOverflow
data, read back through TFF's loader."""

import os

import tensorflow as tf
import tensorflow_federated as tff

from experiments.data import stackoverflow_data
from tests import support

_TINY = support.TINY_STACKOVERFLOW


class StackOverflowDataTest(tf.test.TestCase):

  def test_round_trips_through_tff_loader(self):
    data_dir = self.create_tempdir().full_path
    stamp = stackoverflow_data.generate(data_dir, _TINY)
    train, heldout, test = tff.simulation.datasets.stackoverflow.load_data(
        cache_dir=data_dir)
    self.assertLen(train.client_ids, 40)
    self.assertLen(heldout.client_ids, 5)
    self.assertLen(test.client_ids, 15)
    num_examples = sum(
        int(train.create_tf_dataset_for_client(c).reduce(0, lambda n, _: n + 1))
        for c in train.client_ids)
    self.assertEqual(num_examples, stamp['stats']['train_examples'])
    example = next(iter(train.create_tf_dataset_for_client(
        train.client_ids[0])))
    self.assertCountEqual(
        example.keys(),
        ['creation_date', 'score', 'tags', 'title', 'tokens', 'type'])
    tags = example['tags'].numpy().decode().split('|')
    self.assertTrue(all(t.startswith('tag') for t in tags))
    with open(os.path.join(data_dir, 'datasets',
                           stackoverflow_data.WORD_COUNT_NAME)) as f:
      counts = [int(line.split()[1]) for line in f]
    self.assertEqual(counts, sorted(counts, reverse=True))
    self.assertLessEqual(max(counts), 40)  # distinct training users

  def test_deterministic_and_cached(self):
    a = self.create_tempdir().full_path
    b = self.create_tempdir().full_path
    stackoverflow_data.generate(a, _TINY)
    stackoverflow_data.generate(b, _TINY)
    ta = tff.simulation.datasets.stackoverflow.load_data(cache_dir=a)[0]
    tb = tff.simulation.datasets.stackoverflow.load_data(cache_dir=b)[0]
    first = lambda d: next(iter(d.create_tf_dataset_for_client(  # pylint: disable=g-long-lambda
        d.client_ids[7])))['tokens'].numpy()
    self.assertEqual(first(ta), first(tb))
    mtime = os.path.getmtime(os.path.join(a, stackoverflow_data.SQLITE_NAME))
    stackoverflow_data.generate(a, _TINY)  # Same config: not rewritten.
    self.assertEqual(
        mtime,
        os.path.getmtime(os.path.join(a, stackoverflow_data.SQLITE_NAME)))

  def test_heavy_tailed_client_sizes(self):
    data_dir = self.create_tempdir().full_path
    stamp = stackoverflow_data.generate(
        data_dir, dict(_TINY, train_clients=300, test_clients=2,
                       heldout_clients=2))
    stats = stamp['stats']
    # Log-normal sizes: the spread exceeds the mean, like the real data.
    self.assertGreater(stats['std_examples_per_client'],
                       stats['mean_examples_per_client'])

  def test_unknown_setting(self):
    with self.assertRaisesRegex(ValueError, 'Unknown embedded-data setting'):
      stackoverflow_data.generate(self.create_tempdir().full_path,
                                  dict(clients=3))


if __name__ == '__main__':
  tf.test.main()
