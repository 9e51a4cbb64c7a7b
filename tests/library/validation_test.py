"""Tests of tff_dprec.validation: each check's types, values and messages."""

import math

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from tff_dprec import validation


class NumberChecksTest(parameterized.TestCase):

  @parameterized.parameters(1, 2.5, np.float32(0.5), np.int64(3))
  def test_accepts_numbers_and_numpy_scalars(self, value):
    validation.check_number(value, 'x')
    validation.check_positive_number(value, 'x')
    validation.check_nonnegative_number(value, 'x')

  @parameterized.parameters(True, '1', None, ([1.0],))
  def test_refuses_other_types_naming_the_argument(self, value):
    with self.assertRaises(TypeError) as raised:
      validation.check_number(value, 'clip')
    self.assertEqual(str(raised.exception),
                     f'clip must be a number, found {value!r}.')

  @parameterized.parameters(math.nan, math.inf, -math.inf)
  def test_refuses_non_finite(self, value):
    with self.assertRaisesRegex(ValueError, 'x must be finite, found'):
      validation.check_positive_number(value, 'x')

  def test_signs(self):
    validation.check_nonnegative_number(0.0, 'x')
    with self.assertRaisesRegex(ValueError,
                                r'^x must be positive, found 0\.0\.$'):
      validation.check_positive_number(0.0, 'x')
    with self.assertRaisesRegex(ValueError,
                                r'^x must be non-negative, found -1e-09\.$'):
      validation.check_nonnegative_number(-1e-9, 'x')

  def test_probability_is_open(self):
    validation.check_probability(0.5, 'q')
    for value in (0.0, 1.0, 1.5):
      with self.assertRaisesRegex(ValueError, r'q must be in \(0, 1\)'):
        validation.check_probability(value, 'q')


class IntChecksTest(parameterized.TestCase):

  def test_ints(self):
    for value in (1, np.int32(4)):
      validation.check_int(value, 'n')
      validation.check_positive_int(value, 'n')
      validation.check_nonnegative_int(value, 'n')
    validation.check_nonnegative_int(0, 'n')
    validation.check_int_in_range(24, 'bits', 1, 24)

  @parameterized.parameters(True, 1.0, np.float64(2.0), '3')
  def test_refuses_bools_and_floats(self, value):
    with self.assertRaisesRegex(TypeError, 'bits must be an int'):
      validation.check_positive_int(value, 'bits')

  def test_values(self):
    with self.assertRaisesRegex(ValueError, r'n must be positive, found 0'):
      validation.check_positive_int(0, 'n')
    with self.assertRaisesRegex(ValueError, r'n must be non-negative'):
      validation.check_nonnegative_int(-1, 'n')
    with self.assertRaisesRegex(
        ValueError, r'^bits must be in \[1, 24\], found 25\.$'):
      validation.check_int_in_range(25, 'bits', 1, 24)


class OtherChecksTest(absltest.TestCase):

  def test_bool(self):
    validation.check_bool(np.bool_(True), 'strict')
    with self.assertRaisesRegex(TypeError, 'strict must be a bool, found 1'):
      validation.check_bool(1, 'strict')

  def test_choice_lists_the_choices(self):
    validation.check_choice('pld', 'accounting', ('pld', 'rdp'))
    with self.assertRaisesRegex(
        ValueError, r"^accounting must be one of \['pld', 'rdp'\], found "
        r"'PLD'\.$"):
      validation.check_choice('PLD', 'accounting', ('rdp', 'pld'))


if __name__ == '__main__':
  absltest.main()
