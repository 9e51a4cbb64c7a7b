"""Privacy accounting for DP-REC and its baselines (DP-FedAvg, DDGauss).

DP-REC (Triastcyn et al., Theorem 1 and Algorithm 7): after T*B client draws,
each a Poisson-subsampled (rate 1/N) DP-REC release with clip ratio
c = l2_clip / noise_stddev and b index bits per message,

  epsilon = min_lambda  sum_t [D_{lambda+1}(mix || p) + D_{lambda+1}(p || mix)]
                        - log(delta - 12 / 2^b * rho) / lambda,
  rho = sum_t exp(D_2(q || p)) = sum_t exp(c^2),

with p = N(0, s^2 I), q = N(phi, s^2 I), ||phi|| <= c * s and
mix = (1 - 1/N) p + 1/N q. D_alpha(mix || p) is the RDP of the Poisson-
subsampled Gaussian mechanism with noise multiplier 1/c (Mironov, Talwar,
Zhang 2019), computed with `dp_accounting`'s RDP primitives. The reverse
divergence D(p || mix) is at most D(mix || p) (Mironov et al. 2019,
Theorem 5); the paper uses that bound and so does this module by default
(`reverse_divergence='forward_bound'`). `reverse_divergence='numerical'`
computes it by one-dimensional quadrature (rounded up by the quadrature's
error estimate, and never above the bound), which is tighter.

The overhead term 12/2^b * rho comes from the importance-sampling bound of
Agapiou et al. (2017) and does not shrink with subsampling: a delta at or below
it is unreachable and raises `OverheadExceedsDeltaError`, naming the number of
bits that would be needed.

Baselines, with the same shape of interface:
  * DP-FedAvg (McMahan et al. 2018): Poisson-subsampled Gaussian, q = B/N,
    T rounds.
  * DDGauss (Kairouz, Liu, Steinke, ICML 2021): the distributed discrete
    Gaussian with the parameters TFF's `DistributedDpSumFactory` derives
    (scale factor, conditional-rounding-inflated L2 sensitivity), the RDP bound
    of its Proposition 14 / Eq. 17 with the tau term for n clients (Theorem 1),
    amplified by Poisson subsampling with the general upper bound of Zhu and
    Wang ("Poisson Subsampled Renyi Differential Privacy", ICML 2019).

RDP to (epsilon, delta) for the Gaussian baselines: `conversion='tight'`
(default) uses `dp_accounting`'s conversion (Canonne, Kamath, Steinke 2020,
Proposition 12 / Asoodeh et al. 2020), the tightest proven one available;
`conversion='classic'` uses epsilon = RDP(alpha) + log(1/delta)/(alpha - 1)
(Mironov 2017), as the DP-REC paper did for DP-FedAvg. DP-REC always uses
Theorem 1 as stated.

Neighbouring relation: add or remove one client (the central guarantee). For
the local guarantee between two arbitrary updates of one client (substitution),
group privacy gives (2 epsilon, (1 + e^epsilon) delta).
"""

import argparse
import math
from typing import Optional, Sequence

import attr
import dp_accounting
from dp_accounting.rdp import rdp_privacy_accountant
import numpy as np
from scipy import integrate
from scipy import special

# Renyi orders alpha = lambda + 1. Any grid gives a valid bound; this one is
# dense where optima usually fall.
DEFAULT_ORDERS = tuple(
    [1.0 + x / 20.0 for x in range(1, 200)] + list(range(11, 129)) +
    [160, 192, 256, 384, 512, 1024])
# Integer orders for DDGauss (its subsampling bound needs integer orders).
DDGAUSS_ORDERS = tuple(range(2, 129)) + (160, 192, 256)

REVERSE_FORWARD_BOUND = 'forward_bound'
REVERSE_NUMERICAL = 'numerical'
CONVERSION_TIGHT = 'tight'
CONVERSION_CLASSIC = 'classic'

# Bounds of the calibration searches.
_MAX_CLIP_RATIO = 25.0
_MIN_CLIP_RATIO = 1e-3
_MIN_NOISE_MULTIPLIER = 1e-3
_MAX_NOISE_MULTIPLIER = 1e4
_SEARCH_ITERATIONS = 100

_NeighborRel = dp_accounting.NeighboringRelation


class OverheadExceedsDeltaError(ValueError):
  """The 12/2^b * rho overhead of Theorem 1 is at least the target delta."""


class TargetUnreachableError(ValueError):
  """No parameter within the search bounds meets the privacy target."""


def _check_clip_ratio(instance, attribute, value):
  del instance, attribute
  _check_nonnegative_number(value, 'clip_ratio')


def _check_total_bits(instance, attribute, value):
  del instance, attribute
  _check_positive_int(value, 'total_bits')


@attr.s(frozen=True, slots=True, auto_attribs=True)
class DpRecEvent(dp_accounting.DpEvent):
  """One DP-REC release of one client's update.

  The client sends the index of one of 2^total_bits candidates drawn from
  p = N(0, s^2 I), chosen with probability proportional to q(x)/p(x) where
  q = N(phi, s^2 I) and ||phi||_2 <= clip_ratio * s. Renyi divergences of the
  continuous pair: D_alpha(q || p) = D_alpha(p || q) = alpha * clip_ratio^2 / 2.
  Theorem 1 of Triastcyn et al. bounds the privacy loss of the discrete release
  by twice the continuous one plus an overhead 12 / 2^total_bits *
  exp(clip_ratio^2) added to delta.

  Attributes:
    clip_ratio: c = l2_clip / noise_stddev (non-negative).
    total_bits: Index bits of one message, summed over its groups (Theorem 3).
  """
  clip_ratio: float = attr.ib(validator=_check_clip_ratio)
  total_bits: int = attr.ib(validator=_check_total_bits)


class DpRecAccountant(dp_accounting.PrivacyAccountant):
  """Privacy accountant for DP-REC (Theorem 1, Algorithm 7 of the paper).

  Supports `DpRecEvent` (local release, no amplification),
  `PoissonSampledDpEvent(q, DpRecEvent)` (one client draw with probability q:
  Algorithm 7 composes T*B of them with q = 1/N for sampling with
  replacement), and `NoOpDpEvent`, `NonPrivateDpEvent`, `ComposedDpEvent`,
  `SelfComposedDpEvent` of those. Other events are unsupported.
  """

  def __init__(self,
               orders: Optional[Sequence[float]] = None,
               reverse_divergence: str = REVERSE_FORWARD_BOUND,
               neighboring_relation: _NeighborRel = _NeighborRel
               .ADD_OR_REMOVE_ONE):
    """Initializes the accountant.

    Args:
      orders: Renyi orders alpha = lambda + 1 > 1 to optimise over. Default
        `DEFAULT_ORDERS`.
      reverse_divergence: How D(p || mix) is bounded: `'forward_bound'` (by
        D(mix || p), the paper's choice and the default) or `'numerical'`
        (quadrature, tighter).
      neighboring_relation: Must be `ADD_OR_REMOVE_ONE`.

    Raises:
      ValueError: For invalid orders, reverse_divergence or relation.
    """
    if neighboring_relation is not _NeighborRel.ADD_OR_REMOVE_ONE:
      raise ValueError(
          'DpRecAccountant supports neighboring_relation=ADD_OR_REMOVE_ONE '
          f'only, found {neighboring_relation!r}.')
    super().__init__(neighboring_relation)
    if orders is None:
      orders = DEFAULT_ORDERS
    orders = np.asarray(orders, dtype=np.float64)
    if orders.ndim != 1 or orders.size == 0 or not np.all(orders > 1):
      raise ValueError(f'orders must be a non-empty list of values > 1, found '
                       f'{orders!r}.')
    if reverse_divergence not in (REVERSE_FORWARD_BOUND, REVERSE_NUMERICAL):
      raise ValueError(
          "reverse_divergence must be 'forward_bound' or 'numerical', found "
          f'{reverse_divergence!r}.')
    self._orders = orders
    self._reverse_divergence = reverse_divergence
    self._forward = np.zeros_like(orders)
    self._reverse = np.zeros_like(orders)
    self._overhead = 0.0  # sum_t 12 / 2^b_t * exp(c_t^2)
    self._rho = 0.0  # sum_t exp(c_t^2)

  @property
  def orders(self) -> np.ndarray:
    return np.copy(self._orders)

  @property
  def overhead(self) -> float:
    """The delta overhead 12 * sum_t 2^-b_t exp(c_t^2) composed so far."""
    return self._overhead

  def _maybe_compose(self, event, count, do_compose):
    if isinstance(event, dp_accounting.NoOpDpEvent):
      return None
    if isinstance(event, dp_accounting.NonPrivateDpEvent):
      if do_compose:
        self._forward += np.inf
      return None
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
      return self._maybe_compose(event.event, event.count * count, do_compose)
    if isinstance(event, dp_accounting.ComposedDpEvent):
      for e in event.events:
        result = self._maybe_compose(e, count, do_compose)
        if result is not None:
          return result
      return None
    if isinstance(event, DpRecEvent):
      if do_compose:
        self._compose_dp_rec(1.0, event, count)
      return None
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
      if not isinstance(event.event, DpRecEvent):
        return self.CompositionErrorDetails(
            invalid_event=event,
            error_message='DpRecAccountant supports PoissonSampledDpEvent of '
            f'a DpRecEvent only, found subevent {event.event}.')
      if do_compose:
        self._compose_dp_rec(event.sampling_probability, event.event, count)
      return None
    return self.CompositionErrorDetails(
        invalid_event=event, error_message='Unsupported event.')

  def _compose_dp_rec(self, q, event, count):
    c = float(event.clip_ratio)
    forward = _dp_rec_forward_rdp(q, c, self._orders)
    if self._reverse_divergence == REVERSE_NUMERICAL:
      reverse = np.minimum(forward, _reverse_rdp_numerical(q, c, self._orders))
    else:
      reverse = forward
    self._forward += count * forward
    self._reverse += count * reverse
    exp_d2 = math.exp(c * c) if c * c < 700.0 else math.inf
    self._rho += count * exp_d2
    self._overhead += count * 12.0 * exp_d2 * 2.0**-event.total_bits

  def get_epsilon_and_optimal_order(self, target_delta: float):
    """Returns (epsilon, optimal lambda + 1) at `target_delta`.

    Raises:
      ValueError: If target_delta is not in (0, 1).
      OverheadExceedsDeltaError: If target_delta <= the overhead term.
    """
    _check_delta(target_delta)
    if self._overhead >= target_delta:
      needed = _bits_needed(self._rho, target_delta)
      raise OverheadExceedsDeltaError(
          f'target_delta={target_delta!r} is at or below the DP-REC overhead '
          f'term 12/2^b * rho = {self._overhead:.4g} (Theorem 1); at least '
          f'{needed} index bits per message are needed for this delta.')
    if self._rho == 0.0 and not np.any(self._forward):
      return 0.0, float(self._orders[0])
    lam = self._orders - 1.0
    eps = (self._forward + self._reverse -
           math.log(target_delta - self._overhead) / lam)
    i = int(np.argmin(eps))
    return float(max(eps[i], 0.0)), float(self._orders[i])

  def get_epsilon(self, target_delta: float) -> float:
    return self.get_epsilon_and_optimal_order(target_delta)[0]


def dp_rec_round_event(*, clip_ratio: float, total_bits: int,
                       population: int,
                       clients_per_round: int) -> dp_accounting.DpEvent:
  """The event of one DP-REC round: B client draws with replacement, q = 1/N."""
  _check_positive_int(population, 'population')
  _check_positive_int(clients_per_round, 'clients_per_round')
  return dp_accounting.SelfComposedDpEvent(
      dp_accounting.PoissonSampledDpEvent(
          1.0 / population, DpRecEvent(clip_ratio, total_bits)),
      clients_per_round)


def dp_rec_epsilon(*, clip_ratio: float, population: int,
                   clients_per_round: int, rounds: int, delta: float,
                   total_bits: int,
                   reverse_divergence: str = REVERSE_FORWARD_BOUND) -> float:
  """Epsilon of DP-REC after `rounds` rounds (Theorem 1, Algorithm 7).

  Clients are sampled with replacement: T*B draws, each including a given
  client with probability 1/N.

  Args:
    clip_ratio: c = l2_clip / noise_stddev, >= 0.
    population: N, the number of clients in the federation.
    clients_per_round: B.
    rounds: T (0 gives epsilon 0).
    delta: Target delta in (0, 1).
    total_bits: Index bits of one message (bits per group x groups).
    reverse_divergence: See `DpRecAccountant`.

  Returns:
    The epsilon.

  Raises:
    ValueError: For invalid arguments.
    OverheadExceedsDeltaError: If delta is at or below the overhead term.
  """
  _check_rounds(rounds)
  _sampling_rate(population, clients_per_round)
  accountant = DpRecAccountant(reverse_divergence=reverse_divergence)
  event = dp_rec_round_event(
      clip_ratio=clip_ratio, total_bits=total_bits, population=population,
      clients_per_round=clients_per_round)
  accountant.compose(event, rounds)
  return accountant.get_epsilon(delta)


def dp_rec_local_epsilon(*, clip_ratio: float, delta: float, total_bits: int,
                         rounds: int = 1) -> float:
  """Epsilon of `rounds` releases of one client, without amplification.

  The add/remove relation of Theorem 1 (a client's message vs. a message that
  encodes nothing); see the module docstring for substitution.
  """
  _check_rounds(rounds)
  accountant = DpRecAccountant()
  accountant.compose(DpRecEvent(clip_ratio, total_bits), rounds)
  return accountant.get_epsilon(delta)


def calibrate_clip_ratio(*, target_epsilon: float, population: int,
                         clients_per_round: int, rounds: int, delta: float,
                         total_bits: int,
                         reverse_divergence: str = REVERSE_FORWARD_BOUND,
                         tol: float = 1e-6) -> float:
  """Returns the largest clip ratio c whose DP-REC epsilon <= target_epsilon.

  Bisection (epsilon increases with c), relative tolerance `tol`; the value
  returned always satisfies the target.

  Raises:
    ValueError: For invalid arguments.
    OverheadExceedsDeltaError: If delta is unreachable with `total_bits` even
      for a vanishing clip ratio.
    TargetUnreachableError: If no c in [1e-3, 25] meets the target.
  """
  _check_positive_number(target_epsilon, 'target_epsilon')
  _check_rounds(rounds)
  _check_delta(delta)

  def epsilon(c):
    return dp_rec_epsilon(
        clip_ratio=c, population=population,
        clients_per_round=clients_per_round, rounds=rounds, delta=delta,
        total_bits=total_bits, reverse_divergence=reverse_divergence)

  def ok(c):
    try:
      return epsilon(c) <= target_epsilon
    except OverheadExceedsDeltaError:
      return False

  # Raises OverheadExceedsDeltaError when even c -> 0 cannot meet delta.
  epsilon(_MIN_CLIP_RATIO)
  return _bisect_largest(ok, _MIN_CLIP_RATIO, _MAX_CLIP_RATIO, tol,
                         'clip_ratio', target_epsilon)


def dp_fedavg_epsilon(*, noise_multiplier: float, population: int,
                      clients_per_round: int, rounds: int, delta: float,
                      conversion: str = CONVERSION_TIGHT,
                      orders: Sequence[float] = DEFAULT_ORDERS) -> float:
  """Epsilon of DP-FedAvg: Poisson-subsampled Gaussian, q = B/N, T rounds.

  Fixed-size sampling of B clients per round is accounted as Poisson sampling
  with q = B/N, as is standard (and as the DP-REC and DDGauss papers do).
  """
  _check_positive_number(noise_multiplier, 'noise_multiplier')
  q = _sampling_rate(population, clients_per_round)
  _check_rounds(rounds)
  _check_delta(delta)
  orders = np.asarray(orders, np.float64)
  # Clamped at 0: dp_accounting's series can round to -1e-12 for huge noise.
  rdp = rounds * np.maximum(
      rdp_privacy_accountant._compute_rdp_poisson_subsampled_gaussian(  # pylint: disable=protected-access
          q, noise_multiplier, orders), 0.0)
  return _rdp_to_epsilon(orders, rdp, delta, conversion)


def calibrate_dp_fedavg_noise(*, target_epsilon: float, population: int,
                              clients_per_round: int, rounds: int,
                              delta: float,
                              conversion: str = CONVERSION_TIGHT,
                              tol: float = 1e-6) -> float:
  """Returns the smallest noise multiplier whose epsilon <= target_epsilon."""
  _check_positive_number(target_epsilon, 'target_epsilon')

  def ok(z):
    return dp_fedavg_epsilon(
        noise_multiplier=z, population=population,
        clients_per_round=clients_per_round, rounds=rounds, delta=delta,
        conversion=conversion) <= target_epsilon

  return _bisect_smallest(ok, _MIN_NOISE_MULTIPLIER, _MAX_NOISE_MULTIPLIER,
                          tol, 'noise_multiplier', target_epsilon)


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
  _check_positive_number(noise_multiplier, 'noise_multiplier')
  _check_positive_number(l2_clip, 'l2_clip')
  _check_positive_int(bits, 'bits')
  n = clients_per_round
  _check_positive_int(n, 'clients_per_round')
  _check_positive_int(dimension, 'dimension')
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
  q = _sampling_rate(population, clients_per_round)
  _check_rounds(rounds)
  _check_delta(delta)
  n = clients_per_round
  l2_scale = p.l2_sensitivity / math.sqrt(n * p.scaled_local_stddev**2)
  d = p.padded_dim

  def rdp(alpha):
    term_1 = alpha * l2_scale**2 / 2.0 + p.tau * d
    term_2 = alpha / 2.0 * (l2_scale + math.sqrt(d) * p.tau)**2
    return min(term_1, term_2)

  orders = np.asarray(DDGAUSS_ORDERS, np.float64)
  values = []
  for alpha in DDGAUSS_ORDERS:
    if q < 1.0:
      values.append(min(_zhu_wang_upper_bound(alpha, q, rdp), rdp(alpha)))
    else:
      values.append(rdp(alpha))
  return _rdp_to_epsilon(orders, rounds * np.asarray(values), delta, conversion)


def calibrate_ddgauss_noise(*, target_epsilon: float, l2_clip: float,
                            bits: int, clients_per_round: int,
                            population: int, rounds: int, delta: float,
                            dimension: int, beta: float = 0.0,
                            modclip_prob: float = 1e-4,
                            rotation_type: str = 'dft',
                            conversion: str = CONVERSION_TIGHT,
                            tol: float = 1e-4) -> float:
  """Returns the smallest noise multiplier meeting the target for DDGauss.

  Epsilon is not monotone in the noise (more noise means a coarser grid and a
  larger rounding-inflated sensitivity), so the search scans a log grid over
  [1e-3, 1e4] for the first feasible value and then bisects below it.

  Raises:
    TargetUnreachableError: If no noise multiplier on the grid meets the
      target (for example small epsilon with few bits).
  """
  _check_positive_number(target_epsilon, 'target_epsilon')

  def ok(z):
    return ddgauss_epsilon(
        noise_multiplier=z, l2_clip=l2_clip, bits=bits,
        clients_per_round=clients_per_round, population=population,
        rounds=rounds, delta=delta, dimension=dimension, beta=beta,
        modclip_prob=modclip_prob, rotation_type=rotation_type,
        conversion=conversion) <= target_epsilon

  grid = np.geomspace(_MIN_NOISE_MULTIPLIER, _MAX_NOISE_MULTIPLIER, 141)
  previous = None
  for z in grid:
    if ok(float(z)):
      if previous is None:
        return float(z)
      return _bisect_smallest(ok, previous, float(z), tol, 'noise_multiplier',
                              target_epsilon)
    previous = float(z)
  raise TargetUnreachableError(
      f'DDGauss cannot reach target_epsilon={target_epsilon!r} at '
      f'delta={delta!r} with bits={bits}, clients_per_round='
      f'{clients_per_round}, population={population}, rounds={rounds}, '
      f'dimension={dimension}: no noise multiplier in '
      f'[{_MIN_NOISE_MULTIPLIER}, {_MAX_NOISE_MULTIPLIER}] meets it.')


def _dp_rec_forward_rdp(q, c, orders):
  if c == 0.0:
    return np.zeros_like(orders)
  if q >= 1.0:
    return orders * c * c / 2.0
  return np.maximum(np.asarray(
      rdp_privacy_accountant._compute_rdp_poisson_subsampled_gaussian(  # pylint: disable=protected-access
          q, 1.0 / c, orders), dtype=np.float64), 0.0)


def _reverse_rdp_numerical(q, c, orders):
  """D_alpha(p || (1-q) p + q q_c) by quadrature, in units of the noise.

  = 1/(alpha-1) log E_{x~N(0,1)}[(1 - q + q exp(c x - c^2/2))^(1-alpha)];
  the integrand is in (0, (1-q)^(1-alpha)], so quadrature is well behaved.
  The integral is rounded up by quad's error estimate.
  """
  if c == 0.0:
    return np.zeros_like(orders)
  if q >= 1.0:
    return orders * c * c / 2.0
  values = []
  log1mq = math.log1p(-q)
  for alpha in orders:

    def integrand(x, alpha=alpha):
      log_ratio = np.logaddexp(log1mq, math.log(q) + c * x - c * c / 2.0)
      return math.exp((1.0 - alpha) * log_ratio - x * x / 2.0) / math.sqrt(
          2.0 * math.pi)

    value, err = integrate.quad(integrand, -np.inf, np.inf, epsabs=1e-14,
                                epsrel=1e-12, limit=200)
    values.append(math.log(value + abs(err)) / (alpha - 1.0))
  return np.maximum(np.asarray(values), 0.0)


def _zhu_wang_upper_bound(alpha, gamma, eps):
  """General Poisson-subsampled RDP upper bound (Zhu and Wang 2019)."""
  alpha = int(alpha)
  log_terms = [math.log((1 - gamma)**(alpha - 1) * (alpha * gamma - gamma + 1)),
               math.log(special.comb(alpha, 2)) + 2 * math.log(gamma) +
               (alpha - 2) * math.log1p(-gamma) + eps(2)]
  for l in range(3, alpha + 1):
    log_terms.append(
        math.log(3.0) + _log_comb(alpha, l) + (alpha - l) * math.log1p(-gamma)
        + l * math.log(gamma) + (l - 1) * eps(l))
  return float(special.logsumexp(log_terms)) / (alpha - 1)


def _log_comb(n, k):
  return (special.gammaln(n + 1) - special.gammaln(k + 1) -
          special.gammaln(n - k + 1))


def _rdp_to_epsilon(orders, rdp, delta, conversion):
  if conversion == CONVERSION_TIGHT:
    return float(rdp_privacy_accountant.compute_epsilon(orders, rdp, delta)[0])
  if conversion == CONVERSION_CLASSIC:
    eps = np.asarray(rdp) - math.log(delta) / (np.asarray(orders) - 1.0)
    return float(max(np.min(eps), 0.0))
  raise ValueError(
      f"conversion must be 'tight' or 'classic', found {conversion!r}.")


def _bisect_largest(ok, lo, hi, tol, name, target):
  """Largest x in [lo, hi] with ok(x), for ok true below and false above."""
  return _bisect(ok, lo, hi, tol, name, target, largest=True)


def _bisect_smallest(ok, lo, hi, tol, name, target):
  """Smallest x in [lo, hi] with ok(x), for ok false below and true above."""
  return _bisect(ok, lo, hi, tol, name, target, largest=False)


def _bisect(ok, lo, hi, tol, name, target, largest):
  """Bounded bisection (geometric while the bracket is wide)."""
  good, bad = (lo, hi) if largest else (hi, lo)
  if not ok(good):
    raise TargetUnreachableError(
        f'No {name} {">=" if largest else "<="} {good} meets '
        f'target_epsilon={target!r}.')
  if ok(bad):
    return bad
  for _ in range(_SEARCH_ITERATIONS):
    low, high = min(good, bad), max(good, bad)
    if high - low <= tol * low:
      break
    mid = math.sqrt(low * high) if high > 4 * low else (low + high) / 2.0
    if ok(mid):
      good = mid
    else:
      bad = mid
  return good


def _bits_needed(rho, delta):
  if not math.isfinite(rho):
    return math.inf
  return int(math.floor(math.log2(12.0 * rho / delta))) + 1


def _sampling_rate(population, clients_per_round):
  _check_positive_int(population, 'population')
  _check_positive_int(clients_per_round, 'clients_per_round')
  if clients_per_round > population:
    raise ValueError(
        f'clients_per_round={clients_per_round} exceeds population='
        f'{population}.')
  return clients_per_round / population


def _check_delta(delta):
  _check_number(delta, 'delta')
  if not 0.0 < delta < 1.0:
    raise ValueError(f'delta must be in (0, 1), found {delta!r}.')


def _check_rounds(rounds):
  if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)):
    raise TypeError(f'rounds must be an int, found {rounds!r}.')
  if rounds < 0:
    raise ValueError(f'rounds must be non-negative, found {rounds!r}.')


def _check_number(value, name):
  if isinstance(value, bool) or not isinstance(
      value, (int, float, np.integer, np.floating)):
    raise TypeError(f'{name} must be a number, found {value!r}.')
  if not math.isfinite(value):
    raise ValueError(f'{name} must be finite, found {value!r}.')


def _check_positive_number(value, name):
  _check_number(value, name)
  if value <= 0:
    raise ValueError(f'{name} must be positive, found {value!r}.')


def _check_nonnegative_number(value, name):
  _check_number(value, name)
  if value < 0:
    raise ValueError(f'{name} must be non-negative, found {value!r}.')


def _check_positive_int(value, name):
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise TypeError(f'{name} must be an int, found {value!r}.')
  if value <= 0:
    raise ValueError(f'{name} must be positive, found {value!r}.')


def main(argv: Optional[Sequence[str]] = None) -> None:
  """`python -m tff_dprec.accounting`: epsilon or calibrated parameter."""
  parser = argparse.ArgumentParser(
      prog='python -m tff_dprec.accounting',
      description='Epsilon of DP-REC, DP-FedAvg or DDGauss, or the '
      'calibrated parameter for --target_epsilon.')
  parser.add_argument('--mechanism', required=True,
                      choices=['dp_rec', 'dp_fedavg', 'ddgauss'])
  parser.add_argument('--population', type=int, required=True)
  parser.add_argument('--clients_per_round', type=int, required=True)
  parser.add_argument('--rounds', type=int, required=True)
  parser.add_argument('--delta', type=float, default=None,
                      help='default: population ** -1.1')
  parser.add_argument('--target_epsilon', type=float, default=None)
  parser.add_argument('--clip_ratio', type=float, help='dp_rec')
  parser.add_argument('--total_bits', type=int, help='dp_rec')
  parser.add_argument('--local', action='store_true',
                      help='dp_rec: local epsilon, no amplification')
  parser.add_argument('--noise_multiplier', type=float,
                      help='dp_fedavg, ddgauss')
  parser.add_argument('--l2_clip', type=float, help='ddgauss')
  parser.add_argument('--bits', type=int, help='ddgauss')
  parser.add_argument('--dimension', type=int, help='ddgauss')
  parser.add_argument('--conversion', default=CONVERSION_TIGHT,
                      choices=[CONVERSION_TIGHT, CONVERSION_CLASSIC])
  args = parser.parse_args(argv)
  delta = args.delta if args.delta is not None else args.population**-1.1
  common = dict(population=args.population,
                clients_per_round=args.clients_per_round, rounds=args.rounds,
                delta=delta)

  def need(*names):
    missing = [n for n in names if getattr(args, n) is None]
    if missing:
      parser.error(f'--mechanism={args.mechanism} needs ' +
                   ', '.join('--' + m for m in missing))

  try:
    if args.mechanism == 'dp_rec':
      need('total_bits')
      if args.target_epsilon is not None:
        c = calibrate_clip_ratio(target_epsilon=args.target_epsilon,
                                 total_bits=args.total_bits, **common)
        print(f'clip_ratio={c:.6g}')
      elif args.local:
        need('clip_ratio')
        eps = dp_rec_local_epsilon(clip_ratio=args.clip_ratio, delta=delta,
                                   total_bits=args.total_bits,
                                   rounds=args.rounds)
        print(f'epsilon={eps:.6g} delta={delta:.6g} (local)')
      else:
        need('clip_ratio')
        eps = dp_rec_epsilon(clip_ratio=args.clip_ratio,
                             total_bits=args.total_bits, **common)
        print(f'epsilon={eps:.6g} delta={delta:.6g}')
    elif args.mechanism == 'dp_fedavg':
      if args.target_epsilon is not None:
        z = calibrate_dp_fedavg_noise(target_epsilon=args.target_epsilon,
                                      conversion=args.conversion, **common)
        print(f'noise_multiplier={z:.6g}')
      else:
        need('noise_multiplier')
        eps = dp_fedavg_epsilon(noise_multiplier=args.noise_multiplier,
                                conversion=args.conversion, **common)
        print(f'epsilon={eps:.6g} delta={delta:.6g}')
    else:
      need('l2_clip', 'bits', 'dimension')
      extra = dict(l2_clip=args.l2_clip, bits=args.bits,
                   dimension=args.dimension, conversion=args.conversion)
      if args.target_epsilon is not None:
        z = calibrate_ddgauss_noise(target_epsilon=args.target_epsilon,
                                    **extra, **common)
        print(f'noise_multiplier={z:.6g}')
      else:
        need('noise_multiplier')
        eps = ddgauss_epsilon(noise_multiplier=args.noise_multiplier, **extra,
                              **common)
        print(f'epsilon={eps:.6g} delta={delta:.6g}')
  except (ValueError, TypeError) as e:
    parser.exit(2, f'error: {e}\n')


if __name__ == '__main__':
  main()
