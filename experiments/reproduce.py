"""`python -m experiments.reproduce`: runs `experiments.studies.reproduce`."""

from experiments.runner import cli
from experiments.studies import reproduce

if __name__ == '__main__':
  with cli.one_line_write_failures():  # A full disk: one line.
    reproduce.main()
