"""`python -m experiments.epsilon_sweep`: the epsilon sweep's command.

Runs `experiments.studies.epsilon_sweep`.
"""

from experiments.runner import cli
from experiments.studies import epsilon_sweep

if __name__ == '__main__':
  cli.run_main(epsilon_sweep._define_flags,  # pylint: disable=protected-access
               epsilon_sweep.main, epsilon_sweep.__doc__)
