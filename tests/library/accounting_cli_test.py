"""Tests for the accounting CLI, `python -m tff_dprec.accounting`."""

from contextlib import redirect_stderr
from contextlib import redirect_stdout
import io
import os
import re
import subprocess
import sys

from absl.testing import parameterized

from tff_dprec import accounting
from tff_dprec.accounting import __main__ as cli
from tests import support


def _run(argv):
  out = io.StringIO()
  with redirect_stdout(out):
    cli.main(argv)
  return out.getvalue()


_SO = ['--population=342477', '--clients_per_round=60', '--rounds=1500']
_ROOT = support.REPO


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
    self.assertIn('accounting=min_pld_rdp', out)
    eps = float(re.search(r'epsilon=([0-9.]+)', out).group(1))
    self.assertAlmostEqual(eps, accounting.dp_rec_epsilon(
        clip_ratio=1.227, population=342477, clients_per_round=60,
        rounds=1500, delta=342477**-1.1, bits=7, num_groups=6), delta=1e-5)

  def test_the_earlier_name_pld_prints_a_note_and_the_same_epsilon(self):
    args = ['--mechanism=dp_rec', *_SO, '--clip_ratio=1.227', '--bits=7',
            '--num_groups=6']
    today = _run(args)
    earlier = _run(args + ['--accounting=pld'])
    note, rest = earlier.split('\n', 1)
    self.assertEqual(note, "note: --accounting='pld' is now 'min_pld_rdp', "
                     'the same accounting under a name that says what it '
                     'returns (the smaller of the PLD and RDP epsilons).')
    self.assertEqual(rest, today)

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
        rounds=1500, delta=342477**-1.1, conversion='classic',
        accounting='rdp'), 1.0)
    with self.assertRaises(SystemExit):
      _run(['--mechanism=dp_rec', *_SO, '--clip_ratio=1.227',
            '--total_bits=42', '--accounting=paper'])
    with self.assertRaises(SystemExit):
      _run(['--mechanism=dp_rec', *_SO, '--clip_ratio=1.227',
            '--total_bits=42'])


class BadInputTest(parameterized.TestCase):
  """Refusals: one `error:` line naming the flag and value, exit code 2."""

  @parameterized.named_parameters(
      ('unknown_mechanism', ['--mechanism=foo'],
       'error: flag --mechanism=foo: value should be one of '
       '<dp_rec|dp_fedavg|ddgauss>'),
      ('malformed_number', ['--mechanism=dp_rec', '--clip_ratio=x',
                            '--bits=7', '--num_groups=6'],
       "error: flag --clip_ratio=x: could not convert string to float: 'x'"),
      ('negative_clip_ratio', ['--mechanism=dp_rec', '--clip_ratio=-1',
                               '--bits=7', '--num_groups=6'],
       'error: clip_ratio must be non-negative, found -1.0.'),
      ('nan_delta', ['--mechanism=dp_rec', '--clip_ratio=1', '--bits=7',
                     '--num_groups=6', '--delta=nan'],
       'error: delta must be finite, found nan.'),
      ('missing_settings', ['--mechanism=dp_rec', '--clip_ratio=1'],
       'error: --mechanism=dp_rec needs --bits, --num_groups'),
      ('accounting_for_another_mechanism',
       ['--mechanism=dp_fedavg', '--noise_multiplier=1', '--accounting=paper'],
       "error: --accounting=paper is for dp_rec; dp_fedavg takes "
       "'min_pld_rdp' or 'rdp'."),
      ('unexpected_argument', ['--mechanism=dp_rec', '--clip_ratio=1',
                               '--bits=7', '--num_groups=6', 'extra'],
       "error: Unexpected arguments: ['extra']"))
  def test_exits_2_with_one_line(self, argv, line):
    err = io.StringIO()
    with self.assertRaises(SystemExit) as raised:
      with redirect_stderr(err):
        _run([*_SO, *argv])
    self.assertEqual(raised.exception.code, 2)
    self.assertEqual(err.getvalue(), line + '\n')

  def test_missing_required_flag_is_named(self):
    err = io.StringIO()
    with self.assertRaises(SystemExit) as raised:
      with redirect_stderr(err):
        _run(['--mechanism=dp_rec', '--population=100', '--rounds=3'])
    self.assertEqual(raised.exception.code, 2)
    self.assertEqual(err.getvalue(), 'error: flag --clients_per_round=None: '
                     'Flag --clients_per_round must have a value other than '
                     'None.\n')

  def test_a_flag_of_an_earlier_call_is_not_kept(self):
    setting = ['--mechanism=dp_rec', *_SO, '--clip_ratio=1.227', '--bits=7',
               '--num_groups=6', '--accounting=rdp']
    self.assertIn('(local, ', _run([*setting, '--local']))
    self.assertNotIn('local', _run(setting))

  def test_the_program_exit_codes(self):
    """`python -m tff_dprec.accounting` itself: 2 and one line for a bad
    value, 0 for --help and for an epsilon."""
    def program(*argv):
      return subprocess.run(
          [sys.executable, '-m', 'tff_dprec.accounting', *argv], cwd=_ROOT,
          env=dict(os.environ, PYTHONPATH=_ROOT), capture_output=True,
          text=True, timeout=120)

    bad = program('--mechanism=dp_rec', *_SO, '--clip_ratio=x', '--bits=7',
                  '--num_groups=6')
    self.assertEqual(bad.returncode, 2, bad.stderr)
    self.assertEqual(bad.stderr, "error: flag --clip_ratio=x: could not "
                     "convert string to float: 'x'\n")
    self.assertEqual(bad.stdout, '')
    shown = program('--help')
    self.assertEqual(shown.returncode, 0, shown.stderr)
    self.assertIn('--mechanism: <dp_rec|dp_fedavg|ddgauss>', shown.stdout)
    good = program('--mechanism=dp_rec', *_SO, '--clip_ratio=1.227',
                   '--bits=7', '--num_groups=6', '--accounting=rdp')
    self.assertEqual(good.returncode, 0, good.stderr)
    self.assertRegex(good.stdout, r'^epsilon=[0-9.]+ delta=[0-9.e-]+ '
                     r'\(accounting=rdp\)\n$')


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
