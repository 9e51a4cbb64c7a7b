"""Statistics over seeds that the reports and studies share.

* `mean_se`: a metric's mean over seeds and its standard error; a diverged
  run (a non-finite value) makes the mean NaN and the SE None.
* `mean_curve`: a learning curve's mean and SE over seeds, where seeds may
  end at different rounds (rounds lost to a kill count as spent privacy and
  shorten a run).
* `relative_noise`: the planner's noise on the averaged update over the
  clip, from a run's parameters.
"""

import math
import statistics
from typing import Callable, Optional, Sequence

from tff_dprec.plan import search as plan_search


def mean_se(values: Sequence[float]) -> tuple:
  """(mean, standard error of the mean), SE None for a single value.

  A non-finite value (a diverged run) makes the mean NaN and the SE None.
  """
  if not all(math.isfinite(v) for v in values):
    return math.nan, None
  mean = statistics.fmean(values)
  if len(values) < 2:
    return mean, None
  return mean, statistics.stdev(values) / math.sqrt(len(values))


def mean_curve(seed_curves: Sequence[Sequence[dict]], y_fn: Callable,
               x_fn: Optional[Callable] = None) -> list[tuple]:
  """(x, mean y, SE of y or 0) over seeds, from per-seed curves.

  Each curve is a list of points (dicts with a 'round'). A mean is drawn at
  each round that every seed evaluated before its own last point, and at the
  end: the mean of every seed's last point, at the latest of their rounds.
  A seed can end early (its lost rounds counted as spent privacy), and a mean
  over whichever seeds reached a round would jump; when all seeds end at the
  same round this is every round that all of them evaluated. Rounds where a
  seed's y (or x) is None are left out. x is the round, or the mean over
  seeds of `x_fn(point)`.
  """
  if not seed_curves or not all(seed_curves):
    return []
  by_round = [{p['round']: p for p in points} for points in seed_curves]
  ends = [max(b) for b in by_round]
  shared = sorted(set.intersection(*(
      {r for r in b if r < end} for b, end in zip(by_round, ends))))
  columns = [[b[r] for b in by_round] for r in shared]
  columns.append([b[end] for b, end in zip(by_round, ends)])
  rounds = shared + [max(ends)]
  series = []
  for round_num, points in zip(rounds, columns):
    ys = [y_fn(p) for p in points]
    xs = [round_num] * len(points) if x_fn is None else [
        x_fn(p) for p in points]
    if None in ys or None in xs:
      continue
    mean, se = mean_se(ys)
    series.append((statistics.fmean(xs), mean, se or 0.0))
  return series


def relative_noise(params: dict, clients_per_round: int) -> Optional[float]:
  """The planner's relative noise (noise sd on the mean update / clip) of a
  run's parameters (0 for a no-noise control), or None where the run adds
  no calibrated noise (FedAvg)."""
  if params.get('noise_multiplier') is not None:
    return plan_search.gaussian_relative_noise(params['noise_multiplier'],
                                               clients_per_round)
  if params.get('clip_ratio') is not None:
    return plan_search.dp_rec_relative_noise(params['clip_ratio'],
                                             clients_per_round)
  return None
