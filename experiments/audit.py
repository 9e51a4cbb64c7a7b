"""`python -m experiments.audit`: runs `experiments.studies.audit`."""

from experiments.runner import cli
from experiments.studies import audit

if __name__ == '__main__':
  cli.run_main(audit._define_flags,  # pylint: disable=protected-access
               audit.main, audit.__doc__)
