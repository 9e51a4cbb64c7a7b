"""`python -m experiments.privacy_tables`: the privacy tables' command.

Runs `experiments.studies.privacy_tables`.
"""

from experiments.runner import cli
from experiments.studies import privacy_tables

if __name__ == '__main__':
  cli.run_main(privacy_tables._define_flags,  # pylint: disable=protected-access
               privacy_tables.main, privacy_tables.__doc__)
