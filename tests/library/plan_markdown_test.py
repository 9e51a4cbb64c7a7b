"""Tests for tff_dprec.plan.markdown: the planner's lines."""

import math

from absl.testing import absltest

from tff_dprec import plan as plan_lib
from tff_dprec.plan import markdown


def _hand_made_plan(**dp_rec):
  """A plan built from its records (no calibration), DP-REC's overridden."""
  fed = plan_lib.Federation(2000, 10, 5, 2.0, 2000**-1.1, 1000)
  rec = dict(parameter=1.5, relative_noise=1 / (1.5 * math.sqrt(10)),
             upload_bits=69, download_bits=1234.5, num_groups=1,
             bits_from_c=True, full_bits=32000, bits=5, bits_margin_met=True,
             outside_idealisation=False, local_epsilon=3.0)
  rec.update(dp_rec)
  return plan_lib.Plan(
      fed, plan_lib.DpRecPlan(**rec),
      plan_lib.DpFedAvgPlan(parameter=0.5, relative_noise=0.05,
                            upload_bits=32000, download_bits=32000,
                            rdp_noise_multiplier=0.6),
      plan_lib.DdgaussPlan(parameter=0.8191790560783655,
                           relative_noise=0.08191790560783655,
                           upload_bits=16000, download_bits=32000, bits=16,
                           l2_clip=1.0))


_BREAK_EVEN = plan_lib.BreakEven(
    clients_per_round=3272, clip_ratio=1.5103, bits=5, bits_margin_met=False,
    outside_idealisation=True, relative_noise=0.0116,
    upload_bits_per_round=3272 * 69, download_bits_per_round=4.66e9)


class MarkdownTest(absltest.TestCase):

  def test_every_parameter_has_six_digits(self):
    p = _hand_made_plan()
    text = '\n'.join(markdown.format_plan(p))
    self.assertIn('| DP-REC | min_pld_rdp | c=1.5 |', text)
    self.assertIn('| DP-FedAvg | min_pld_rdp | z=0.5 |', text)
    self.assertIn('| DDGauss16 | rdp | z=0.819179 |', text)
    self.assertEqual(p.to_json()['ddgauss']['parameter'], 0.8191790560783655)

  def test_warnings_and_the_break_even(self):
    p = _hand_made_plan(bits_margin_met=False, outside_idealisation=True,
                        break_even_searched=True, break_even=_BREAK_EVEN)
    lines = markdown.format_plan(p)
    warnings = [l for l in lines if l.startswith('WARNING')]
    self.assertLen(warnings, 4)
    self.assertLen([w for w in warnings if 'at the break-even' in w], 2)
    self.assertIn("DP-REC break-even: B'=3,272 clients per round (c=1.5103, "
                  '5 bits)', lines[-1])
    out = p.to_json()['dp_rec']
    self.assertEqual(out['break_even_clients_per_round'], 3272)
    self.assertIs(out['break_even_bits_margin_met'], False)

  def test_no_break_even(self):
    searched = _hand_made_plan(break_even_searched=True)
    self.assertIn('DP-REC break-even: none up to N=2,000',
                  markdown.format_plan(searched)[-1])
    self.assertIsNone(
        searched.to_json()['dp_rec']['break_even_clients_per_round'])
    not_searched = _hand_made_plan()
    self.assertNotIn('break-even', '\n'.join(
        markdown.format_plan(not_searched)))
    self.assertNotIn('break_even_clients_per_round',
                     not_searched.to_json()['dp_rec'])

  def test_out_of_reach(self):
    p = _hand_made_plan(parameter=None, relative_noise=None,
                        download_bits=None, bits=None, bits_margin_met=None,
                        outside_idealisation=None, local_epsilon=None,
                        error='no c meets it')
    lines = markdown.format_plan(p)
    self.assertIn('| DP-REC | min_pld_rdp | out of reach | - | - | 69 | - |',
                  lines)
    self.assertEqual(lines[-1], 'DP-REC: no c meets it')
    self.assertEqual(set(p.to_json()['dp_rec']), {
        'parameter_name', 'parameter', 'accountant', 'relative_noise',
        'upload_bits', 'download_bits', 'num_groups', 'error'})

if __name__ == '__main__':
  absltest.main()
