"""`python -m experiments.privacy_tables`: runs `experiments.studies.privacy_tables`."""

from experiments.studies import privacy_tables

if __name__ == '__main__':
  privacy_tables.main()
