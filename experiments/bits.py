"""`python -m experiments.bits`: runs `experiments.studies.bits`."""

from experiments.runner import cli
from experiments.studies import bits

if __name__ == '__main__':
  cli.run_main(bits._define_flags,  # pylint: disable=protected-access
               bits.main, bits.__doc__)
