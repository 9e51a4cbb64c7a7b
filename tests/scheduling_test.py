"""Tests for the suite's order under xdist's work stealing (`scheduling`)."""

import json
import random

from absl.testing import parameterized
import tensorflow as tf

from tests import scheduling


def _ids():
  """A collection: two classes, module-level tests, a parameterized one."""
  ids = [f'tests/a_test.py::Fast::test_{n}' for n in range(6)]
  ids += ['tests/a_test.py::Slow::test_x', 'tests/a_test.py::Slow::test_y']
  ids += [f'tests/b_test.py::test_case[{n}]' for n in range(5)]
  ids += ['tests/c_test.py::test_long', 'tests/c_test.py::test_short']
  ids += [f'tests/d_test.py::Big::test_{n}' for n in range(3)]
  return ids


_COSTS = {'tests/a_test.py::Slow::test_x': 30.0,
          'tests/a_test.py::Slow::test_y': 25.0,
          'tests/c_test.py::test_long': 50.0,
          'tests/d_test.py::Big::test_0': 40.0}


def _shares(ids, workers):
  shares, start = [], 0
  for size in scheduling.share_sizes(len(ids), workers):
    shares.append(ids[start:start + size])
    start += size
  return shares


def _load(share, costs):
  return sum(costs.get(i, scheduling.DEFAULT_COST) for i in share)


class OrderTest(parameterized.TestCase):

  @parameterized.parameters(1, 2, 3, 5)
  def test_a_permutation_whatever_the_costs(self, workers):
    rng = random.Random(workers)
    ids = _ids()
    costs = {i: rng.choice([0.1, 3.0, 12.0, 60.0]) for i in ids
             if rng.random() < 0.7}
    got = scheduling.order(ids, workers, costs)
    self.assertCountEqual(got, ids)
    self.assertLen(got, len(ids))

  def test_long_units_first_longest_to_the_least_loaded(self):
    got = scheduling.order(_ids(), 2, _COSTS)
    first, second = _shares(got, 2)
    # LPT: Slow's 55 s (a class, together) to share 0, c_test's 50 s to
    # share 1, then Big's 41 s to share 1, the less loaded (50 < 55).
    self.assertEqual(first[:2], ['tests/a_test.py::Slow::test_x',
                                 'tests/a_test.py::Slow::test_y'])
    self.assertEqual(second[:4], ['tests/c_test.py::test_long',
                                  'tests/d_test.py::Big::test_0',
                                  'tests/d_test.py::Big::test_1',
                                  'tests/d_test.py::Big::test_2'])
    self.assertLessEqual(abs(_load(first, _COSTS) - _load(second, _COSTS)),
                         max(_COSTS.values()))

  def test_short_tests_keep_their_collection_order(self):
    ids = _ids()
    got = scheduling.order(ids, 2, _COSTS)
    short = [i for i in ids if scheduling.unit_of(i) not in
             {'tests/c_test.py::test_long', 'tests/a_test.py::Slow',
              'tests/d_test.py::Big'}]
    self.assertEqual([i for i in got if i in short], short)

  def test_a_class_stays_in_one_share(self):
    ids = _ids()
    got = scheduling.order(ids, 3, _COSTS)
    for k, share in enumerate(_shares(got, 3)):
      for other, rest in enumerate(_shares(got, 3)):
        if other != k:
          self.assertFalse({scheduling.unit_of(i) for i in share
                            if scheduling.unit_of(i).endswith('Slow')} &
                           {scheduling.unit_of(i) for i in rest})

  def test_the_longest_test_no_longer_starts_last(self):
    # In collection order the 50 s test sits at the end of share 1, where
    # it starts after share 1's other tests; ordered, it starts first.
    ids = [f'tests/s_test.py::test_{n}' for n in range(10)]
    costs = {ids[-1]: 50.0}
    self.assertEqual(_shares(ids, 2)[1][-1], ids[-1])
    got = scheduling.order(ids, 2, costs)
    self.assertIn(ids[-1], [share[0] for share in _shares(got, 2)])

  def test_share_sizes_add_up(self):
    for count in (0, 1, 7, 733):
      for workers in (1, 2, 3, 8):
        sizes = scheduling.share_sizes(count, workers)
        self.assertEqual(sum(sizes), count)
        self.assertLessEqual(max(sizes) - min(sizes), 1)

  def test_bad_workers(self):
    with self.assertRaisesRegex(ValueError, r'workers must be >= 1, found 0'):
      scheduling.order(_ids(), 0, {})


class CostsTest(tf.test.TestCase):

  def test_missing_file_is_no_costs(self):
    self.assertEqual(scheduling.load_costs(
        self.create_tempfile().full_path + '.missing'), {})

  def test_bad_file_names_its_path(self):
    path = self.create_tempfile(content=json.dumps(['x'])).full_path
    with self.assertRaisesRegex(ValueError, 'must map test ids to seconds'):
      scheduling.load_costs(path)

  def test_durations_from_pytest_output(self):
    text = '\n'.join([
        '============ slowest durations ============',
        '52.10s call     tests/x_test.py::K::test_a',
        '10.00s setup    tests/x_test.py::K::test_a',
        '0.40s call     tests/x_test.py::K::test_b',
        '3.00s teardown tests/y_test.py::test_c[1]',
        '733 passed in 529.00s'])
    self.assertEqual(scheduling.durations_from_pytest(text, minimum=1.0),
                     {'tests/x_test.py::K::test_a': 62.1,
                      'tests/y_test.py::test_c[1]': 3.0})

  def test_the_stored_costs_load(self):
    costs = scheduling.load_costs()
    self.assertNotEmpty(costs)
    self.assertTrue(all(k.startswith('tests/') for k in costs), costs)


if __name__ == '__main__':
  tf.test.main()
