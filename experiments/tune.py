"""`python -m experiments.tune`: runs `experiments.studies.tune`."""

from experiments.runner import cli
from experiments.studies import tune

if __name__ == '__main__':
  cli.run_main(tune._define_flags,  # pylint: disable=protected-access
               tune.main, tune.__doc__)
