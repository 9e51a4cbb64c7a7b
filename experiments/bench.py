"""`python -m experiments.bench`: runs `experiments.studies.bench`."""

from experiments.runner import cli
from experiments.studies import bench

if __name__ == '__main__':
  cli.run_main(bench._define_flags,  # pylint: disable=protected-access
               bench.main, bench.__doc__)
