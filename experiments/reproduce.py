"""`python -m experiments.reproduce`: runs `experiments.studies.reproduce`."""

from experiments.studies import reproduce

if __name__ == '__main__':
  reproduce.main()
