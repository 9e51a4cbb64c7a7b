"""`python -m experiments.bench`: runs `experiments.studies.bench`."""

from experiments.studies import bench

if __name__ == '__main__':
  bench.main()
