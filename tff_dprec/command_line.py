"""How the package's commands parse their flags and refuse bad input.

`python -m tff_dprec.plan` and `python -m tff_dprec.accounting` run the way
the experiments' commands do (`experiments/runner/cli.py`): absl's flags
under `app.run`; `--help` prints the command's doc and flags on stdout
(exit 0); any refusal (a flag that is unknown, missing or malformed, an
unexpected argument, a value the library rejects with TypeError or
ValueError) is one `error:` line on stderr and exit code 2.

Unlike the experiments, each call parses into a `flags.FlagValues` of its
own, not absl's global `FLAGS`: a command's `main(argv)` can be called
again in one process (tests, a notebook) and the library keeps no flag
state. Only the package's `__main__` modules use this module.
"""

import sys
import types
from typing import Callable, Optional, Sequence

from absl import app
from absl import flags

# The exit code of a refusal, as the experiments' commands use it.
ERROR_EXIT_CODE = 2
# What asks for help: absl's help flags, and -h.
HELP_ARGS = frozenset(['-h', '-?', '--help', '-help', '--helpshort',
                       '-helpshort', '--helpfull', '-helpfull'])
# The heading under which the help lists a command's flags.
_HELP_KEY = 'flags'

DefineFlags = Callable[[flags.FlagValues], None]
Command = Callable[[types.SimpleNamespace], None]


def run(define_flags: DefineFlags, command: Command, doc: str,
        argv: Optional[Sequence[str]] = None) -> None:
  """Parses `argv` into the command's flags and runs `command` on them.

  Args:
    define_flags: Defines the command's flags on the `FlagValues` it gets.
    command: Runs the command on the parsed flags (a namespace with one
      attribute per flag); it may raise `app.UsageError`, TypeError or
      ValueError for a refusal.
    doc: What --help prints above the flags (the command's module doc).
    argv: The arguments after the program's name; default sys.argv[1:].

  Raises:
    SystemExit: With code 0 after --help, and `ERROR_EXIT_CODE` after a
      refusal's one line on stderr.
  """
  argv = list(sys.argv[1:] if argv is None else argv)
  values = flags.FlagValues()
  define_flags(values)
  for name in list(values):
    values.register_key_flag_for_module(_HELP_KEY, values[name])
  if HELP_ARGS.intersection(argv[:argv.index('--')] if '--' in argv
                            else argv):
    print(help_text(values, doc))
    sys.exit(0)
  try:
    rest = values(['', *argv])[1:]
  except flags.Error as e:
    fail(e)
  try:
    if rest:
      raise app.UsageError(f'Unexpected arguments: {rest}')
    command(types.SimpleNamespace(**values.flag_values_dict()))
  except (app.UsageError, TypeError, ValueError) as e:
    fail(e)


def run_main(main: Callable[[Sequence[str]], None]) -> None:
  """Runs a command's `main(argv)` as the program, under absl's `app.run`.

  absl's own flags are not the command's: the global `FLAGS` is parsed
  with the program's name alone, and `main` parses the rest (`run`).
  """
  def parse_program_name(argv):
    flags.FLAGS(argv[:1])
    return argv

  app.run(lambda argv: main(argv[1:]), flags_parser=parse_program_name)


def define_federation_flags(values: flags.FlagValues) -> None:
  """--population, --clients_per_round, --rounds and --delta, on `values`."""
  flags.DEFINE_integer('population', None, 'N', flag_values=values)
  flags.DEFINE_integer('clients_per_round', None, 'B', flag_values=values)
  flags.DEFINE_integer('rounds', None, 'T', flag_values=values)
  flags.DEFINE_float('delta', None, 'default: population ** -1.1',
                     flag_values=values)


def help_text(values: flags.FlagValues, doc: str) -> str:
  """`doc`, then the command's flags."""
  return f'{doc.strip()}\n{values.module_help(_HELP_KEY)}'


def fail(error) -> None:
  """Ends the program with one `error:` line on stderr and exit code 2."""
  sys.stdout.flush()
  print(f'error: {" ".join(str(error).split())}', file=sys.stderr)
  sys.exit(ERROR_EXIT_CODE)
