"""`python -m experiments.frontier`: runs `experiments.studies.frontier`."""

from experiments.runner import cli
from experiments.studies import frontier

if __name__ == '__main__':
  cli.run_main(frontier._define_flags,  # pylint: disable=protected-access
               frontier.main, frontier.__doc__)
