"""`python -m experiments.tune`: runs `experiments.studies.tune`."""

from experiments.studies import tune

if __name__ == '__main__':
  tune.cli()
