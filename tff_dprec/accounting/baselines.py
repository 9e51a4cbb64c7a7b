"""Accountants of the baselines: DP-FedAvg and TFF's distributed DDGauss.

* DP-FedAvg (McMahan et al. 2018): Poisson-subsampled Gaussian, q = B/N,
  T rounds, add/remove neighbours, sensitivity C of the sum divided by the
  fixed B. A theorem for Poisson sampling (each client independently with
  probability q), which is how the experiments sample DP-FedAvg's clients.
  For B distinct clients per round it is an assumption (common practice,
  and what the DP-REC and DDGauss papers do), not a proof.
* DDGauss (Kairouz, Liu, Steinke, ICML 2021): the distributed discrete
  Gaussian with the parameters TFF's `DistributedDpSumFactory` derives
  (scale factor, conditional-rounding-inflated L2 sensitivity), the RDP bound
  of its Proposition 14 / Eq. 17 with the tau term for n clients
  (Theorem 1), amplified by Poisson subsampling with the general upper bound
  of Zhu and Wang (ICML 2019). The tau term needs exactly n = B clients
  (each adds 1/B of the noise), so the sample must have fixed size, while
  the amplification is Poisson's: for B distinct clients per round this is
  an ASSUMPTION (docs/PRIVACY.md, section 8), not a theorem.

DP-FedAvg's default accounting is `'min_pld_rdp'`: dp_accounting's
pessimistic PLD of the Poisson-subsampled Gaussian (docs/PRIVACY.md,
Section 9.1), and the smaller of that and the RDP epsilon. DDGauss has an
RDP accountant only.

RDP to (epsilon, delta): `conversion='tight'` (default) is dp_accounting's
conversion (Canonne, Kamath, Steinke 2020, Prop. 12);
`conversion='classic'` is epsilon = RDP(a) + log(1/delta)/(a - 1) (Mironov
2017), as the DP-REC paper did for DP-FedAvg.
"""

import functools
import math
from typing import Sequence

import attr
from dp_accounting.pld import privacy_loss_distribution
from dp_accounting.rdp import rdp_privacy_accountant
import numpy as np
from scipy import special

from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import events
from tff_dprec.accounting import rdp_bounds

CONVERSION_TIGHT = 'tight'
CONVERSION_CLASSIC = 'classic'
# DP-FedAvg's PLD loss grid: PLD_DISCRETIZATION, refined to epsilon / 500
# (down to PLD_MIN_DISCRETIZATION) where epsilon is small, so that the
# pessimistic PLD epsilon is within about 1% of the exact value.
PLD_DISCRETIZATION = 1e-3
PLD_MIN_DISCRETIZATION = 1e-5
_PLD_REFINE = 500.0
# Above this RDP epsilon the PLD is not computed (its loss grid spans
# hundreds of nats and takes minutes, for a few percent): the RDP epsilon,
# also an upper bound, is returned. Epsilon stays monotone in the noise
# (the switch only ever raises it).
PLD_MAX_RDP_EPSILON = 100.0
# Orders for DP-FedAvg (any > 1).
DEFAULT_ORDERS = rdp_bounds.PAPER_ORDERS
# Integer orders for DDGauss (its subsampling bound needs integer orders).
DDGAUSS_ORDERS = tuple(range(2, 129)) + (160, 192, 256)


def dp_fedavg_epsilon(*, noise_multiplier: float, population: int,
                      clients_per_round: int, rounds: int, delta: float,
                      conversion: str = CONVERSION_TIGHT,
                      orders: Sequence[float] = DEFAULT_ORDERS,
                      accounting: str = accountings.DEFAULT_ACCOUNTING
                      ) -> float:
  """Epsilon of DP-FedAvg: Poisson-subsampled Gaussian, q = B/N, T rounds.

  A theorem for Poisson sampling with the noisy sum divided by the fixed B
  (TFF's `DifferentiallyPrivateFactory.gaussian_fixed`). Applied to B
  distinct clients per round it is an assumption (common practice), not a
  proof.

  Args:
    accounting: `'min_pld_rdp'` (default): the smaller of dp_accounting's
      pessimistic PLD epsilon and the RDP epsilon; `'rdp'`: the RDP epsilon
      with `conversion`.
    conversion: How `'rdp'` converts to (epsilon, delta); `'classic'`
      needs `accounting='rdp'`.
  """
  validation.check_positive_number(noise_multiplier, 'noise_multiplier')
  q = events.sampling_rate(population, clients_per_round)
  validation.check_nonnegative_int(rounds, 'rounds')
  validation.check_probability(delta, 'delta')
  validation.check_choice(conversion, 'conversion',
                          (CONVERSION_TIGHT, CONVERSION_CLASSIC))
  accounting = accountings.resolve(accounting,
                                   accountings.DP_FEDAVG_ACCOUNTINGS)
  if accounting == accountings.MIN_PLD_RDP and conversion != CONVERSION_TIGHT:
    raise ValueError(
        f'conversion={conversion!r} applies to the RDP accountant; pass '
        "accounting='rdp' with it (accounting='min_pld_rdp' was given).")
  if rounds == 0:
    return 0.0  # Nothing released.
  return _dp_fedavg_epsilon(float(noise_multiplier), q, int(rounds),
                            float(delta), conversion, accounting,
                            tuple(float(a) for a in orders))


@functools.lru_cache(maxsize=1024)
def _dp_fedavg_epsilon(noise_multiplier, q, rounds, delta, conversion,
                       accounting, orders):
  """`dp_fedavg_epsilon`, kept per argument (a calibration and its callers
  ask for the same epsilons again)."""
  orders = np.asarray(orders, np.float64)
  rdp = rounds * subsampled_gaussian_rdp(q, noise_multiplier, orders)
  rdp_epsilon = rdp_to_epsilon(orders, rdp, delta, conversion)
  if (conversion != CONVERSION_TIGHT or accounting == accountings.RDP or
      not rdp_epsilon <= PLD_MAX_RDP_EPSILON):
    return rdp_epsilon
  return min(rdp_epsilon, _pld_epsilon(q, noise_multiplier, rounds, delta))


def subsampled_gaussian_rdp(q: float, noise_multiplier: float,
                            orders: np.ndarray) -> np.ndarray:
  """RDP of one Poisson-subsampled Gaussian release, at each order.

  dp_accounting's `RdpAccountant` composes this function for
  `PoissonSampledDpEvent(q, GaussianDpEvent(z))`; 0.4.3 exposes neither
  the function nor the accountant's RDP vector, so it is called here by
  its private name (tests/library/accounting_baselines_test.py checks that it
  still gives `RdpAccountant`'s epsilon, to the bit). Clamped at 0 (a
  bound rounded up): at tiny q the series rounds to -1e-16, which
  `RdpAccountant.get_epsilon` refuses.
  """
  return np.maximum(_subsampled_gaussian_rdp(
      float(q), float(noise_multiplier),
      tuple(float(a) for a in orders)), 0.0)


@functools.lru_cache(maxsize=1024)
def _subsampled_gaussian_rdp(q, noise_multiplier, orders):
  return np.asarray(
      rdp_privacy_accountant._compute_rdp_poisson_subsampled_gaussian(  # pylint: disable=protected-access
          q, noise_multiplier, np.asarray(orders, np.float64)),
      dtype=np.float64)


def _pld_epsilon(q, noise_multiplier, rounds, delta):
  """dp_accounting's pessimistic PLD epsilon, on a grid fine enough for it."""
  discretization = PLD_DISCRETIZATION
  while True:
    epsilon = _composed_pld(q, noise_multiplier, discretization,
                            rounds).get_epsilon_for_delta(delta)
    finer = max(PLD_MIN_DISCRETIZATION, epsilon / _PLD_REFINE)
    if finer >= discretization / 2:
      return epsilon
    discretization = finer


def _composed_pld(q, noise_multiplier, discretization, rounds):
  """What `PLDAccountant(discretization).compose(event, rounds)` holds.

  The same operations as dp_accounting 0.4.3's `PLDAccountant` for a
  Poisson-subsampled Gaussian (identity composed with the one-round PLD
  self-composed `rounds` times), so the same epsilon to the bit
  (`tests/library/accounting_baselines_test.py`); the one-round PLD, whose
  construction is most of the cost (about 1.2 s at z = 0.125 and q = 1.2e-4),
  is built once per (q, z, grid) instead of once per call: a run asks for
  epsilon after every round.
  """
  # The module's factories, as `PLDAccountant` calls them (the class's
  # methods of the same names are deprecated aliases that log a warning).
  return privacy_loss_distribution.identity(
      value_discretization_interval=discretization).compose(
          _one_round_pld(q, noise_multiplier, discretization).self_compose(
              rounds))


@functools.lru_cache(maxsize=32)
def _one_round_pld(q, noise_multiplier, discretization):
  return privacy_loss_distribution.from_gaussian_mechanism(
      standard_deviation=noise_multiplier,
      value_discretization_interval=discretization, sampling_prob=q)


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DDGaussParams:
  """Parameters TFF's `DistributedDpSumFactory` derives for DDGauss.

  Attributes:
    local_stddev: Per-client noise stddev in the units of the update.
    scale: The scale factor 1/gamma applied before rounding.
    padded_dim: The dimension after padding for the rotation.
    l2_sensitivity: Scaled, rounding-inflated L2 sensitivity (Theorem 1 of
      Kairouz et al. with TFF's 1e-5 leeway).
    scaled_local_stddev: local_stddev * scale.
    tau: 10 * sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k / (k + 1)).
  """
  local_stddev: float
  scale: float
  padded_dim: int
  l2_sensitivity: float
  scaled_local_stddev: float
  tau: float


def ddgauss_params(*, noise_multiplier: float, l2_clip: float, bits: int,
                   clients_per_round: int, dimension: int, beta: float = 0.0,
                   modclip_prob: float = 1e-4,
                   rotation_type: str = 'dft') -> DDGaussParams:
  """Mirrors how TFF 0.87's `DistributedDpSumFactory` sets up DDGauss.

  local_stddev = z * C / sqrt(n); scale from `_heuristic_scale_factor`
  (2^b = 2k sqrt(C^2 n^2 / d + (gamma^2/4 + sigma^2) n) / gamma, capped at
  1e6); sensitivity = (inflated L2 bound + 1e-5) * scale.
  """
  validation.check_positive_number(noise_multiplier, 'noise_multiplier')
  validation.check_positive_number(l2_clip, 'l2_clip')
  validation.check_positive_int(bits, 'bits')
  n = clients_per_round
  validation.check_positive_int(n, 'clients_per_round')
  validation.check_positive_int(dimension, 'dimension')
  if not 0.0 <= beta < 1.0:
    raise ValueError(f'beta must be in [0, 1), found {beta!r}.')
  if not 0.0 < modclip_prob < 1.0:
    raise ValueError(f'modclip_prob must be in (0, 1), found {modclip_prob!r}.')
  if rotation_type == 'hd':
    padded = 2**math.ceil(math.log2(dimension))
  elif rotation_type == 'dft':
    padded = math.ceil(dimension / 2.0) * 2
  else:
    raise ValueError(f"rotation_type must be 'hd' or 'dft', found "
                     f'{rotation_type!r}.')
  k = math.sqrt(2.0) * special.erfcinv(modclip_prob)
  if bits < math.log2(n) or 2**(2 * bits) < n * k**2:
    raise ValueError(
        f'bits={bits} is too small for clients_per_round={n} and '
        f'modclip_prob={modclip_prob} (TFF refuses this configuration).')
  local_stddev = noise_multiplier * l2_clip / math.sqrt(n)
  scale = math.sqrt(2.0**(2 * bits) - n * k**2) / (
      2.0 * k * math.sqrt(l2_clip**2 * n**2 / padded + n * local_stddev**2))
  scale = min(scale, 1e6)
  gamma = 1.0 / scale
  bound_1 = l2_clip + gamma * math.sqrt(padded)
  if beta > 0:
    bound_2 = math.sqrt(
        l2_clip**2 + 0.25 * gamma**2 * padded +
        math.sqrt(2.0 * math.log(1.0 / beta)) * gamma *
        (l2_clip + 0.5 * gamma * math.sqrt(padded)))
    inflated = min(bound_1, bound_2)
  else:
    inflated = bound_1
  sensitivity = (inflated + 1e-5) * scale
  scaled_stddev = local_stddev * scale
  var = scaled_stddev**2
  tau = 10.0 * sum(
      math.exp(-2.0 * math.pi**2 * var * j / (j + 1.0)) for j in range(1, n))
  return DDGaussParams(local_stddev, scale, padded, sensitivity, scaled_stddev,
                       tau)


def ddgauss_epsilon(*, noise_multiplier: float, l2_clip: float, bits: int,
                    clients_per_round: int, population: int, rounds: int,
                    delta: float, dimension: int, beta: float = 0.0,
                    modclip_prob: float = 1e-4, rotation_type: str = 'dft',
                    conversion: str = CONVERSION_TIGHT) -> float:
  """Epsilon of TFF's distributed discrete Gaussian after `rounds` rounds.

  RDP of the sum of n discrete Gaussians of variance sigma^2 (scaled domain)
  for sensitivity Delta (Kairouz et al. 2021, Proposition 14 / Eq. 17 with the
  tau of Theorem 1):
    min(alpha Delta^2 / (2 n sigma^2) + tau d,
        alpha / 2 (Delta / sqrt(n sigma^2) + tau sqrt(d))^2),
  amplified by Poisson sampling with q = B/N (Zhu and Wang 2019, general upper
  bound; never above the unamplified RDP), composed over the rounds.
  """
  p = ddgauss_params(
      noise_multiplier=noise_multiplier, l2_clip=l2_clip, bits=bits,
      clients_per_round=clients_per_round, dimension=dimension, beta=beta,
      modclip_prob=modclip_prob, rotation_type=rotation_type)
  q = events.sampling_rate(population, clients_per_round)
  validation.check_nonnegative_int(rounds, 'rounds')
  validation.check_probability(delta, 'delta')
  n = clients_per_round
  l2_scale = p.l2_sensitivity / math.sqrt(n * p.scaled_local_stddev**2)
  d = p.padded_dim

  def rdp(alpha):
    term_1 = alpha * l2_scale**2 / 2.0 + p.tau * d
    term_2 = alpha / 2.0 * (l2_scale + math.sqrt(d) * p.tau)**2
    return min(term_1, term_2)

  orders = np.asarray(DDGAUSS_ORDERS, np.float64)
  base = np.asarray([rdp(l) for l in range(2, max(DDGAUSS_ORDERS) + 1)])
  int_orders = np.asarray(DDGAUSS_ORDERS, np.int64)
  values = base[int_orders - 2]
  if q < 1.0:
    values = np.minimum(
        values, rdp_bounds.zhu_wang_upper_bound(q, base, int_orders))
  return rdp_to_epsilon(orders, rounds * values, delta, conversion)


def rdp_to_epsilon(orders, rdp, delta, conversion):
  if conversion == CONVERSION_TIGHT:
    return float(rdp_privacy_accountant.compute_epsilon(orders, rdp, delta)[0])
  if conversion == CONVERSION_CLASSIC:
    eps = np.asarray(rdp) - math.log(delta) / (np.asarray(orders) - 1.0)
    return float(max(np.min(eps), 0.0))
  raise ValueError(
      f"conversion must be 'tight' or 'classic', found {conversion!r}.")


