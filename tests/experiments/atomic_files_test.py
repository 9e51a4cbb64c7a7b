"""Tests for experiments.infra.atomic_files."""

import json
import os
import stat

from absl.testing import absltest

from experiments.infra import atomic_files


class AtomicFilesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = self.create_tempdir().full_path
    self.path = os.path.join(self.folder, 'out.json')

  def _leftovers(self):
    return sorted(set(os.listdir(self.folder)) - {'out.json'})

  def test_write_csv_takes_every_key_in_first_seen_order(self):
    path = os.path.join(self.create_tempdir().full_path, 'rows.csv')
    rows = [dict(a=1, b=2.5, params={'x': 1}), dict(a=3, c='z')]
    self.assertEqual(atomic_files.write_csv(path, rows, leave_out=('params',)),
                     path)
    with open(path) as f:
      self.assertEqual(f.read().splitlines(), ['a,b,c', '1,2.5,', '3,,z'])

  def test_write_json_replaces_the_file(self):
    atomic_files.write_json(self.path, {'a': 1})
    self.assertEqual(atomic_files.write_json(self.path, [2, 3]), self.path)
    with open(self.path) as f:
      self.assertEqual(json.load(f), [2, 3])
    self.assertEqual(self._leftovers(), [])

  def test_unserialisable_value_leaves_the_old_file(self):
    atomic_files.write_json(self.path, {'a': 1})
    with self.assertRaises(TypeError):
      atomic_files.write_json(self.path, {'a': object()})
    with open(self.path) as f:
      self.assertEqual(json.load(f), {'a': 1})
    self.assertEqual(self._leftovers(), [])

  def test_failure_mid_write_leaves_the_old_file_and_no_temporary(self):
    atomic_files.write_text(self.path, 'old')
    with self.assertRaisesRegex(RuntimeError, 'killed'):
      with atomic_files.replacing(self.path) as f:
        f.write('half of the new')
        raise RuntimeError('killed')
    with open(self.path) as f:
      self.assertEqual(f.read(), 'old')
    self.assertEqual(self._leftovers(), [])

  def test_target_untouched_until_the_block_ends(self):
    atomic_files.write_text(self.path, 'old')
    with atomic_files.replacing(self.path) as f:
      f.write('new')
      f.flush()
      with open(self.path) as g:
        self.assertEqual(g.read(), 'old')
    with open(self.path) as f:
      self.assertEqual(f.read(), 'new')

  def test_replacing_path_keeps_the_suffix_and_makes_the_folder(self):
    path = os.path.join(self.folder, 'sub', 'figure.png')
    with atomic_files.replacing_path(path, suffix='.png') as tmp:
      self.assertTrue(tmp.endswith('.png'))
      self.assertEqual(os.path.dirname(tmp), os.path.dirname(path))
      with open(tmp, 'wb') as f:
        f.write(b'png')
    with open(path, 'rb') as f:
      self.assertEqual(f.read(), b'png')
    self.assertEqual(os.listdir(os.path.dirname(path)), ['figure.png'])

  def test_writer_that_writes_nothing_leaves_no_file(self):
    with self.assertRaises(FileNotFoundError):
      with atomic_files.replacing_path(self.path):
        pass  # The writer never created its temporary file.
    self.assertFalse(os.path.exists(self.path))

  def test_permissions_are_those_of_a_plain_file(self):
    plain = os.path.join(self.folder, 'plain')
    with open(plain, 'w') as f:
      f.write('x')
    atomic_files.write_text(self.path, 'x')
    self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode),
                     stat.S_IMODE(os.stat(plain).st_mode))

  def test_bad_mode_is_named(self):
    with self.assertRaisesRegex(ValueError, "mode must be 'w' or 'wb', "
                                "found 'a'"):
      with atomic_files.replacing(self.path, mode='a'):
        pass


if __name__ == '__main__':
  absltest.main()
