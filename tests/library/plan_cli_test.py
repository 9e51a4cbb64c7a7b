"""Tests for python -m tff_dprec.plan: flags, JSON, errors and exit codes."""

from contextlib import redirect_stderr
from contextlib import redirect_stdout
import io
import json
import os
import subprocess
import sys

from absl.testing import absltest
from absl.testing import parameterized

from tff_dprec.plan import __main__ as plan_cli
from tests import support


# A federation small enough to calibrate in seconds.
_SMALL = dict(population=2000, clients_per_round=10, rounds=5,
              target_epsilon=2.0, dimension=1000)


def _run_cli(argv):
  out = io.StringIO()
  with redirect_stdout(out):
    plan_cli.main(argv)
  return out.getvalue()


class CliTest(parameterized.TestCase):

  def test_json(self):
    # The output's shape, not its values: the RDP stand-in is enough.
    patcher = support.dp_rec_rdp_for_pld()
    patcher.start()
    self.addCleanup(patcher.stop)
    argv = [f'--{k}={v}' for k, v in _SMALL.items()] + [
        '--nobreak_even', '--server_optimizer=adam', '--json']
    out = json.loads(_run_cli(argv))
    self.assertEqual(set(out), {'dp_rec', 'dp_fedavg', 'ddgauss',
                                'federation'})
    self.assertNotIn('break_even_clients_per_round', out['dp_rec'])
    self.assertEqual(out['dp_rec']['full_bits'], 3 * 32 * 1000)
    self.assertEqual(out['federation']['population'], 2000)

  @parameterized.parameters(
      ('--clients_per_round=0', 'clients_per_round must be positive, found 0'),
      ('--clients_per_round=3000', 'clients_per_round=3000 exceeds '
       'population=2000'),
      ('--dimension=-5', 'dimension must be positive, found -5'),
      ('--target_epsilon=0', 'target_epsilon must be positive'),
      ('--delta=2', 'delta must be in (0, 1), found 2.0'),
      ('--num_groups=0', 'num_groups must be positive, found 0'),
      ('--bits=0', 'bits must be in [1, 24], found 0'),
      ('--bits=25', 'bits must be in [1, 24], found 25'),
      ('--population=abc', "flag --population=abc: invalid literal for int() "
       "with base 10: 'abc'"),
      ('--server_optimizer=foo', 'flag --server_optimizer=foo: value should '
       'be one of <adam|sgd|sgdm>'),
      ('--full_bits', 'Missing value for flag --full_bits'),
      ('extra', "Unexpected arguments: ['extra']"))
  def test_bad_input_exits_2_naming_it(self, flag, message):
    argv = [f'--{k}={v}' for k, v in _SMALL.items()] + [flag]
    err = io.StringIO()
    with self.assertRaises(SystemExit) as raised:
      with redirect_stderr(err):
        _run_cli(argv)
    self.assertEqual(raised.exception.code, 2)
    self.assertIn(message, err.getvalue())
    self.assertEqual(err.getvalue().count('\n'), 1)
    self.assertTrue(err.getvalue().startswith('error: '), err.getvalue())

  def test_a_missing_flag_is_named(self):
    argv = [f'--{k}={v}' for k, v in _SMALL.items() if k != 'rounds']
    err = io.StringIO()
    with self.assertRaises(SystemExit) as raised:
      with redirect_stderr(err):
        _run_cli(argv)
    self.assertEqual(raised.exception.code, 2)
    self.assertEqual(err.getvalue(), 'error: flag --rounds=None: Flag '
                     '--rounds must have a value other than None.\n')

  def test_the_program_exit_codes(self):
    """`python -m tff_dprec.plan` itself: 2 and one line for a bad value,
    0 for --help."""
    def program(*argv):
      return subprocess.run(
          [sys.executable, '-m', 'tff_dprec.plan', *argv], cwd=support.REPO,
          env=dict(os.environ, PYTHONPATH=support.REPO), capture_output=True,
          text=True, timeout=120)

    bad = program(*[f'--{k}={v}' for k, v in _SMALL.items()],
                  '--dimension=abc')
    self.assertEqual(bad.returncode, 2, bad.stderr)
    self.assertEqual(bad.stderr, "error: flag --dimension=abc: invalid "
                     "literal for int() with base 10: 'abc'\n")
    refused = program(*[f'--{k}={v}' for k, v in _SMALL.items()],
                      '--clients_per_round=0')
    self.assertEqual(refused.returncode, 2, refused.stderr)
    self.assertEqual(refused.stderr, 'error: clients_per_round must be '
                     'positive, found 0.\n')

if __name__ == '__main__':
  absltest.main()
