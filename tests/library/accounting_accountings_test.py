"""Tests for tff_dprec.accounting.accountings: names and defaults."""

import warnings

from absl.testing import parameterized
import numpy as np

from tff_dprec.accounting import accountings


class AccountingsTest(parameterized.TestCase):

  def test_names(self):
    self.assertEqual(accountings.ACCOUNTINGS, ('min_pld_rdp', 'rdp', 'paper'))
    self.assertEqual(accountings.DEFAULT_ACCOUNTING, accountings.MIN_PLD_RDP)
    self.assertLess(set(accountings.DP_FEDAVG_ACCOUNTINGS),
                    set(accountings.ACCOUNTINGS))
    self.assertLess(set(accountings.DDGAUSS_ACCOUNTINGS),
                    set(accountings.DP_FEDAVG_ACCOUNTINGS))

  def test_no_alias(self):
    # One name per accounting; 'pld' is an earlier name, not an accounting.
    self.assertNotIn('sound', accountings.ACCOUNTINGS)
    self.assertNotIn('pld', accountings.ACCOUNTINGS)
    self.assertEqual(accountings.RENAMED, {'pld': 'min_pld_rdp'})

  @parameterized.parameters('min_pld_rdp', 'rdp', 'paper')
  def test_resolve_keeps_todays_names_silently(self, name):
    with warnings.catch_warnings():
      warnings.simplefilter('error')
      self.assertEqual(accountings.resolve(name), name)

  def test_resolve_maps_the_earlier_name_with_one_line(self):
    with self.assertWarns(accountings.RenamedAccountingWarning) as caught:
      self.assertEqual(accountings.resolve('pld'), 'min_pld_rdp')
    message = str(caught.warning)
    self.assertNotIn('\n', message)
    self.assertIn("accounting='pld' is now 'min_pld_rdp'", message)
    with self.assertWarns(accountings.RenamedAccountingWarning):
      self.assertEqual(
          accountings.resolve('pld', accountings.DP_FEDAVG_ACCOUNTINGS),
          'min_pld_rdp')

  @parameterized.parameters(('sound', accountings.ACCOUNTINGS),
                            ('PLD', accountings.ACCOUNTINGS),
                            ('pld', accountings.DDGAUSS_ACCOUNTINGS),
                            ('paper', accountings.DP_FEDAVG_ACCOUNTINGS),
                            (None, accountings.ACCOUNTINGS))
  def test_resolve_refuses_naming_the_value(self, name, choices):
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')
      with self.assertRaisesRegex(ValueError,
                                  f"^accounting must be one of .*{name!r}"):
        accountings.resolve(name, choices)

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
