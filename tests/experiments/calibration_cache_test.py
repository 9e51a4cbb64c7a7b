"""Tests for experiments.runner.calibration_cache."""

import json
import os
import tempfile
import unittest
from unittest import mock

from experiments.runner import calibration_cache


class CalibrationCacheTest(unittest.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = tempfile.mkdtemp()
    for patcher in (
        mock.patch.dict(os.environ, {calibration_cache.ENV: self.folder}),
        # Each test a fresh process: nothing checked yet.
        mock.patch.object(calibration_cache, '_CHECKED', set())):
      patcher.start()
      self.addCleanup(patcher.stop)
    self.calls = []

  def _calibrate(self, target_epsilon, x):
    self.calls.append(x)
    return target_epsilon * x

  def test_second_call_is_a_verified_hit(self):
    checked = []
    epsilon = lambda v: (checked.append(v), v / 2.0)[1]
    first = calibration_cache.calibrate('t', self._calibrate, epsilon, 1.0,
                                        x=2.0)
    second = calibration_cache.calibrate('t', self._calibrate, epsilon, 1.0,
                                         x=2.0)
    self.assertEqual((first, second), (2.0, 2.0))
    self.assertEqual(self.calls, [2.0])  # Calibrated once.
    self.assertEqual(checked, [2.0])  # The hit was checked once.

  def test_a_hit_is_checked_once_per_process_and_value(self):
    checked = []
    epsilon = lambda v: (checked.append(v), v / 2.0)[1]
    for _ in range(3):
      self.assertEqual(calibration_cache.calibrate(
          't', self._calibrate, epsilon, 1.0, x=2.0), 2.0)
    self.assertEqual(checked, [2.0])
    # Another value under the key (another process wrote it) is checked.
    (path,) = [os.path.join(self.folder, n) for n in os.listdir(self.folder)]
    with open(path, 'w') as f:
      json.dump({'value': 1.5}, f)
    for _ in range(2):
      self.assertEqual(calibration_cache.calibrate(
          't', self._calibrate, epsilon, 1.0, x=2.0), 1.5)
    self.assertEqual(checked, [2.0, 1.5])
    self.assertEqual(self.calls, [2.0])

  def test_key_includes_arguments_and_target(self):
    epsilon = lambda v: 0.0
    calibration_cache.calibrate('t', self._calibrate, epsilon, 1.0, x=2.0)
    calibration_cache.calibrate('t', self._calibrate, epsilon, 1.0, x=3.0)
    calibration_cache.calibrate('t', self._calibrate, epsilon, 2.0, x=2.0)
    calibration_cache.calibrate('u', self._calibrate, epsilon, 1.0, x=2.0)
    self.assertEqual(len(self.calls), 4)

  def test_a_cached_value_over_the_target_is_recomputed(self):
    calibration_cache.calibrate('t', self._calibrate, lambda v: 0.0, 1.0,
                                x=2.0)
    # Tamper with the stored value: 5 has epsilon 5 > 1.
    (path,) = [os.path.join(self.folder, n) for n in os.listdir(self.folder)]
    with open(path, 'w') as f:
      json.dump({'value': 5.0}, f)
    value = calibration_cache.calibrate('t', self._calibrate,
                                        lambda v: v / 4.0, 1.0, x=2.0)
    self.assertEqual(value, 2.0)  # Recomputed, not the tampered 5.0.
    self.assertEqual(len(self.calls), 2)

  def test_corrupt_file_is_a_miss(self):
    calibration_cache.calibrate('t', self._calibrate, lambda v: 0.0, 1.0,
                                x=2.0)
    (path,) = [os.path.join(self.folder, n) for n in os.listdir(self.folder)]
    with open(path, 'w') as f:
      f.write('{not json')
    self.assertEqual(calibration_cache.calibrate(
        't', self._calibrate, lambda v: 0.0, 1.0, x=2.0), 2.0)
    self.assertEqual(len(self.calls), 2)

  def test_off_disables(self):
    with mock.patch.dict(os.environ, {calibration_cache.ENV: 'off'}):
      for _ in range(2):
        calibration_cache.calibrate('t', self._calibrate, lambda v: 0.0, 1.0,
                                    x=2.0)
    self.assertEqual(len(self.calls), 2)
    self.assertEqual(os.listdir(self.folder), [])

  def test_fingerprint_covers_the_accountant_source(self):
    self.assertRegex(calibration_cache.accountant_fingerprint(),
                     '^[0-9a-f]{64}$')


if __name__ == '__main__':
  unittest.main()
