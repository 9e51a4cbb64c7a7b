"""Tests for tff_dprec.plan.results: the records and their JSON."""

import attrs
from absl.testing import absltest

from tff_dprec import plan as plan_lib

_FED = plan_lib.Federation(2000, 10, 5, 2.0, 2000**-1.1, 1000)
_BREAK_EVEN = plan_lib.BreakEven(
    clients_per_round=3272, clip_ratio=1.5103, bits=5, bits_margin_met=False,
    outside_idealisation=True, relative_noise=0.0116,
    upload_bits_per_round=3272 * 69, download_bits_per_round=4.66e9)


def _dp_rec(**fields):
  record = dict(parameter=1.5, relative_noise=0.21, upload_bits=69,
                download_bits=1234.5, num_groups=1, bits_from_c=True,
                full_bits=32000, bits=5, bits_margin_met=True,
                outside_idealisation=False, local_epsilon=3.0)
  record.update(fields)
  return plan_lib.DpRecPlan(**record)


class ResultsTest(absltest.TestCase):

  def test_federation_common_arguments(self):
    self.assertEqual(_FED.common(), dict(population=2000,
                                         clients_per_round=10, rounds=5,
                                         delta=2000**-1.1))

  def test_dp_rec_json_flattens_its_break_even(self):
    out = _dp_rec(break_even_searched=True, break_even=_BREAK_EVEN).to_json()
    self.assertEqual(out['parameter_name'], 'clip_ratio')
    self.assertEqual(out['accountant'], 'min_pld_rdp')
    self.assertEqual(out['break_even_clients_per_round'], 3272)
    self.assertEqual(out['break_even_download_bits_per_round'], 4.66e9)
    self.assertNotIn('break_even', out)
    self.assertNotIn('error', out)
    # Searched, none found: the field is there, None.
    none = _dp_rec(break_even_searched=True).to_json()
    self.assertIsNone(none['break_even_clients_per_round'])
    self.assertNotIn('break_even_clients_per_round', _dp_rec().to_json())

  def test_out_of_reach_keeps_only_what_holds(self):
    out = _dp_rec(parameter=None, relative_noise=None, download_bits=None,
                  error='target out of reach').to_json()
    self.assertEqual(out['error'], 'target out of reach')
    self.assertEqual(out['num_groups'], 1)
    self.assertNotIn('bits', out)
    self.assertNotIn('local_epsilon', out)

  def test_mechanisms_name_their_parameter_and_accountant(self):
    fedavg = plan_lib.DpFedAvgPlan(parameter=0.5, relative_noise=0.05,
                                   upload_bits=32000, download_bits=32000,
                                   rdp_noise_multiplier=0.6)
    ddgauss = plan_lib.DdgaussPlan(parameter=0.8, relative_noise=0.08,
                                   upload_bits=16000, download_bits=32000,
                                   bits=16, l2_clip=1.0)
    self.assertEqual(fedavg.to_json()['rdp_parameter'], 0.6)
    self.assertEqual(fedavg.to_json()['accountant'], 'min_pld_rdp')
    self.assertEqual(ddgauss.to_json()['accountant'], 'rdp')
    self.assertEqual(ddgauss.to_json()['parameter_name'], 'noise_multiplier')
    plan = plan_lib.Plan(_FED, _dp_rec(), fedavg, ddgauss)
    out = plan.to_json()
    self.assertEqual(sorted(out), ['ddgauss', 'dp_fedavg', 'dp_rec',
                                   'federation'])
    self.assertEqual(out['federation'], attrs.asdict(_FED))

  def test_records_are_frozen(self):
    with self.assertRaises(attrs.exceptions.FrozenInstanceError):
      _FED.population = 3


if __name__ == '__main__':
  absltest.main()
