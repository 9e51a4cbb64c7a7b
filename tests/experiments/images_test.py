"""Real image data: the IDX reader, the paper's split, the image tasks."""

import gzip
import os
import re
import subprocess
import sys
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.data import images
from experiments.data import tasks
from experiments.data import task_types
from experiments.data import task_registry
from tests import support

_REPO = support.REPO


def write_image_set(folder, *, train=600, test=120, gz=True, seed=0):
  """Four small MNIST-shaped IDX files in `folder`; returns the arrays."""
  rng = np.random.default_rng(seed)
  arrays = dict(
      x_train=rng.integers(0, 256, (train, 28, 28)).astype(np.uint8),
      y_train=rng.integers(0, 10, train).astype(np.uint8),
      x_test=rng.integers(0, 256, (test, 28, 28)).astype(np.uint8),
      y_test=rng.integers(0, 10, test).astype(np.uint8))
  os.makedirs(folder, exist_ok=True)
  for key, name in images.IDX_FILES.items():
    images.write_idx(os.path.join(folder, name + ('.gz' if gz else '')),
                     arrays[key])
  return arrays


class IdxTest(tf.test.TestCase):

  def test_round_trip_plain_and_gzip(self):
    folder = self.create_tempdir().full_path
    for dtype in (np.uint8, np.int8, np.int16, np.int32, np.float32,
                  np.float64):
      array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
      for suffix in ('', '.gz'):
        path = os.path.join(folder, f'a_{np.dtype(dtype).name}{suffix}')
        images.write_idx(path, array)
        back = images.read_idx(path)
        self.assertEqual(back.dtype, array.dtype)
        self.assertAllEqual(back, array)

  def test_reads_the_published_layout(self):
    # LeCun's layout written by hand: magic 0x00000803, big-endian dims.
    path = os.path.join(self.create_tempdir().full_path, 'x-idx3-ubyte.gz')
    body = bytes(range(12))
    with gzip.open(path, 'wb') as f:
      f.write(b'\x00\x00\x08\x03' + (2).to_bytes(4, 'big') +
              (2).to_bytes(4, 'big') + (3).to_bytes(4, 'big') + body)
    self.assertAllEqual(images.read_idx(path),
                        np.arange(12, dtype=np.uint8).reshape(2, 2, 3))

  def test_bad_files_name_themselves(self):
    folder = self.create_tempdir().full_path
    cases = {
        'magic': b'\x01\x00\x08\x01' + (3).to_bytes(4, 'big') + b'abc',
        'type': b'\x00\x00\x07\x01' + (3).to_bytes(4, 'big') + b'abc',
        'short': b'\x00\x00\x08\x01' + (4).to_bytes(4, 'big') + b'abc',
        'header': b'\x00\x00\x08\x03' + b'\x00\x00',
    }
    messages = {'magic': 'not an IDX file', 'type': 'unknown IDX type',
                'short': '3 bytes of data, the header (4,) says 4',
                'header': 'truncated header'}
    for name, data in cases.items():
      path = os.path.join(folder, name)
      with open(path, 'wb') as f:
        f.write(data)
      with self.assertRaisesRegex(images.IdxError,
                                  re.escape(f'{path}: {messages[name]}')):
        images.read_idx(path)

  def test_folders_are_searched_in_order(self):
    root = self.create_tempdir().full_path
    first, second = os.path.join(root, 'a'), os.path.join(root, 'b')
    write_image_set(second)
    write_image_set(first, gz=False, seed=1)
    self.assertEqual(images.find_idx_folder([root, first, second]), first)
    os.remove(os.path.join(first, images.IDX_FILES['y_test']))
    self.assertEqual(images.find_idx_folder([root, first, second]), second)
    self.assertIsNone(images.find_idx_folder([root, first]))
    self.assertEqual(images.fashion_mnist_folders('d'),
                     ['d', os.path.join('d', 'fashion-mnist'),
                      images.KERAS_FASHION_MNIST, images.DEBIAN_FASHION_MNIST])


class PaperSplitTest(tf.test.TestCase):

  def test_sizes_labels_and_coverage(self):
    labels = np.random.default_rng(3).integers(10, size=50_000)
    sds = []
    for seed in range(4):
      parts = images.paper_split(labels, seed=seed)
      self.assertLen(parts, 100)
      everything = np.concatenate(parts)
      self.assertLen(everything, 50_000)  # Every example exactly once.
      self.assertLen(np.unique(everything), 50_000)
      sizes = np.array([len(p) for p in parts])
      self.assertEqual(sizes.mean(), 500)
      sds.append(sizes.std(ddof=1))
      # Non-i.i.d.: with Dir(1.0) proportions a client's largest class holds
      # about 29% of its examples, against 10% for an i.i.d. split.
      largest = np.mean([np.bincount(labels[p], minlength=10).max() / len(p)
                         for p in parts])
      self.assertGreater(largest, 0.22)
    # The paper's 73.1: the sample sd of 100 sizes has a relative standard
    # error near 1 / sqrt(2 * 99) = 7%; four seeds average within 15%.
    self.assertBetween(np.mean(sds), 0.85 * 73.1, 1.15 * 73.1)
    self.assertAllEqual(images.paper_split(labels, seed=1)[7],
                        images.paper_split(labels, seed=1)[7])

  def test_size_concentration(self):
    beta = images.size_concentration(100, 73.1 / 500)
    draws = np.random.default_rng(0).dirichlet(np.full(100, beta),
                                               size=200) * 50_000
    # 20,000 sizes: the sd is within 2% of its target.
    self.assertAllClose(draws.std(ddof=1), 73.1, rtol=0.02)


class ImageTaskTest(tf.test.TestCase):

  def test_fashion_mnist_reads_real_files_with_the_paper_split(self):
    folder = self.create_tempdir().full_path
    arrays = write_image_set(os.path.join(folder, 'fashion-mnist'))
    task = tasks.create_task('fashion_mnist', folder)
    self.assertEqual(task.data_source, 'real')
    self.assertIn('Fashion-MNIST (real images', task.data_note)
    self.assertEqual(task.population, 100)
    data = task.baseline.datasets
    train = data.train_data
    total = sum(len(list(train.create_tf_dataset_for_client(c)))
                for c in train.client_ids)
    self.assertEqual(total, 500)  # Five sixths of 600.
    validation = list(data.validation_data.create_tf_dataset_from_all_clients(
    ).as_numpy_iterator())
    self.assertLen(validation, 100)  # The last sixth.
    self.assertAllClose(validation[0]['x'][..., 0],
                        arrays['x_train'][500] / 255.0)
    weights = task.baseline.model_fn()
    del weights
    self.assertEqual(
        task_registry.get('fashion_mnist').defaults.clients_per_round, 10)

  def test_round_tensors_make_the_clients_datasets(self):
    folder = self.create_tempdir().full_path
    arrays = write_image_set(folder, gz=False)
    task = tasks.create_task('fashion_mnist', folder)
    ids = ['client_004', 'client_071', 'client_004']
    tensors = task.round_input(ids, [7, 1, 2])
    self.assertLen(tensors, 3)
    # Seeded: the same seed, the same order.
    again = task.round_input(ids, [7, 1, 2])
    self.assertAllEqual(tensors[0][0], again[0][0])
    reference = task.baseline.datasets.train_data
    for client, (x, y) in zip(ids, tensors):
      self.assertEqual((x.dtype, x.shape[1:]), (np.float32, (28, 28, 1)))
      mine = list(reference.create_tf_dataset_for_client(client)
                  .as_numpy_iterator())
      # The same examples as the client's dataset, in another order.
      expected = sorted(int(e['y']) for e in mine)
      self.assertEqual(sorted(y.tolist()), expected)
      # The reference path's arrays, bit for bit.
      self.assertEqual(sorted(map(bytes, x)),
                       sorted(bytes(e['x']) for e in mine))
      batches = list(task.client_data.dataset_computation(x, y))
      first_x, first_y = batches[0]
      self.assertEqual(first_x.shape[1:], (28, 28, 1))
      self.assertLessEqual(len(first_y), 20)
      self.assertAllEqual(np.concatenate([b[0] for b in batches]), x)
      self.assertAllEqual(np.concatenate([b[1] for b in batches]), y)
    del arrays

  def test_mnist_reads_idx_files_too(self):
    folder = self.create_tempdir().full_path
    write_image_set(folder, gz=False)
    task = tasks.create_task('mnist', folder)
    self.assertIn('MNIST (real images) from', task.data_note)
    self.assertEqual(task.population, 100)

  def test_model_only_task_has_the_model_and_clients_without_images(self):
    folder = self.create_tempdir().full_path
    write_image_set(folder, gz=False)
    full = tasks.create_task('mnist', folder)
    empty = self.create_tempdir().full_path
    for name in ('mnist', 'fashion_mnist'):
      bare = tasks.create_task(name, empty, model_only=True)
      self.assertEqual(bare.population, full.population)
      self.assertEqual(list(bare.train_client_ids),
                       list(full.train_client_ids))
      self.assertEqual(
          tff.learning.models.weights_type_from_model(bare.baseline.model_fn),
          tff.learning.models.weights_type_from_model(full.baseline.model_fn))
    with self.assertRaisesRegex(ValueError, 'model_only: the digits task'):
      tasks.create_task('digits', empty, model_only=True)

  def test_missing_files_give_one_line_and_exit_2(self):
    empty = self.create_tempdir().full_path
    with mock.patch.object(images, 'KERAS_FASHION_MNIST',
                           os.path.join(empty, 'keras')), \
        mock.patch.object(images, 'DEBIAN_FASHION_MNIST',
                          os.path.join(empty, 'debian')):
      with self.assertRaisesRegex(task_types.MissingDataError,
                                  'apt-get install dataset-fashion-mnist'):
        tasks.create_task('fashion_mnist', empty)
    # The command line, with Debian's folder moved away (it may be
    # installed on this machine) and HOME empty (no Keras cache).
    code = ('import runpy, sys; from experiments.data import images; '
            f'images.DEBIAN_FASHION_MNIST = {os.path.join(empty, "debian")!r}; '
            "sys.argv = ['run', '--task=fashion_mnist', "
            f"'--data_dir={empty}', '--output_dir={empty}/out']; "
            "runpy.run_module('experiments.run', run_name='__main__')")
    result = subprocess.run(
        [sys.executable, '-c', code], cwd=_REPO,
        env=dict(os.environ, HOME=empty), capture_output=True, text=True,
        timeout=300, check=False)
    self.assertEqual(result.returncode, 2, result.stderr[-2000:])
    lines = [l for l in result.stderr.splitlines() if l.startswith('error:')]
    self.assertLen(lines, 1)
    for place in (empty, '.keras/datasets/fashion-mnist',
                  os.path.join(empty, 'debian'),
                  'apt-get install dataset-fashion-mnist'):
      self.assertIn(place, lines[0])


if __name__ == '__main__':
  tf.test.main()
