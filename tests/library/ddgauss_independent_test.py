"""DDGauss's epsilon against an independent implementation of its formulas.

`tff_dprec.accounting.ddgauss_epsilon` is recomputed here from the papers,
with its own code (exact rational arithmetic where the project uses series,
plain-Python sums, a different algebraic form of the conversion):

* Setup of TFF 0.87's `DistributedDpSumFactory`
  (tensorflow_federated/python/aggregators/distributed_dp.py and
  discretization.py; Kairouz, Liu, Steinke, "The Distributed Discrete
  Gaussian Mechanism for Federated Learning with Secure Aggregation", ICML
  2021, arXiv:2102.06387, Sections 4.1-4.4): padding for the rotation, the
  scale 1/gamma that fits k stddevs of the aggregate into b bits (capped at
  1e6), the L2 bound inflated by (conditional) randomized rounding, plus
  TFF's 1e-5 leeway, times the scale.
* RDP of the sum of n discrete Gaussians N_Z(0, sigma^2) per coordinate
  (Kairouz et al., Theorem 1 for tau, Proposition 14 / Eq. 17 for the RDP),
  in the two-term form of the authors' `compute_rdp_dgaussian_simplified`
  (google-research/federated, distributed_dp/accounting_utils.py).
* Poisson subsampling with q = B/N by the general upper bound of Zhu and
  Wang ("Poisson Subsampled Renyi Differential Privacy", ICML 2019), as the
  authors' `_compute_rdp_subsampled(upper_bound=True)` uses it, never above
  the unamplified RDP, composed over T rounds.
* RDP to (epsilon, delta) by Canonne, Kamath, Steinke (NeurIPS 2020,
  arXiv:2004.00010, Proposition 12), the conversion of dp_accounting's
  `compute_epsilon`, which the project's default `conversion='tight'` calls.

Tolerance: relative 1e-11. Both sides evaluate the same closed forms with a
few hundred double-precision operations of condition number at most ~1e2,
so they can differ by ~1e-13 (observed: <= 4e-14 per order, <= 3e-15 on
epsilon). A modelling change is far above it: dropping TFF's 1e-5 leeway
moves epsilon by ~1e-5 (checked below).
"""

import fractions
import math
import statistics

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from tff_dprec import accounting
from tff_dprec.accounting import baselines
from tff_dprec.accounting import rdp_bounds

RTOL = 1e-11
# Integer orders (Zhu and Wang's bound is for integer orders): the authors'
# grid range(2, 129) + (256,) with 160 and 192 added, as the project does.
ORDERS = tuple(range(2, 129)) + (160, 192, 256)

# name, noise multiplier z, clip C, bits, B, N, T, dimension, delta, beta,
# rotation.
CONFIGS = (
    # StackOverflow-like: tiny q = 40/342477 (the bracket of Zhu and Wang is
    # 1 + O(q^2): needs care against cancellation).
    ('so_like', 0.8, 0.2, 16, 40, 342477, 50, 50001, 342477**-1.1, 0.0, 'dft'),
    # MNIST-like: q = 0.1, many rounds.
    ('mnist_like', 8.0, 0.2, 16, 10, 100, 1000, 61706, 100**-1.1, 0.0, 'dft'),
    # At 16 bits the scaled noise is in the thousands and tau underflows to
    # 0: this one has scaled sigma ~ 1, so tau ~ 6e-4 and both terms of the
    # RDP are the minimum at some orders; beta > 0 makes the conditional
    # rounding bound the smaller one; Hadamard padding 5 -> 8.
    ('tau_active', 2.0, 1.0, 7, 20, 1000, 100, 5, 1e-5, math.exp(-0.5),
     'hd'),
)


def _tff_setup(z, clip, bits, n, dim, beta, rotation, leeway=1e-5):
  """What TFF's `DistributedDpSumFactory` derives, in the scaled domain."""
  # DFT pads to an even length, Hadamard to a power of two.
  padded = dim + dim % 2 if rotation == 'dft' else 1 << (dim - 1).bit_length()
  # k: the two-sided standard normal quantile of the modular clipping
  # probability 1e-4 (TFF: sqrt(2) erfcinv(p)).
  k = -statistics.NormalDist().inv_cdf(1e-4 / 2)
  local_stddev = z * clip / math.sqrt(n)
  # Kairouz et al. Sec. 4.4 / TFF `_heuristic_scale_factor`: solve
  # 2^b = 2 k sqrt(C^2 n^2 / d + (gamma^2 / 4 + sigma^2) n) / gamma for gamma.
  gamma = 2.0 * k * math.sqrt(clip * clip * n * n / padded +
                              n * local_stddev**2) / math.sqrt(
                                  2.0**(2 * bits) - n * k * k)
  scale = min(1.0 / gamma, 1e6)  # TFF's MAX_SCALE_FACTOR.
  gamma = 1.0 / scale
  # Kairouz et al. Theorem 1 / Sec. 4.1 (TFF `inflated_l2_norm_bound`): the
  # norm after rounding to the grid gamma Z^d, unconditionally C + gamma
  # sqrt(d), with conditional rounding (beta > 0) also the second bound.
  norm = clip + gamma * math.sqrt(padded)
  if beta > 0:
    norm = min(norm, math.sqrt(
        clip**2 + gamma**2 * padded / 4.0 + math.sqrt(2.0 * math.log(
            1.0 / beta)) * gamma * (clip + gamma * math.sqrt(padded) / 2.0)))
  sensitivity = (norm + leeway) * scale  # TFF adds the leeway, then scales.
  sigma = local_stddev * scale  # Per-client discrete Gaussian's scale.
  # Kairouz et al. Theorem 1.
  tau = 10.0 * math.fsum(
      math.exp(-2.0 * math.pi**2 * sigma**2 * j / (j + 1.0))
      for j in range(1, n))
  return dict(padded=padded, scale=scale, sensitivity=sensitivity,
              sigma=sigma, tau=tau)


def _ddg_rdp(alpha, s, n):
  """Kairouz et al. Prop. 14 / Eq. 17: RDP of the sum of n discrete
  Gaussians, each of scale sigma, for an L2 sensitivity Delta in d dims."""
  ratio = s['sensitivity'] / math.sqrt(n * s['sigma']**2)
  d = s['padded']
  return min(alpha * ratio**2 / 2.0 + s['tau'] * d,
             alpha / 2.0 * (ratio + s['tau'] * math.sqrt(d))**2)


def _zhu_wang(alpha, q, rdp):
  """Zhu and Wang 2019, general upper bound, integer alpha >= 2:
    (alpha-1) eps'(alpha) <= log[(1-q)^(alpha-1) (1 + (alpha-1) q)
        + C(alpha,2) q^2 (1-q)^(alpha-2) e^{eps(2)}
        + 3 sum_{l=3}^{alpha} C(alpha,l) q^l (1-q)^(alpha-l) e^{(l-1) eps(l)}].
  `q` is a Fraction: the first term is formed exactly, so 'bracket - 1'
  (O(q^2) at small q) has no cancellation error.
  """
  first = (1 - q)**(alpha - 1) * (1 + (alpha - 1) * q)  # Exact.
  qf = float(q)
  log_terms = [
      math.log(math.comb(alpha, l)) + l * math.log(qf) +
      (alpha - l) * math.log1p(-qf) + (l - 1) * rdp(l) +
      (math.log(3.0) if l >= 3 else 0.0) for l in range(2, alpha + 1)
  ]
  if max(log_terms) < 0.0:  # Bracket near 1: log1p of (first - 1) + rest.
    log_bracket = math.log1p(
        float(first - 1) + math.fsum(math.exp(t) for t in log_terms))
  else:  # Far from 1: log-sum-exp.
    terms = [math.log(float(first))] + log_terms
    top = max(terms)
    log_bracket = top + math.log(math.fsum(math.exp(t - top) for t in terms))
  return max(log_bracket, 0.0) / (alpha - 1)


def _rdp_to_epsilon(orders, rdp, delta):
  """Canonne, Kamath, Steinke Prop. 12: (alpha, rho)-RDP implies
  (eps, delta)-DP with delta = e^{(alpha-1)(rho-eps)} (1-1/alpha)^alpha /
  (alpha-1); solved for eps, minimized over the orders."""
  best = math.inf
  for alpha, rho in zip(orders, rdp):
    # Renyi divergence >= KL, and TV <= sqrt(1 - e^{-KL}) (Bretagnolle-
    # Huber): epsilon 0 when that is <= delta (dp_accounting does the same).
    if 1.0 - math.exp(-rho) < delta**2:
      return 0.0
    eps = rho + (alpha * math.log(1.0 - 1.0 / alpha) - math.log(alpha - 1.0) +
                 math.log(1.0 / delta)) / (alpha - 1.0)
    best = min(best, eps)
  return max(best, 0.0)


def _independent(z, clip, bits, n, population, rounds, dim, delta, beta,
                 rotation, leeway=1e-5):
  """Returns (epsilon, setup, per-order composed RDP)."""
  s = _tff_setup(z, clip, bits, n, dim, beta, rotation, leeway)
  q = fractions.Fraction(n, population)
  rdp = lambda a: _ddg_rdp(a, s, n)
  composed = []
  for alpha in ORDERS:
    value = rdp(alpha)
    if q < 1:
      value = min(value, _zhu_wang(alpha, q, rdp))
    composed.append(rounds * value)
  return _rdp_to_epsilon(ORDERS, composed, delta), s, composed


def _project_kwargs(z, clip, bits, n, population, rounds, dim, delta, beta,
                    rotation):
  return dict(noise_multiplier=z, l2_clip=clip, bits=bits,
              clients_per_round=n, population=population, rounds=rounds,
              dimension=dim, delta=delta, beta=beta, rotation_type=rotation)


class DDGaussIndependentTest(parameterized.TestCase):

  def test_same_order_grid(self):
    self.assertEqual(tuple(baselines.DDGAUSS_ORDERS), ORDERS)

  @parameterized.named_parameters(*CONFIGS)
  def test_params_match(self, z, clip, bits, n, population, rounds, dim,
                        delta, beta, rotation):
    del population, rounds, delta
    s = _tff_setup(z, clip, bits, n, dim, beta, rotation)
    p = baselines.ddgauss_params(
        noise_multiplier=z, l2_clip=clip, bits=bits, clients_per_round=n,
        dimension=dim, beta=beta, rotation_type=rotation)
    self.assertEqual(p.padded_dim, s['padded'])
    np.testing.assert_allclose(
        [p.scale, p.l2_sensitivity, p.scaled_local_stddev, p.tau],
        [s['scale'], s['sensitivity'], s['sigma'], s['tau']], rtol=RTOL,
        atol=0.0)

  @parameterized.named_parameters(*CONFIGS)
  def test_subsampled_rdp_per_order_matches(self, *config):
    # The project does not expose DDGauss's composed RDP curve; its
    # subsampling bound is `rdp_bounds.zhu_wang_upper_bound`, fed here with the
    # independent base curve at every integer order.
    z, clip, bits, n, population, rounds, dim, _, beta, rotation = config
    _, s, composed = _independent(*config)
    base = np.array([_ddg_rdp(a, s, n) for a in range(2, max(ORDERS) + 1)])
    orders = np.array(ORDERS)
    project = rounds * np.minimum(
        base[orders - 2],
        rdp_bounds.zhu_wang_upper_bound(n / population, base, orders))
    np.testing.assert_allclose(project, composed, rtol=RTOL, atol=0.0)
    del z, clip, bits, dim, beta, rotation

  @parameterized.named_parameters(*CONFIGS)
  def test_epsilon_matches(self, *config):
    expected, _, _ = _independent(*config)
    got = accounting.ddgauss_epsilon(**_project_kwargs(*config))
    self.assertGreater(expected, 0.0)
    self.assertLessEqual(abs(got - expected), RTOL * expected,
                         f'project {got!r} vs independent {expected!r}')

  @parameterized.named_parameters(*CONFIGS[:2])
  def test_tolerance_detects_a_modelling_change(self, *config):
    # Without TFF's 1e-5 leeway on the norm bound the epsilon moves by far
    # more than RTOL: the comparison above is not vacuous.
    with_leeway, _, _ = _independent(*config)
    without, _, _ = _independent(*config, leeway=0.0)
    self.assertGreater(abs(with_leeway - without), 1e4 * RTOL * with_leeway)


if __name__ == '__main__':
  absltest.main()
