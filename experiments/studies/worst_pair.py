"""Where the one-message bound stood, and what the worst pair gives.

  python -m experiments.worst_pair

docs/PRIVACY.md Section 11.4. At four settings (the main job; Fashion-MNIST
at epsilon 3; the frontier's B = 2560; the main job's federation with 7
bits), compares, for the one-message substitution profile of Section 9.2's
step 3:

* the bound without the worst pair (step 3 (a) and (b): the RDP conversion
  and the triangle through P_0), `'without'`;
* the default, with the certified profile of the antipodal pair for one
  group (Section 11.3), `'default'`;
* a Monte Carlo of the worst pair's profile, mean - 4 SE (a lower
  estimate; `'monte_carlo'`): for one group the larger of a plain Monte
  Carlo (on a grid of step MC_STEP, each epsilon read at the point above)
  and one with xi_1 integrated (`conditional_monte_carlo`, which resolves
  the tail). For one group the worst pair is the antipodal
  one (Theorem 11.1). For M groups the antipodal pair with the norm split
  evenly is only a candidate, so its Monte Carlo c is only an upper
  estimate of what any accountant could certify.

and the clip ratio c that each gives after subsampling and composition
(the same pipeline, only step 3 replaced). Prints one table per setting;
`--samples` and `--seed` fix the Monte Carlo.
"""

import contextlib
import dataclasses
import math
import time
from typing import Iterator, Optional

import numpy as np
from scipy import special

from tff_dprec import accounting
from tff_dprec.accounting import calibration
from tff_dprec.accounting import message_profile
from tff_dprec.accounting import pld_accountant
from tff_dprec.accounting import profile
from tff_dprec.accounting import worst_pair as worst_pair_lib
from tff_dprec.plan import search as plan_search

MODES = ('without', 'default', 'monte_carlo')
# The Monte Carlo's coarse epsilon grid and its end (0 beyond: a lower
# estimate only, never used for a printed epsilon).
MC_STEP = 0.02
MC_MAX_EPSILON = 12.0
SHOWN_EPSILONS = (0.5, 1.0, 2.0, 4.0, 6.0, 8.0)


@dataclasses.dataclass(frozen=True)
class Setting:
  name: str
  population: int
  clients_per_round: int
  rounds: int
  target_epsilon: float
  num_groups: int
  bits: Optional[int] = None  # None: the planner's choice from c.

  def federation(self) -> dict:
    return dict(population=self.population,
                clients_per_round=self.clients_per_round, rounds=self.rounds)


SETTINGS = (
    Setting('main job', 342477, 40, 50, 1.0, 1),
    Setting('Fashion-MNIST', 100, 10, 1000, 3.0, 10),
    Setting('frontier B = 2560', 342477, 2560, 50, 1.0, 1),
    Setting('7 bits', 342477, 40, 50, 1.0, 1, bits=7),
)


def monte_carlo_values(clip_ratio: float, bits: int, num_groups: int,
                       epsilons: np.ndarray, samples: int, seed: int):
  """(mean, SE) of the antipodal pair's H at `epsilons`, groups at c/sqrt(M).

  One group: sum_k (softmax(c xi)_k - gamma softmax(-c xi)_k)_+ per sample.
  M groups: E_P[(1 - gamma / L)_+] with L the likelihood ratio of an
  outcome drawn from P (the product over groups).
  """
  rng = np.random.default_rng(seed)
  k = 2**bits
  gammas = np.exp(np.asarray(epsilons, dtype=np.float64))
  c = clip_ratio / math.sqrt(num_groups)
  batch = max(1, 2**22 // (k * num_groups))
  values = []
  for start in range(0, samples, batch):
    n = min(batch, samples - start)
    x = c * rng.standard_normal((n, num_groups, k))
    p, q = special.softmax(x, axis=2), special.softmax(-x, axis=2)
    if num_groups == 1:
      h = np.stack([np.maximum(p[:, 0] - g * q[:, 0], 0.0).sum(axis=1)
                    for g in gammas], axis=1)
    else:
      u = rng.random((n, num_groups, 1))
      idx = (p.cumsum(axis=2) < u).sum(axis=2, keepdims=True)
      idx = np.minimum(idx, k - 1)
      log_l = (np.log(np.take_along_axis(p, idx, 2)) -
               np.log(np.take_along_axis(q, idx, 2))).sum(axis=(1, 2))
      h = np.maximum(1.0 - gammas[None, :] * np.exp(-log_l)[:, None], 0.0)
    values.append(h)
  h = np.concatenate(values)
  return h.mean(axis=0), h.std(axis=0) / math.sqrt(h.shape[0])


def conditional_monte_carlo(clip_ratio: float, bits: int,
                            gammas: np.ndarray, samples: int, seed: int,
                            batches: int = 10):
  """(mean, SE) of the one-group antipodal H at `gammas`, xi_1 integrated.

  (U, V) drawn from their joint law (samples of xi_2..K); xi_1 integrated
  by the midpoint rule on [-9, 12] (steps of 0.02, each cell at its
  midpoint), so that the tail at large epsilon, which large xi_1 makes,
  is resolved. The hockey stick of each batch's discrete pair is exact
  at every gamma at once; the SE is that of the batch means.
  """
  rng = np.random.default_rng(seed)
  k = 2**bits
  edges = np.arange(-9.0, 12.0 + 1e-9, 0.02)
  mid = (edges[1:] + edges[:-1]) / 2
  weight = np.diff(special.ndtr(edges))
  per_batch = max(1, samples // batches)
  results = []
  for _ in range(batches):
    xi = rng.standard_normal((per_batch, k - 1))
    log_u = special.logsumexp(clip_ratio * xi, axis=1)
    log_v = special.logsumexp(-clip_ratio * xi, axis=1)
    cx = clip_ratio * mid
    a = special.expit(np.subtract.outer(cx, log_u))
    b = special.expit(-np.add.outer(cx, log_v))
    mass = k * weight[:, None] / per_batch
    pair = worst_pair_lib.sorted_pair((mass * a).ravel(),
                                      (mass * b).ravel())
    j = np.searchsorted(-pair.ratio, -gammas, side='left')
    results.append(np.maximum(pair.cum_a[j] - gammas * pair.cum_b[j], 0.0))
  results = np.array(results)
  return results.mean(axis=0), results.std(axis=0) / math.sqrt(batches)


def monte_carlo_profile(clip_ratio, bits, num_groups, step, max_epsilon,
                        samples, seed) -> profile.Profile:
  """mean - 4 SE on the grid i * step, each read at the coarse point above.

  One group: `conditional_monte_carlo` on every grid point. M groups:
  `monte_carlo_values` on a coarse grid, 0 beyond MC_MAX_EPSILON.
  """
  fine = step * np.arange(int(math.ceil(max_epsilon / step)) + 1)
  coarse = MC_STEP * np.arange(int(MC_MAX_EPSILON / MC_STEP) + 1)
  mean, se = monte_carlo_values(clip_ratio, bits, num_groups, coarse,
                                samples, seed)
  lower = np.maximum(mean - 4.0 * se, 0.0)
  above = np.ceil(fine / MC_STEP - 1e-9).astype(np.int64)
  values = np.where(above < coarse.size,
                    lower[np.minimum(above, coarse.size - 1)], 0.0)
  if num_groups == 1:
    # The tail, which the plain Monte Carlo cannot resolve.
    mean, se = conditional_monte_carlo(clip_ratio, bits, np.exp(fine),
                                       samples, seed + 1)
    values = np.maximum(values, mean - 4.0 * se)
  return profile.Profile(step, np.maximum(values, 0.0))


@contextlib.contextmanager
def step_three(mode: str, samples: int = 20000, seed: int = 0
               ) -> Iterator[None]:
  """Within it, the accountant's step 3 is `mode`'s (see the docstring)."""
  if mode not in MODES:
    raise ValueError(f'mode must be one of {MODES}, found {mode!r}.')
  original = message_profile._message_profiles  # pylint: disable=protected-access

  def replaced(clip_ratio, bits, num_groups, max_epsilon):
    forward, reverse, substitution = original(clip_ratio, bits, num_groups,
                                              max_epsilon)
    c = clip_ratio * message_profile._FLOAT32_SLACK  # pylint: disable=protected-access
    step = substitution.step
    if mode == 'without':
      substitution = _without_worst_pair(clip_ratio, bits, num_groups,
                                         max_epsilon)
    elif mode == 'monte_carlo':
      substitution = monte_carlo_profile(c, bits, num_groups, step,
                                         max_epsilon, samples, seed)
    return forward, reverse, substitution

  _clear_caches()
  message_profile._message_profiles = replaced  # pylint: disable=protected-access
  try:
    yield
  finally:
    message_profile._message_profiles = original  # pylint: disable=protected-access
    _clear_caches()


def _without_worst_pair(clip_ratio, bits, num_groups, max_epsilon):
  bounds = message_profile.substitution_bounds(clip_ratio, bits, num_groups,
                                               max_epsilon)
  return profile.minimum(*(bound for name, bound in bounds.items()
                           if name != 'worst_pair'))


def _clear_caches():
  message_profile._draw_pld.cache_clear()  # pylint: disable=protected-access
  pld_accountant._EPSILONS.clear()  # pylint: disable=protected-access
  calibration.clear_memo()


def bits_of(setting: Setting) -> int:
  if setting.bits is not None:
    return setting.bits
  delta = accounting.default_delta(setting.population)
  return plan_search.auto_bits(lambda b: accounting.calibrate_clip_ratio(
      target_epsilon=setting.target_epsilon, bits=b,
      num_groups=setting.num_groups, delta=delta,
      **setting.federation()))[0]


def clip_ratio(setting: Setting, bits: int, mode: str, samples: int,
               seed: int) -> float:
  with step_three(mode, samples, seed):
    return accounting.calibrate_clip_ratio(
        target_epsilon=setting.target_epsilon, bits=bits,
        num_groups=setting.num_groups,
        delta=accounting.default_delta(setting.population),
        **setting.federation())


def one_message(c, bits, num_groups, samples, seed):
  """{mode: values at SHOWN_EPSILONS}, and the Monte Carlo's SE."""
  eps = np.array(SHOWN_EPSILONS)
  out = {}
  for mode in ('without', 'default'):
    with step_three(mode):
      _, _, sub = message_profile.message_profiles(
          clip_ratio=c, bits=bits, num_groups=num_groups,
          max_epsilon=max(eps) + 1.0)
    out[mode] = sub.value(eps)
  c_used = c * message_profile._FLOAT32_SLACK  # pylint: disable=protected-access
  if num_groups == 1:
    mean, se = conditional_monte_carlo(c_used, bits, np.exp(eps), samples,
                                       seed)
  else:
    mean, se = monte_carlo_values(c_used, bits, num_groups, eps, samples,
                                  seed)
  out['monte_carlo'] = mean
  return out, se


def report(setting: Setting, samples: int, seed: int, print_fn=print):
  """Prints the setting's table; returns {mode: c}."""
  start = time.time()
  bits = bits_of(setting)
  cs = {mode: clip_ratio(setting, bits, mode, samples, seed)
        for mode in MODES}
  values, se = one_message(cs['default'], bits, setting.num_groups,
                           samples, seed)
  print_fn(f'\n{setting.name}: N = {setting.population:,}, '
           f'B = {setting.clients_per_round}, T = {setting.rounds}, '
           f'epsilon {setting.target_epsilon:g}, {bits} bits, '
           f'{setting.num_groups} group(s)')
  print_fn(f'  one message at the default c = {cs["default"]:.5f}:')
  print_fn('    epsilon  ' + ''.join(f'{e:>11g}' for e in SHOWN_EPSILONS))
  for mode in MODES:
    print_fn(f'    {mode:<9}' + ''.join(f'{v:11.4e}' for v in values[mode]))
  print_fn('    MC SE    ' + ''.join(f'{v:11.1e}' for v in se))
  mc = cs['monte_carlo']
  for mode in MODES:
    print_fn(f'  c {mode:<12} {cs[mode]:.5f}  ({cs[mode] / mc - 1:+.2%} '
             'against the Monte Carlo)')
  print_fn(f'  ({samples:,} Monte Carlo samples, seed {seed}; '
           f'{time.time() - start:.0f} s)')
  return dict(cs, bits=bits)


def main(samples: int = 20000, seed: int = 0, print_fn=print) -> list:
  return [report(s, samples, seed, print_fn) for s in SETTINGS]


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _SAMPLES, _SEED
  from absl import flags  # pylint: disable=g-import-not-at-top
  _SAMPLES = flags.DEFINE_integer('samples', 20000,
                                  'Monte Carlo samples per profile.',
                                  lower_bound=100)
  _SEED = flags.DEFINE_integer('seed', 0, 'Monte Carlo seed.')


def _main(argv):
  del argv
  main(_SAMPLES.value, _SEED.value)
