"""How a run's (aggregator, seed) pairs are shared among processes.

`split_runs` gives each process (a job, `experiments.runner.jobs`) a share
of balanced cost in which the runs that compute alike stay together;
`Claims` and `schedule` let every job train each run once, and a job that
has finished its share take over runs from the end of the others' shares,
so that the jobs end together whatever the costs turn out to be.
"""

import os
import shutil
from typing import Callable, Iterator, Optional

from experiments.runner import registry


def split_runs(runs, jobs: int) -> list:
  """Splits (aggregator, seed) pairs into min(`jobs`, len(`runs`)) shares.

  Runs that sample their clients alike (`AggregatorSpec.sampling`) draw the
  same clients with the same seed, whose round inputs a process makes once
  (`run_cache`), and the runs of one aggregator share its built process.
  So the pairs are put in that order (sampling scheme, then aggregator, as
  first met in `runs`, then seed) and cut into contiguous pieces whose
  largest cost (`AggregatorSpec.relative_cost`) is as small as it can be.
  Within a share, aggregators come costliest first, each with its seeds in
  their order: a share ends with its cheapest runs, the ones another job
  may take over (`schedule`).

  Raises:
    ValueError: If `jobs` < 1.
  """
  if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
    raise ValueError(f'jobs must be a positive int, found {jobs!r}.')
  ordered = _grouped(list(runs))
  if not ordered:
    return []
  costs = [cost(run) for run in ordered]
  bounds = _balanced_cuts(costs, min(jobs, len(ordered)))
  return [_costliest_first(ordered[lo:hi]) for lo, hi in bounds]


def cost(run) -> float:
  """A run's relative cost (its aggregator's `relative_cost`)."""
  return registry.get(run[0]).relative_cost


class Claims:
  """The runs that jobs have taken: one empty file per run in `folder`,
  created exclusively, so that two processes never take the same run."""

  def __init__(self, folder: str):
    self.folder = folder

  def reset(self) -> None:
    """Forgets every claim (before the jobs of a new command start)."""
    shutil.rmtree(self.folder, ignore_errors=True)
    os.makedirs(self.folder, exist_ok=True)

  def take(self, run) -> bool:
    """Claims `run` for this process; False if another job has it."""
    try:
      os.close(os.open(self._path(run),
                       os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
      return False
    return True

  def taken(self, run) -> bool:
    return os.path.exists(self._path(run))

  def _path(self, run) -> str:
    name, seed = run
    return os.path.join(self.folder, f'{name}.seed{int(seed)}')


def schedule(shares, job: int, claims: Claims,
             say: Optional[Callable[[str], None]] = None) -> Iterator[tuple]:
  """The runs job `job` trains, in order, each claimed as it comes.

  First its own share, in order, then runs of the other shares: the last
  unclaimed run of the share with the most unclaimed cost, until none is
  left. A run another job has claimed is skipped. Read lazily: each run
  is claimed only when the job is ready to train it. `say` gets a line for
  each run taken over.
  """
  for run in shares[job]:
    if claims.take(run):
      yield tuple(run)
  while True:
    found = _next_to_take_over(shares, job, claims)
    if found is None:
      return
    owner, run = found
    if claims.take(run):
      if say is not None:
        say(f'job {job} takes over {run[0]} seed {run[1]} from job {owner}.')
      yield tuple(run)


def _next_to_take_over(shares, job, claims) -> Optional[tuple]:
  """(owner, run): the last unclaimed run of the other share with the most
  unclaimed cost, or None when every run is claimed."""
  best = None
  for owner, share in enumerate(shares):
    if owner == job:
      continue
    left = [tuple(run) for run in share if not claims.taken(run)]
    if left:
      left_cost = sum(cost(run) for run in left)
      if best is None or left_cost > best[0]:
        best = (left_cost, owner, left[-1])
  return None if best is None else best[1:]


def _grouped(runs) -> list:
  """`runs` ordered by sampling scheme, aggregator (first met) and seed."""
  names = list(dict.fromkeys(name for name, _ in runs))
  samplings = list(dict.fromkeys(registry.get(n).sampling for n in names))
  return sorted(runs, key=lambda run: (
      samplings.index(registry.get(run[0]).sampling), names.index(run[0]),
      run[1]))


def _balanced_cuts(costs, parts: int) -> list:
  """(lo, hi) bounds of `parts` non-empty contiguous pieces of `costs`
  whose largest sum is the least possible (dynamic programming)."""
  prefix = [0.0]
  for c in costs:
    prefix.append(prefix[-1] + c)
  n = len(costs)
  # best[k][i]: the least largest sum of costs[:i] in k pieces; cut[k][i]
  # where its last piece starts.
  inf = float('inf')
  best = [[inf] * (n + 1) for _ in range(parts + 1)]
  cut = [[0] * (n + 1) for _ in range(parts + 1)]
  best[0][0] = 0.0
  for k in range(1, parts + 1):
    for i in range(k, n + 1):
      for j in range(k - 1, i):
        value = max(best[k - 1][j], prefix[i] - prefix[j])
        if value < best[k][i]:
          best[k][i], cut[k][i] = value, j
  bounds, i = [], n
  for k in range(parts, 0, -1):
    bounds.append((cut[k][i], i))
    i = cut[k][i]
  return bounds[::-1]


def _costliest_first(share) -> list:
  """`share` with its aggregators costliest first (stable), seeds in
  order."""
  names = list(dict.fromkeys(name for name, _ in share))
  order = sorted(names, key=lambda n: -registry.get(n).relative_cost)
  return [run for name in order for run in share if run[0] == name]
