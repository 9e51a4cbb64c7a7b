"""`python -m experiments.frontier`: runs `experiments.studies.frontier`."""

from experiments.studies import frontier

if __name__ == '__main__':
  frontier.cli()
