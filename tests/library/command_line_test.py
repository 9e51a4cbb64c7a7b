"""Tests for `tff_dprec.command_line`, how the package's commands run."""

from contextlib import redirect_stderr
from contextlib import redirect_stdout
import io

from absl import app
from absl import flags
from absl.testing import absltest
from absl.testing import parameterized

from tff_dprec import command_line

_DOC = 'A toy command: prints n.'


def _define_flags(values):
  flags.DEFINE_integer('n', None, 'How many.', flag_values=values)
  flags.DEFINE_bool('loud', False, 'Shout.', flag_values=values)
  flags.mark_flag_as_required('n', flag_values=values)


def _command(args):
  if args.n < 0:
    raise ValueError(f'n must be non-negative,\nfound {args.n}.')
  if args.n == 13:
    raise app.UsageError('n=13 needs --loud')
  print(f'n={args.n}' + ('!' if args.loud else ''))


def _run(argv):
  """(exit code or None, stdout, stderr) of the toy command on `argv`."""
  out, err = io.StringIO(), io.StringIO()
  code = None
  with redirect_stdout(out), redirect_stderr(err):
    try:
      command_line.run(_define_flags, _command, _DOC, argv)
    except SystemExit as e:
      code = e.code
  return code, out.getvalue(), err.getvalue()


class RunTest(parameterized.TestCase):

  def test_runs_the_command_on_its_flags(self):
    self.assertEqual(_run(['--n=3', '--loud']), (None, 'n=3!\n', ''))
    self.assertEqual(_run(['--n', '4']), (None, 'n=4\n', ''))

  def test_a_call_does_not_keep_the_flags_of_the_one_before(self):
    _run(['--n=3', '--loud'])
    self.assertEqual(_run(['--n=3'])[1], 'n=3\n')

  @parameterized.named_parameters(
      ('malformed', ['--n=abc'], "flag --n=abc: invalid literal for int()"),
      ('missing', ['--loud'], 'flag --n=None: Flag --n must have a value'),
      ('no_value', ['--n'], 'Missing value for flag --n'),
      ('unknown', ['--n=1', '--m=2'], "Unknown command line flag 'm'"),
      ('unexpected', ['--n=1', 'extra'], "Unexpected arguments: ['extra']"),
      ('after_dashes', ['--n=1', '--', '--n=2'],
       "Unexpected arguments: ['--n=2']"),
      ('refused_value', ['--n=-1'], 'n must be non-negative, found -1.'),
      ('usage', ['--n=13'], 'n=13 needs --loud'))
  def test_refusals_are_one_line_and_exit_2(self, argv, message):
    code, out, err = _run(argv)
    self.assertEqual(code, command_line.ERROR_EXIT_CODE)
    self.assertEqual(code, 2)
    self.assertEqual(out, '')
    self.assertTrue(err.startswith('error: '), err)
    self.assertIn(message, err)
    self.assertEqual(err.count('\n'), 1, err)

  @parameterized.parameters('--help', '-h', '--helpfull')
  def test_help_prints_the_doc_and_flags_and_exits_0(self, arg):
    code, out, err = _run([arg])  # --n is required, but not for help.
    self.assertEqual(code, 0)
    self.assertEqual(err, '')
    self.assertTrue(out.startswith(_DOC), out)
    self.assertIn('--n: How many.', out)
    self.assertIn('--[no]loud: Shout.', out)

  def test_other_errors_are_not_refusals(self):
    def broken(args):
      del args
      raise KeyError('a bug')

    with self.assertRaises(KeyError):
      command_line.run(_define_flags, broken, _DOC, ['--n=1'])


if __name__ == '__main__':
  absltest.main()
