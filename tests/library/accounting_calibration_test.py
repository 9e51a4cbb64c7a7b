"""Tests for tff_dprec.accounting.calibration: the parameter searches."""

import math
from unittest import mock

from absl.testing import parameterized
from scipy import optimize

from tff_dprec import accounting
from tff_dprec.accounting import baselines
from tff_dprec.accounting import calibration
from tff_dprec.accounting import dp_rec_accountant


def _paper_delta(population):
  return accounting.default_delta(population)


class CalibrationTest(parameterized.TestCase):

  @parameterized.parameters(1.0, 3.0)
  def test_clip_ratio_round_trip(self, target):
    kwargs = dict(population=100, clients_per_round=10, rounds=1000,
                  delta=_paper_delta(100), bits=7, num_groups=10)
    c = accounting.calibrate_clip_ratio(target_epsilon=target, **kwargs)
    self.assertLessEqual(accounting.dp_rec_epsilon(clip_ratio=c, **kwargs),
                         target)
    self.assertGreater(
        accounting.dp_rec_epsilon(clip_ratio=c * 1.001, **kwargs), target)

  @parameterized.named_parameters(
      ('dp_rec', accounting.calibrate_clip_ratio, dp_rec_accountant,
       'dp_rec_epsilon', dict(bits=5, num_groups=1)),
      ('dp_fedavg', accounting.calibrate_dp_fedavg_noise, baselines,
       'dp_fedavg_epsilon', {}))
  def test_a_calibration_made_again_is_kept_until_forgotten(
      self, calibrate, module, evaluated, settings):
    kwargs = dict(target_epsilon=2.0, population=500, clients_per_round=20,
                  rounds=7, delta=1e-5, **settings)
    calibration.clear_memo()
    self.addCleanup(calibration.clear_memo)
    with mock.patch.object(module, evaluated,
                           wraps=getattr(module, evaluated)) as counted:
      first = calibrate(**kwargs)
      searched = counted.call_count
      again = calibrate(**kwargs)
      kept = counted.call_count - searched
      other = calibrate(**dict(kwargs, rounds=8))  # Another federation.
      calibration.clear_memo()
      before = counted.call_count
      forgotten = calibrate(**kwargs)
      recalibrated = counted.call_count - before
    self.assertGreater(searched, 0)
    self.assertEqual((again, kept), (first, 0))
    self.assertNotEqual(other, first)
    self.assertEqual(forgotten, first)
    self.assertGreater(recalibrated, 0)

  def test_paper_calibration_matches_paper_mnist(self):
    c = accounting.calibrate_clip_ratio(
        target_epsilon=3.0, population=100, clients_per_round=10, rounds=1000,
        delta=_paper_delta(100), total_bits=70, accounting='paper')
    self.assertAlmostEqual(c, 0.545, delta=0.005)

  def test_paper_calibration_fails_when_bits_cannot_meet_delta(self):
    with self.assertRaises(accounting.OverheadExceedsDeltaError):
      accounting.calibrate_clip_ratio(
          target_epsilon=1.0, population=342477, clients_per_round=60,
          rounds=1500, delta=_paper_delta(342477), total_bits=30,
          accounting='paper')

  def test_calibration_rejects_bad_target(self):
    with self.assertRaisesRegex(ValueError, 'target_epsilon'):
      accounting.calibrate_clip_ratio(
          target_epsilon=0.0, population=100, clients_per_round=10,
          rounds=10, delta=1e-3, bits=8, num_groups=8)

  @parameterized.named_parameters(
      ('power', lambda x: x**3, 8.0, True, 2.0),
      ('inverse_square', lambda z: 1.0 / z**2, 4.0, False, 0.5),
      ('steep', lambda x: math.expm1(x * x) + x, 3.0, True, None),
      ('zero_below', lambda x: 0.0 if x < 0.5 else x, 2.0, True, 2.0),
      ('inf_above', lambda x: math.inf if x > 3.0 else x, 2.5, True, 2.5),
      ('inf_below', lambda z: math.inf if z < 0.1 else 1.0 / z, 4.0, False,
       0.25),
      # Where interpolation stalls (review of the search): a flat approach
      # and a jump, a kink, a plateau on the target, both directions.
      ('jump', lambda x: 1 - 1e-6 * (3 - x) if x < 3 else 2.0, 1.0, True,
       3.0),
      ('kink', lambda x: 1 - 1e-4 * (3 - x) if x < 3 else 1 + 1e6 * (x - 3),
       1.0, True, 3.0),
      ('jump_decreasing',
       lambda z: 1 - 1e-6 * (z - 3) if z > 3 else 2.0, 1.0, False, 3.0),
      ('plateau', lambda x: 1.0 if x <= 5 else 2.0, 1.0, True, 5.0),
      ('nan_above', lambda x: math.nan if x > 2 else x, 3.0, True, 2.0))
  def test_search_finds_the_boundary(self, fn, target, largest, boundary):
    lo, hi, tol = 1e-3, 25.0, 1e-6
    calls = []

    def epsilon(x):
      calls.append(x)
      return fn(x)

    x = calibration.search(epsilon, target, lo, hi, tol, 'x', largest)
    if boundary is None:  # Where fn crosses the target, by Brent's method.
      boundary = optimize.brentq(lambda x: fn(x) - target, lo, hi,
                                 xtol=1e-14)
    self.assertLessEqual(fn(x), target)  # Always meets the target,
    self.assertLessEqual(abs(x - boundary), 2 * tol * boundary)  # Within tol.
    self.assertTrue(all(lo <= c <= hi for c in calls))
    # At most a few times bisection's steps (geometric to a factor 4, then
    # halving to tol): the stall safeguard bounds the interpolation.
    bisection = (math.log2(math.log2(hi / lo) / 2) +
                 math.log2(4 / tol) + 2)
    self.assertLessEqual(len(calls), (calibration._STALL_STEPS + 1) *  # pylint: disable=protected-access
                         bisection)

  @parameterized.parameters(
      (dict(lo=0.0), 'lo=0.0'), (dict(lo=2.0, hi=1.0), 'hi=1.0'),
      (dict(target=0.0), 'target_epsilon must be positive'),
      (dict(tol=0.0), 'tol must be'), (dict(tol=1.0), 'tol must be'))
  def test_search_rejects_bad_arguments(self, changes, message):
    kwargs = dict(target=1.0, lo=1e-3, hi=25.0, tol=1e-6)
    kwargs.update(changes)
    with self.assertRaisesRegex(ValueError, message):
      calibration.search(lambda x: x, name='x', largest=True, **kwargs)

  def test_real_accountants_need_far_fewer_steps_than_bisection(self):
    calls = []
    epsilon = lambda z: (calls.append(z), accounting.dp_fedavg_epsilon(  # pylint: disable=g-long-lambda
        noise_multiplier=z, population=4000, clients_per_round=40,
        rounds=10, delta=1e-4, accounting='rdp'))[1]
    z = calibration.search(epsilon, 1.0, calibration.MIN_NOISE_MULTIPLIER,
                           calibration.MAX_NOISE_MULTIPLIER, 1e-6, 'z',
                           largest=False)
    self.assertLessEqual(epsilon(z), 1.0)
    self.assertGreater(epsilon(z * (1 - 2e-6)), 1.0)
    self.assertLessEqual(len(calls), 17)  # Bisection: 26 here.

  def test_search_refuses_an_unreachable_target(self):
    with self.assertRaisesRegex(accounting.TargetUnreachableError,
                                'No c >= 0.001 meets target_epsilon=0.5'):
      calibration.search(lambda x: 1.0 + x, 0.5, 1e-3, 25.0, 1e-6, 'c',
                         largest=True)

  @parameterized.parameters(1.2641164, 0.000123456789, 9.9999999, 3.0, 25.0)
  def test_rounding_is_safe(self, value):
    self.assertLessEqual(calibration.round_down(value), value)
    self.assertGreaterEqual(calibration.round_up(value), value)
    self.assertLess(value - calibration.round_down(value), 2e-5 * value)
    self.assertLess(calibration.round_up(value) - value, 2e-5 * value)


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
