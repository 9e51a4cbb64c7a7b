"""`python -m experiments.worst_pair`: runs `experiments.studies.worst_pair`.
"""

from experiments.runner import cli
from experiments.studies import worst_pair

if __name__ == '__main__':
  cli.run_main(worst_pair._define_flags,  # pylint: disable=protected-access
               worst_pair._main, worst_pair.__doc__)  # pylint: disable=protected-access
