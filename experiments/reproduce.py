"""`python -m experiments.reproduce`: runs `experiments.studies.reproduce`."""

from experiments.runner import cli
from experiments.studies import reproduce

if __name__ == '__main__':
  cli.run_main(reproduce._define_flags,  # pylint: disable=protected-access
               reproduce.main, reproduce.__doc__)
