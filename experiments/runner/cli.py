"""What the command lines share: quiet logs, the task, data and output
flags, and the one-line error with exit code 2 for a bad setting."""

import contextlib
import dataclasses
import sys

from absl import flags
from absl import logging

from experiments.infra import quiet
from experiments.runner import config as config_lib


VERBOSE_HELP = ("Show TensorFlow's C++, absl and gRPC logging (off by "
                'default; a TF_CPP_MIN_LOG_LEVEL or GRPC_VERBOSITY you set '
                'is kept either way).')


def define_verbose_flag() -> flags.FlagHolder:
  """--verbose (`experiments.infra.quiet` reads it before TensorFlow loads)."""
  return flags.DEFINE_bool('verbose', False, VERBOSE_HELP)


def add_verbose_argument(parser) -> None:
  """--verbose for an argparse command line."""
  parser.add_argument('--verbose', action='store_true', help=VERBOSE_HELP)


def quiet_logs() -> None:
  """Keeps absl's and TensorFlow's Python logging out of a run's output.

  Per-round checkpoint lines, Keras INFO, tf.function retracing warnings:
  only errors are shown. absl's `--verbosity` or `--verbose` on the command
  line brings them back.
  """
  if not flags.FLAGS['verbosity'].present and not quiet.verbose_requested(
      sys.argv):
    logging.set_verbosity(logging.ERROR)
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.get_logger().setLevel('ERROR')


def fail(error) -> None:
  """Ends the program with one `error:` line on stderr and exit code 2."""
  print(f'error: {error}', file=sys.stderr)
  sys.exit(2)


def write_failure(error: OSError) -> str:
  """One line for a file that could not be written (a full disk, say)."""
  where = error.filename if error.filename is not None else 'a file'
  return (f'cannot write {where}: {error.strerror or error} (errno '
          f'{error.errno}). What was written before is intact: free space '
          'and rerun the same command to resume.')


@contextlib.contextmanager
def one_line_write_failures():
  """Within: an OSError ends the program with `write_failure`'s line."""
  try:
    yield
  except OSError as e:
    from experiments.infra import worker_reaper  # pylint: disable=g-import-not-at-top
    worker_reaper.reap()
    sys.stdout.flush()
    fail(write_failure(e))


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
