"""Tests for the accounting CLI, `python -m tff_dprec.accounting`."""

from contextlib import redirect_stdout
import io
import re

from absl.testing import parameterized

from tff_dprec import accounting
from tff_dprec.accounting import __main__ as cli


def _run(argv):
  out = io.StringIO()
  with redirect_stdout(out):
    cli.main(argv)
  return out.getvalue()


_SO = ['--population=342477', '--clients_per_round=60', '--rounds=1500']


class CliTest(parameterized.TestCase):

  def test_dp_rec_paper_epsilon(self):
    out = _run(['--mechanism=dp_rec', '--population=100',
                '--clients_per_round=10', '--rounds=1000',
                '--clip_ratio=0.545', '--total_bits=70', '--accounting=paper'])
    self.assertRegex(out, r'epsilon=3\.01')
    self.assertIn('accounting=paper', out)

  def test_dp_rec_pld_is_default(self):
    out = _run(['--mechanism=dp_rec', *_SO, '--clip_ratio=1.227',
                '--bits=7', '--num_groups=6'])
    self.assertIn('accounting=pld', out)
    eps = float(re.search(r'epsilon=([0-9.]+)', out).group(1))
    self.assertAlmostEqual(eps, accounting.dp_rec_epsilon(
        clip_ratio=1.227, population=342477, clients_per_round=60,
        rounds=1500, delta=342477**-1.1, bits=7, num_groups=6), delta=1e-5)

  def test_paper_grouped_prints_warning(self):
    out = _run(['--mechanism=dp_rec', *_SO, '--clip_ratio=1.227', '--bits=8',
                '--num_groups=6', '--accounting=paper'])
    self.assertIn('warning:', out)
    self.assertIn('unproven', out)

  def test_calibrated_clip_ratio_is_safe_to_paste(self):
    out = _run(['--mechanism=dp_rec', *_SO, '--target_epsilon=1',
                '--bits=7', '--num_groups=6'])
    printed = re.search(r'clip_ratio=([0-9.e-]+)', out).group(1)
    eps = accounting.dp_rec_epsilon(
        clip_ratio=float(printed), population=342477, clients_per_round=60,
        rounds=1500, delta=342477**-1.1, bits=7, num_groups=6)
    self.assertLessEqual(eps, 1.0)

  def test_calibration_and_error(self):
    out = _run(['--mechanism=dp_fedavg', *_SO, '--target_epsilon=1',
                '--conversion=classic'])
    self.assertRegex(out, r'noise_multiplier=0\.95')
    z = float(re.search(r'noise_multiplier=([0-9.]+)', out).group(1))
    self.assertLessEqual(accounting.dp_fedavg_epsilon(
        noise_multiplier=z, population=342477, clients_per_round=60,
        rounds=1500, delta=342477**-1.1, conversion='classic', accounting='rdp'), 1.0)
    with self.assertRaises(SystemExit):
      _run(['--mechanism=dp_rec', *_SO, '--clip_ratio=1.227',
            '--total_bits=42', '--accounting=paper'])
    with self.assertRaises(SystemExit):
      _run(['--mechanism=dp_rec', *_SO, '--clip_ratio=1.227',
            '--total_bits=42'])


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
