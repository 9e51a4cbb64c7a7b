"""Tests for tff_dprec.accounting.accountings: names and defaults."""

from absl.testing import parameterized
import numpy as np

from tff_dprec.accounting import accountings


class AccountingsTest(parameterized.TestCase):

  def test_names(self):
    self.assertEqual(accountings.ACCOUNTINGS, ('pld', 'rdp', 'paper'))
    self.assertEqual(accountings.DEFAULT_ACCOUNTING, accountings.PLD)
    self.assertLess(set(accountings.DP_FEDAVG_ACCOUNTINGS),
                    set(accountings.ACCOUNTINGS))
    self.assertLess(set(accountings.DDGAUSS_ACCOUNTINGS),
                    set(accountings.DP_FEDAVG_ACCOUNTINGS))

  def test_no_alias(self):
    # One name per accounting: no aliases.
    self.assertNotIn('sound', accountings.ACCOUNTINGS)
    self.assertFalse(hasattr(accountings, 'canonical'))

  @parameterized.parameters(2, 100, 4000, 342477, np.int64(3500))
  def test_default_delta_is_n_to_the_minus_1_1(self, population):
    # Exactly the expression the paper's tables and the experiments used.
    self.assertEqual(accountings.default_delta(population),
                     population**-1.1)

  @parameterized.parameters((0, ValueError), (-5, ValueError),
                            (2.0, TypeError), (True, TypeError))
  def test_default_delta_rejects(self, population, error):
    with self.assertRaisesRegex(error, 'population'):
      accountings.default_delta(population)


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
