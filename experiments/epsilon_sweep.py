"""`python -m experiments.epsilon_sweep`: runs `experiments.studies.epsilon_sweep`."""

from experiments.studies import epsilon_sweep

if __name__ == '__main__':
  epsilon_sweep.cli()
