"""`python -m experiments.bits`: runs `experiments.studies.bits`."""

from experiments.studies import bits

if __name__ == '__main__':
  bits.cli()
