"""`python -m experiments.audit`: runs `experiments.studies.audit`."""

from experiments.studies import audit

if __name__ == '__main__':
  audit.main()
