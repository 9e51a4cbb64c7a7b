"""Tests for tff_dprec.accounting.dp_rec_accountant.

`make_dp_rec_accountant` under each accounting (dp_accounting's accountant
contract), `dp_rec_epsilon`, `dp_rec_local_epsilon`.
"""

import math

from absl.testing import parameterized
import dp_accounting
import numpy as np

from tff_dprec import accounting
from tff_dprec.accounting import base_accountant


class DpRecAccountantTest(parameterized.TestCase):
  """`make_dp_rec_accountant` returns the accountant class of the
  accounting."""

  @parameterized.parameters(
      ('min_pld_rdp', accounting.DpRecPldAccountant),
      ('rdp', accounting.DpRecRdpAccountant),
      ('paper', accounting.DpRecPaperAccountant))
  def test_chooses_the_class(self, name, cls):
    accountant = accounting.make_dp_rec_accountant(accounting=name)
    self.assertIs(type(accountant), cls)
    self.assertIsInstance(accountant, base_accountant.DpRecAccountantBase)
    self.assertIsInstance(accountant, dp_accounting.PrivacyAccountant)
    self.assertEqual(accountant.accounting, name)

  def test_default_is_pld(self):
    self.assertIsInstance(accounting.make_dp_rec_accountant(),
                          accounting.DpRecPldAccountant)

  def test_the_earlier_name_pld_is_the_same_accounting(self):
    common = dict(population=1000, clients_per_round=10, rounds=5,
                  delta=1e-5, bits=4, num_groups=1)
    with self.assertWarns(accounting.RenamedAccountingWarning):
      earlier = accounting.dp_rec_epsilon(clip_ratio=1.0, accounting='pld',
                                          **common)
    self.assertEqual(earlier, accounting.dp_rec_epsilon(clip_ratio=1.0,
                                                        **common))
    with self.assertWarns(accounting.RenamedAccountingWarning):
      c = accounting.calibrate_clip_ratio(target_epsilon=1.0,
                                          accounting='pld', **common)
    self.assertEqual(c, accounting.calibrate_clip_ratio(target_epsilon=1.0,
                                                        **common))
    fedavg = dict(noise_multiplier=1.0, population=1000,
                  clients_per_round=10, rounds=5, delta=1e-5)
    with self.assertWarns(accounting.RenamedAccountingWarning):
      z_eps = accounting.dp_fedavg_epsilon(accounting='pld', **fedavg)
    self.assertEqual(z_eps, accounting.dp_fedavg_epsilon(**fedavg))
    with self.assertWarns(accounting.RenamedAccountingWarning):
      self.assertIsInstance(accounting.make_dp_rec_accountant(
          accounting='pld'), accounting.DpRecPldAccountant)

  @parameterized.parameters('min_pld_rdp', 'rdp', 'paper')
  def test_same_epsilon_as_the_class(self, name):
    event = accounting.dp_rec_round_event(
        clip_ratio=1.0, total_bits=40, population=1000,
        clients_per_round=10)
    cls = type(accounting.make_dp_rec_accountant(accounting=name))
    self.assertEqual(
        accounting.make_dp_rec_accountant(accounting=name).compose(event, 5)
        .get_epsilon(1e-5),
        cls().compose(event, 5).get_epsilon(1e-5))


class AccountantContractTest(parameterized.TestCase):

  @parameterized.parameters('min_pld_rdp', 'rdp', 'paper')
  def test_no_op_and_empty_accountant(self, mode):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)
    accountant.compose(dp_accounting.NoOpDpEvent())
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)

  def test_zero_rounds_release_nothing(self):
    common = dict(population=100, clients_per_round=10, rounds=0,
                  delta=1e-5)
    self.assertEqual(accounting.dp_rec_epsilon(
        clip_ratio=1.0, bits=7, num_groups=2, **common), 0.0)
    self.assertEqual(accounting.dp_rec_local_epsilon(
        clip_ratio=1.0, bits=7, num_groups=2, rounds=0, delta=1e-5), 0.0)
    self.assertEqual(accounting.dp_fedavg_epsilon(
        noise_multiplier=1.0, **common), 0.0)
    # Arguments are still checked, and calibration needs rounds.
    with self.assertRaisesRegex(ValueError, 'clip_ratio'):
      accounting.dp_rec_epsilon(clip_ratio=-1.0, bits=7, num_groups=2,
                                **common)
    with self.assertRaisesRegex(ValueError, 'rounds'):
      accounting.calibrate_clip_ratio(target_epsilon=1.0, bits=7,
                                      num_groups=2, **common)

  @parameterized.parameters('min_pld_rdp', 'rdp', 'paper')
  def test_non_private(self, mode):
    accountant = accounting.make_dp_rec_accountant(accounting=mode)
    accountant.compose(dp_accounting.NonPrivateDpEvent())
    self.assertEqual(accountant.get_epsilon(1e-5), math.inf)

  @parameterized.named_parameters(
      ('gaussian', dp_accounting.GaussianDpEvent(1.0)),
      ('poisson_gaussian', dp_accounting.PoissonSampledDpEvent(
          0.1, dp_accounting.GaussianDpEvent(1.0))),
      ('unsupported', dp_accounting.UnsupportedDpEvent()),
      ('poisson_release', dp_accounting.PoissonSampledDpEvent(
          0.1, accounting.DpRecEvent(1.0, 8, 1))),
      ('composed_bad', dp_accounting.ComposedDpEvent(
          [accounting.DpRecEvent(1.0, 8, 1),
           dp_accounting.LaplaceDpEvent(1.0)])),
  )
  def test_unsupported_events(self, event):
    accountant = accounting.make_dp_rec_accountant()
    self.assertFalse(accountant.supports(event))
    with self.assertRaises(dp_accounting.UnsupportedEventError):
      accountant.compose(event)
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)

  def test_supports_does_not_compose(self):
    accountant = accounting.make_dp_rec_accountant()
    event = accounting.dp_rec_round_event(clip_ratio=1.0, bits=8,
                                          num_groups=5, population=100,
                                          clients_per_round=5)
    self.assertTrue(accountant.supports(event))
    self.assertEqual(accountant.get_epsilon(1e-5), 0.0)

  @parameterized.parameters('min_pld_rdp', 'rdp', 'paper')
  def test_composition_equals_self_composition(self, mode):
    event = accounting.dp_rec_round_event(clip_ratio=1.0, total_bits=40,
                                          population=100, clients_per_round=5)
    a = accounting.make_dp_rec_accountant(accounting=mode)
    for _ in range(4):
      a.compose(event)
    b = accounting.make_dp_rec_accountant(accounting=mode)
    b.compose(dp_accounting.SelfComposedDpEvent(event, 4))
    self.assertAlmostEqual(a.get_epsilon(1e-5), b.get_epsilon(1e-5), places=9)

  def test_the_factory_is_a_function(self):
    # Named as one: it returns one of three accountant classes.
    self.assertFalse(isinstance(accounting.make_dp_rec_accountant, type))
    self.assertFalse(hasattr(accounting, 'DpRecAccountant'))

  def test_bad_accountant_arguments(self):
    with self.assertRaisesRegex(ValueError, 'accounting'):
      accounting.make_dp_rec_accountant(accounting='exact')
    with self.assertRaisesRegex(ValueError, 'neighboring_relation'):
      accounting.make_dp_rec_accountant(
          neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)

  @parameterized.named_parameters(
      ('delta_zero', dict(delta=0.0), ValueError, 'delta'),
      ('delta_one', dict(delta=1.0), ValueError, 'delta'),
      ('rounds_negative', dict(rounds=-1), ValueError, 'rounds'),
      ('rounds_float', dict(rounds=1.5), TypeError, 'rounds'),
      ('population_zero', dict(population=0), ValueError, 'population'),
      ('too_many_clients', dict(clients_per_round=200), ValueError,
       'clients_per_round'),
  )
  def test_bad_epsilon_arguments(self, override, error, name):
    kwargs = dict(clip_ratio=1.0, population=100, clients_per_round=10,
                  rounds=10, delta=1e-5, bits=8, num_groups=8)
    kwargs.update(override)
    with self.assertRaisesRegex(error, name):
      accounting.dp_rec_epsilon(**kwargs)


class MonotonicityTest(parameterized.TestCase):

  _BASE = dict(clip_ratio=1.0, population=1000, clients_per_round=10,
               rounds=100, delta=1e-5, bits=8, num_groups=4)

  @parameterized.named_parameters(
      ('clip_ratio', 'clip_ratio', 1.2, +1),
      ('population', 'population', 2000, -1),
      ('clients_per_round', 'clients_per_round', 20, +1),
      ('rounds', 'rounds', 200, +1),
      ('delta', 'delta', 1e-4, -1),
  )
  def test_monotone(self, name, value, direction):
    base = accounting.dp_rec_epsilon(**self._BASE)
    changed = accounting.dp_rec_epsilon(**{**self._BASE, name: value})
    self.assertEqual(np.sign(changed - base), direction)


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
