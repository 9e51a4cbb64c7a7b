"""What the command lines share: one way to run them (absl's flags and
`app.run`, one line and exit code 2 for any refusal), quiet logs, and the
task, data and output flags.

Every entry point has one shape. Its module defines `_define_flags()`, called
only when it runs as a program (tests import the module), and `main(argv)`,
argv being absl's: the program's name, then positional arguments. The entry
point `experiments/<name>.py` hands both to `run_main`.
"""

import dataclasses
import functools
import sys
from typing import Callable, Sequence

from absl import app
from absl import flags
from absl import logging

from experiments.runner import config as config_lib


VERBOSE_HELP = ("Show TensorFlow's C++, absl and gRPC logging (off by "
                'default; a TF_CPP_MIN_LOG_LEVEL or GRPC_VERBOSITY you set '
                'is kept either way).')
# What asks for help: absl's help flags, and -h.
HELP_ARGS = frozenset(['-h', '-?', '--help', '-help', '--helpshort',
                       '-helpshort', '--helpfull', '-helpfull'])
# absl renders a command's flags as the key flags of this name, its heading.
_HELP_KEY = 'flags'


def run_main(define_flags: Callable[[], None],
             main: Callable[[list], object], doc: str) -> None:
  """Runs a command: `python -m experiments.<name>` calls this.

  Defines --verbose and the command's flags, parses them and runs `main`
  under `app.run`. `--help` prints `doc` and the command's flags (exit 0);
  a bad flag, a bad setting (`fail`, `app.UsageError`) or a file that
  cannot be written (a full disk) ends it with one `error:` line on stderr
  and exit code 2.

  Args:
    define_flags: The command's `_define_flags`.
    main: The command's `main(argv)`.
    doc: What --help prints above the flags (the command's module doc).
  """
  define_command_flags(define_flags)
  if 'tensorflow_federated' in sys.modules:
    # Its workers die with the program, and its ServiceManagers' `__del__`
    # print nothing at exit (below a refusal's line, say).
    from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
    worker_reaper.install()
  app.run(functools.partial(call_main, main),
          flags_parser=functools.partial(parse_flags, doc=doc))


def define_command_flags(define_flags: Callable[[], None]) -> list:
  """Defines --verbose and `define_flags()`'s flags; returns their names."""
  before = set(flags.FLAGS)
  define_verbose_flag()
  define_flags()
  names = sorted(set(flags.FLAGS) - before)
  for name in names:
    flags.FLAGS.register_key_flag_for_module(_HELP_KEY, flags.FLAGS[name])
  return names


def parse_flags(argv: Sequence[str], doc: str) -> list:
  """absl's parser for a command (`app.run`'s `flags_parser`).

  Returns what `main` gets: the program's name, then the positional
  arguments. A help flag prints `doc` and the command's flags on stdout and
  exits with 0 (absl's own help exits with 1 and lists only the flags of the
  entry point's file, none); absl's error for a bad flag becomes `fail`'s
  one line (absl prints a usage block and exits with 1).
  """
  arguments = list(argv[1:])
  if '--' in arguments:
    arguments = arguments[:arguments.index('--')]
  if HELP_ARGS.intersection(arguments):
    full = bool({'--helpfull', '-helpfull'}.intersection(arguments))
    print(help_text(doc, full=full))
    sys.exit(0)
  try:
    return flags.FLAGS(list(argv))
  except flags.Error as e:
    fail(' '.join(str(e).split()))


def help_text(doc: str, full: bool = False) -> str:
  """`doc`, then the command's flags (or every flag absl knows if `full`)."""
  if full:
    return f'{doc.strip()}\n{flags.FLAGS.get_help()}'
  return (f'{doc.strip()}\n{flags.FLAGS.module_help(_HELP_KEY)}\n\n'
          'Try --helpfull to list every flag.')


def call_main(main: Callable[[list], object], argv: list):
  """`main(argv)`, its refusals in one line (`app.run`'s main).

  `app.UsageError` (unexpected arguments, say) gets `fail`'s line where
  absl would print a usage block; an OSError (a full disk, say) gets
  `write_failure`'s, once TFF's workers are reaped.
  """
  if _quiet_requested():
    # app.run has set absl's logging to INFO; errors only, as `quiet_logs`
    # (which quiets TensorFlow's logger too, importing it).
    logging.set_verbosity(logging.ERROR)
  try:
    return main(argv)
  except app.UsageError as e:
    fail(e)
  except OSError as e:
    from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
    worker_reaper.reap()
    fail(write_failure(e))


def define_verbose_flag() -> flags.FlagHolder:
  """--verbose (`experiments.infra.quiet` reads it before TensorFlow loads)."""
  return flags.DEFINE_bool('verbose', False, VERBOSE_HELP)


def quiet_logs() -> None:
  """Keeps absl's and TensorFlow's Python logging out of a run's output.

  Per-round checkpoint lines, Keras INFO, tf.function retracing warnings:
  only errors are shown. absl's `--verbosity` or `--verbose` on the command
  line brings them back.
  """
  if _quiet_requested():
    logging.set_verbosity(logging.ERROR)
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.get_logger().setLevel('ERROR')


def verbose_requested() -> bool:
  """Whether the parsed --verbose flag (where the command defines it) is set."""
  return 'verbose' in flags.FLAGS and bool(flags.FLAGS['verbose'].value)


def _quiet_requested() -> bool:
  """Neither absl's --verbosity nor --verbose is on the command line."""
  return not flags.FLAGS['verbosity'].present and not verbose_requested()


def fail(error) -> None:
  """Ends the program with one `error:` line on stderr and exit code 2."""
  sys.stdout.flush()
  print(f'error: {error}', file=sys.stderr)
  sys.exit(2)


def write_failure(error: OSError) -> str:
  """One line for a file that could not be written (a full disk, say)."""
  where = error.filename if error.filename is not None else 'a file'
  return (f'cannot write {where}: {error.strerror or error} (errno '
          f'{error.errno}). What was written before is intact: free space '
          'and rerun the same command to resume.')


@dataclasses.dataclass(frozen=True)
class StudyFlags:
  """The flags every study has: its task, and where data and results live."""
  task: flags.FlagHolder
  data_dir: flags.FlagHolder
  population: flags.FlagHolder
  output_dir: flags.FlagHolder

  def population_value(self):
    """`--population` parsed (`config.parse_population`)."""
    return config_lib.parse_population(self.population.value)


def define_study_flags(output_dir: str) -> StudyFlags:
  """Defines --task, --data_dir, --population and --output_dir."""
  return StudyFlags(
      task=flags.DEFINE_enum('task', 'stackoverflow_lr', config_lib.TASKS,
                             'Task.'),
      data_dir=flags.DEFINE_string('data_dir', 'data_cache',
                                   'Data directory.'),
      population=flags.DEFINE_string('population', None,
                                     config_lib.POPULATION_HELP),
      output_dir=flags.DEFINE_string('output_dir', output_dir,
                                     'Where runs and the results go.'))
