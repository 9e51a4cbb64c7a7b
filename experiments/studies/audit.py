"""Empirical privacy audit of one DP-REC release: `python -m experiments.audit`.

Runs the DP-REC mechanism many times on a pair of neighbouring inputs, a
clipped update v1 = c * s * e_1 (norm exactly l2_clip) and v0 = 0, and turns
the best threshold test on the decoded candidate into a lower bound on epsilon
at the given delta (hypothesis-testing view of DP: any test with false-positive
rate a and true-positive rate b forces e^eps >= (b - delta) / a).

The statistic is T = x_1 / s, the decoded candidate's first coordinate (a
function of the message only). Under v0 every log-weight is 0, the index is
uniform, and T ~ N(0, 1) exactly, so the false-positive rate of {T > t} is the
exact normal tail; under v1 the true-positive rate is estimated from the
trials with a one-sided Clopper-Pearson lower bound, Bonferroni-corrected over
thresholds. The reverse direction ({T < t}, roles swapped) is tested too.

Audit mode only: shared seeds and selection seeds come from a seeded NumPy
generator so that the audit is reproducible; the aggregator never does this.
The lower bound must stay below the accountant's local epsilon
(`tff_dprec.accounting.dp_rec_local_epsilon`, proven accounting).
"""

import math

from absl import app
from absl import flags
import numpy as np
from scipy import stats

from experiments.runner import cli as cli_lib


def run_audit(*, dim: int = 16, clip_ratio: float = 2.0, bits: int = 7,
              groups: int = 4, trials: int = 20000, delta: float = 1e-5,
              confidence: float = 0.95, seed: int = 0) -> dict:
  """Returns the empirical lower bound and the accountant's epsilon."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  from tff_dprec import rec  # pylint: disable=g-import-not-at-top

  s = 1.0
  value = np.zeros(dim, np.float32)
  value[0] = clip_ratio * s

  # A grouped release: `groups` groups of `bits` bits, accounted with the
  # proven accounting (docs/PRIVACY.md). The statistic only needs group 0's
  # candidate, which carries the whole update (the worst split).
  bounds = rec.split_groups([dim], -(-dim // groups))
  total_bits = bits * len(bounds)

  @tf.function
  def release(shared_seed, selection_seed):
    first = None
    for g, (start, end) in enumerate(bounds):
      index = rec.encode(tf.constant(value[start:end]), prior_stddev=s,
                         bits=bits, seed=shared_seed, group=g,
                         selection_seed=selection_seed + g)
      if g == 0:
        first = rec.decode(index, prior_stddev=s, bits=bits, dim=end - start,
                           seed=shared_seed, group=0)[0] / s
    return first

  rng = np.random.default_rng(seed)
  words = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max,
                       size=(trials, 4), dtype=np.int64)
  t_values = np.array([
      float(release(w[:2], w[2:])) for w in words
  ])
  best = _best_lower_bound(t_values, delta, confidence)
  accountant_epsilon = accounting.dp_rec_local_epsilon(
      clip_ratio=clip_ratio, delta=delta, bits=bits, num_groups=len(bounds),
      rounds=1)
  return dict(dim=dim, clip_ratio=clip_ratio, bits=bits,
              total_bits=total_bits, trials=trials,
              delta=delta, confidence=confidence,
              empirical_epsilon_lower_bound=best['epsilon'],
              threshold=best['threshold'], direction=best['direction'],
              accountant_epsilon=accountant_epsilon,
              mean_statistic=float(t_values.mean()))


def _best_lower_bound(t_values, delta, confidence):
  """The largest epsilon lower bound over thresholds and both directions.

  Under v0 the statistic is N(0, 1) exactly; under v1 its tail frequencies
  are bounded by Clopper-Pearson intervals, Bonferroni-corrected over the
  2 x 101 one-sided tests, so the bound holds with `confidence`.
  """
  thresholds = np.linspace(-4.0, 6.0, 101)
  # Two directions x thresholds one-sided bounds, Bonferroni.
  alpha = (1.0 - confidence) / (2 * len(thresholds))
  best = dict(epsilon=0.0, threshold=None, direction=None)
  for t in thresholds:
    for direction in ('upper', 'lower'):
      if direction == 'upper':
        hits = int(np.sum(t_values > t))
        p0 = stats.norm.sf(t)  # exact under v0
        # e^eps >= (P1 - delta) / P0 with P1 lower-bounded.
        p1_low = _clopper_pearson_lower(hits, len(t_values), alpha)
        numerator, denominator = p1_low - delta, p0
      else:
        hits = int(np.sum(t_values < t))
        p0 = stats.norm.cdf(t)
        # e^eps >= (P0 - delta) / P1 with P1 upper-bounded.
        p1_high = _clopper_pearson_upper(hits, len(t_values), alpha)
        numerator, denominator = p0 - delta, p1_high
      if numerator > 0 and denominator > 0:
        eps = math.log(numerator / denominator)
        if eps > best['epsilon']:
          best = dict(epsilon=eps, threshold=float(t), direction=direction)
  return best


def _clopper_pearson_lower(successes, n, alpha):
  if successes == 0:
    return 0.0
  return float(stats.beta.ppf(alpha, successes, n - successes + 1))


def _clopper_pearson_upper(successes, n, alpha):
  if successes == n:
    return 1.0
  return float(stats.beta.ppf(1 - alpha, successes + 1, n - successes))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  if _TRIALS.value < 100:
    cli_lib.fail(f'--trials must be at least 100, found {_TRIALS.value}.')
  result = run_audit(dim=_DIM.value, clip_ratio=_CLIP_RATIO.value,
                     bits=_BITS.value, groups=_GROUPS.value,
                     trials=_TRIALS.value, delta=_DELTA.value,
                     seed=_SEED.value)
  print(f"DP-REC audit: c={result['clip_ratio']} bits={result['bits']} "
        f"x {result['total_bits'] // result['bits']} groups "
        f"d={result['dim']} trials={result['trials']} "
        f"delta={result['delta']:.3g}")
  print(f"  empirical epsilon lower bound ({result['confidence']:.0%} "
        f"confidence): {result['empirical_epsilon_lower_bound']:.3f} "
        f"(test T {'>' if result['direction'] == 'upper' else '<'} "
        f"{result['threshold']})")
  print(f"  accountant epsilon (local, one release): "
        f"{result['accountant_epsilon']:.3f}")


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _DIM, _CLIP_RATIO, _BITS, _GROUPS, _TRIALS, _DELTA, _SEED
  _DIM = flags.DEFINE_integer('dim', 16, 'Dimension of the update.')
  _CLIP_RATIO = flags.DEFINE_float('clip_ratio', 2.0,
                                   'c = l2_clip / noise_stddev.')
  _BITS = flags.DEFINE_integer('bits', 7, 'Index bits per group.')
  _GROUPS = flags.DEFINE_integer('groups', 4, 'Groups of the release.')
  _TRIALS = flags.DEFINE_integer('trials', 20000,
                                 'Releases per input (at least 100).')
  _DELTA = flags.DEFINE_float('delta', 1e-5, 'Delta of the bound.')
  _SEED = flags.DEFINE_integer('seed', 0, "The audit's NumPy seed.")
