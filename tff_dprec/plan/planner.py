"""The planner: each mechanism calibrated for one federation, and compared.

`plan` calibrates DP-REC, DP-FedAvg and DDGauss (16 bits) through a
`Calibrations` (which a caller may route through a cache of its own) and
returns a typed `results.Plan`.
"""

import functools
import math
from typing import Callable, Optional

import attrs
import numpy as np

from tff_dprec import accounting
from tff_dprec import sizes
from tff_dprec import validation
from tff_dprec.accounting import accountings
from tff_dprec.accounting import baselines
from tff_dprec.accounting import calibration
from tff_dprec.plan import results
from tff_dprec.plan import search

DDGAUSS_BITS = 16
DDGAUSS_L2_CLIP = 1.0
# Per-parameter slots of the server optimizer state a history replays.
OPTIMIZER_SLOTS = {'sgd': 0, 'sgdm': 1, 'adam': 2}
# How far above the coding margin's c `dp_rec_misses_margin` evaluates.
_MARGIN_SLACK = 1e-4


def expected_history_download_bits(*, population: int,
                                   clients_per_round: int, rounds: int,
                                   message_bits: int,
                                   full_bits: int) -> float:
  """DP-REC's expected download bits per client-round (per draw).

  Each round draws B clients with replacement from N, so a given client
  takes part in a round with probability p = 1 - (1 - 1/N)^B, independently
  across rounds, and the round has N p distinct clients in expectation,
  each sent one downlink (`history.HistoryServer.downlink`): the messages
  of rounds [s, t) since its last round s, R = 32 + B m bits a round, or
  R t + 64 bits (with the initial seed R') for a first-time client; or the
  full state F when that is smaller. A client in round t last took part
  k rounds before with probability p (1 - p)^(k - 1), never with
  (1 - p)^t, so the expected total is

    sum_t N p [sum_{k=1}^t p (1-p)^(k-1) min(k R, F) + (1-p)^t min(t R + 64, F)]

  divided here by T B. Exact in expectation for `HistoryServer`'s rule
  (tests compare it with simulated draws).
  """
  for value, name in ((population, 'population'),
                      (clients_per_round, 'clients_per_round'),
                      (rounds, 'rounds'), (message_bits, 'message_bits'),
                      (full_bits, 'full_bits')):
    validation.check_positive_int(value, name)
  n, b = int(population), int(clients_per_round)
  p = -math.expm1(b * math.log1p(-1.0 / n)) if n > 1 else 1.0
  per_round = sizes.ROUND_HEADER_BITS + b * int(message_bits)
  k = np.arange(1, rounds, dtype=np.float64)
  returning = p * (1.0 - p)**(k - 1) * np.minimum(k * per_round, full_bits)
  t = np.arange(rounds, dtype=np.float64)
  expected = np.concatenate([[0.0], np.cumsum(returning)])
  expected += (1.0 - p)**t * np.minimum(
      t * per_round + sizes.INITIAL_SEED_BITS, full_bits)
  return float(n * p * expected.sum() / (rounds * b))


def federation(*, population: int, clients_per_round: int, rounds: int,
               target_epsilon: float, dimension: int,
               delta: Optional[float] = None) -> results.Federation:
  """A checked `Federation` (TypeError / ValueError name the argument)."""
  validation.check_positive_int(population, 'population')
  validation.check_positive_int(clients_per_round, 'clients_per_round')
  validation.check_positive_int(rounds, 'rounds')
  validation.check_positive_number(target_epsilon, 'target_epsilon')
  validation.check_positive_int(dimension, 'dimension')
  if population < 2:
    raise ValueError(f'population must be at least 2, found {population!r}.')
  if clients_per_round > population:
    raise ValueError(
        f'clients_per_round={clients_per_round!r} exceeds '
        f'population={population!r}.')
  if delta is None:
    delta = accounting.default_delta(population)
  validation.check_probability(delta, 'delta')
  return results.Federation(int(population), int(clients_per_round),
                            int(rounds), float(target_epsilon), float(delta),
                            int(dimension))


class Calibrations:
  """The calibrations a plan needs, each computed once per instance.

  Subclass it to route them, and the break-even search's outcome
  (`dp_rec_break_even`), through a cache of your own (the experiments pass
  their on-disk cache); every value must meet the target.
  """

  def __init__(self, fed: results.Federation):
    self.federation = fed

  @functools.lru_cache(maxsize=None)
  def dp_rec_clip_ratio(self, clients_per_round: int, bits: int,
                        num_groups: int) -> float:
    """DP-REC's largest c (PLD accountant), rounded down."""
    fed = self.federation
    return calibration.round_down(accounting.calibrate_clip_ratio(
        target_epsilon=fed.target_epsilon, population=fed.population,
        clients_per_round=clients_per_round, rounds=fed.rounds,
        delta=fed.delta, bits=bits, num_groups=num_groups))

  @functools.lru_cache(maxsize=None)
  def dp_fedavg_noise(self, accountant: str) -> float:
    """DP-FedAvg's smallest z under `accountant`, rounded up."""
    fed = self.federation
    return calibration.round_up(accounting.calibrate_dp_fedavg_noise(
        target_epsilon=fed.target_epsilon, accounting=accountant,
        **fed.common()))

  @functools.lru_cache(maxsize=None)
  def ddgauss_noise(self, l2_clip: float, bits: int) -> float:
    """DDGauss's smallest z (RDP accountant); not rounded (epsilon is not
    monotone in z)."""
    fed = self.federation
    return accounting.calibrate_ddgauss_noise(
        target_epsilon=fed.target_epsilon, l2_clip=l2_clip, bits=bits,
        dimension=fed.dimension, **fed.common())

  def dp_rec_misses_margin(self, clients_per_round: int, bits: int,
                           num_groups: int) -> bool:
    """True only if DP-REC's calibrated c at `bits` surely misses the coding
    margin (and the target is reachable there), from one epsilon.

    The margin holds up to `search.margin_clip_ratio(bits)`; if epsilon
    meets the target a relative 1e-4 above it, the boundary lies there or
    higher, and the calibrated c (within 2e-6 of the boundary, rounded down
    to 6 digits) is above the margin's c.
    """
    threshold = search.margin_clip_ratio(bits)
    if threshold <= 0:
      return False
    fed = self.federation
    kwargs = dict(clip_ratio=threshold * (1.0 + _MARGIN_SLACK),
                  population=fed.population,
                  clients_per_round=clients_per_round, rounds=fed.rounds,
                  delta=fed.delta, bits=bits, num_groups=num_groups)
    # The PLD epsilon is at most the RDP one: evaluated only if needed.
    return (accounting.dp_rec_epsilon(accounting=accountings.RDP, **kwargs)
            <= fed.target_epsilon or
            accounting.dp_rec_epsilon(**kwargs) <= fed.target_epsilon)

  def dp_rec_at(self, clients_per_round: int, bits: Optional[int],
                num_groups: int, start: Optional[int] = None) -> tuple:
    """(bits, c, margin met) of DP-REC at `clients_per_round`.

    `bits` None chooses them from c (`search.auto_bits`, walking from
    `start` when given; a width that `dp_rec_misses_margin` settles is not
    calibrated); given bits have margin met None.
    """
    if bits is not None:
      return bits, self.dp_rec_clip_ratio(clients_per_round, bits,
                                          num_groups), None
    return search.auto_bits(
        lambda b: self.dp_rec_clip_ratio(clients_per_round, b, num_groups),
        start=start, misses_margin=lambda b: self.dp_rec_misses_margin(
            clients_per_round, b, num_groups))

  def dp_rec_break_even(self, target_noise: float, bits: Optional[int],
                        num_groups: int, at_b: tuple) -> Optional[tuple]:
    """DP-REC's break-even B' (`search.break_even`) from the federation's B.

    Calibrates DP-REC (`dp_rec_at`, its bits walking from those of the last
    c) at the clients per round the search asks for. Override it to cache
    the search's outcome (the experiments do).

    Args:
      target_noise: The relative noise to match (DP-FedAvg's at B).
      bits: DP-REC's bits per group, or None to choose them from c.
      num_groups: DP-REC's groups per message.
      at_b: `(c, bits)` at B, known.

    Returns:
      `(B', c, bits)`, or None when N itself misses the target.
    """
    fed = self.federation
    found = {fed.clients_per_round: tuple(at_b)}

    def clip_ratio_at(clients, previous_c):
      if clients not in found:
        start = (None if previous_c is None else
                 search.bits_for_clip_ratio(previous_c))
        chosen, c, _ = self.dp_rec_at(clients, bits, num_groups, start)
        found[clients] = (c, chosen)
      return found[clients]

    return search.break_even(target_noise, fed.population, clip_ratio_at,
                             fed.clients_per_round)


def plan(*, population: int, clients_per_round: int, rounds: int,
         target_epsilon: float, dimension: int,
         delta: Optional[float] = None, bits: Optional[int] = None,
         num_groups: int = 1, full_bits: Optional[int] = None,
         server_optimizer: str = 'sgd',
         ddgauss_l2_clip: float = DDGAUSS_L2_CLIP,
         with_break_even: bool = True,
         calibrations: Optional[Callable[[results.Federation],
                                         Calibrations]] = None
         ) -> results.Plan:
  """DP-REC, DP-FedAvg and DDGauss (16 bits) calibrated for one federation.

  Args:
    population, clients_per_round, rounds, target_epsilon, dimension, delta:
      The federation (`federation`; delta defaults to N^-1.1).
    bits: DP-REC's index bits per group; None chooses them from c
      (`search.auto_bits`, as the experiments do).
    num_groups: DP-REC's groups per message (1: the whole model as one
      group; `learning.message_layout(model_fn, ...).num_groups` for yours).
    full_bits: The size of the model and server optimizer state a DP-REC
      history competes with; None: 32 d (1 + slots of `server_optimizer`).
    server_optimizer: 'sgd', 'sgdm' or 'adam' (for `full_bits`).
    ddgauss_l2_clip: DDGauss's clip, which sets its quantisation grid.
    with_break_even: Whether to search DP-REC's break-even B'.
    calibrations: A `Calibrations` factory (default: computed here).

  Returns:
    A `results.Plan`: one typed record per mechanism.

  Raises:
    TypeError, ValueError: For invalid arguments, naming them.
  """
  fed = federation(population=population,
                   clients_per_round=clients_per_round, rounds=rounds,
                   target_epsilon=target_epsilon, dimension=dimension,
                   delta=delta)
  if bits is not None:
    validation.check_int_in_range(bits, 'bits', 1, sizes.MAX_BITS)
  validation.check_positive_int(num_groups, 'num_groups')
  validation.check_choice(server_optimizer, 'server_optimizer',
                          tuple(OPTIMIZER_SLOTS))
  validation.check_positive_number(ddgauss_l2_clip, 'ddgauss_l2_clip')
  validation.check_bool(with_break_even, 'with_break_even')
  if full_bits is None:
    full_bits = sizes.FLOAT_BITS * fed.dimension * (
        1 + OPTIMIZER_SLOTS[server_optimizer])
  validation.check_positive_int(full_bits, 'full_bits')
  cal = (calibrations or Calibrations)(fed)
  fedavg = _dp_fedavg_plan(fed, cal)
  return results.Plan(
      fed, _dp_rec_plan(fed, cal, _DpRecSetting(bits, num_groups, full_bits),
                        fedavg, with_break_even),
      fedavg, _ddgauss_plan(fed, cal, ddgauss_l2_clip))


def _model_bits(fed):
  return sizes.FLOAT_BITS * fed.dimension


def _dp_fedavg_plan(fed, cal):
  z = cal.dp_fedavg_noise(accountings.MIN_PLD_RDP)
  return results.DpFedAvgPlan(
      parameter=z,
      relative_noise=search.gaussian_relative_noise(z,
                                                    fed.clients_per_round),
      upload_bits=_model_bits(fed), download_bits=_model_bits(fed),
      rdp_noise_multiplier=cal.dp_fedavg_noise(accountings.RDP))


def _ddgauss_plan(fed, cal, l2_clip):
  try:
    z = cal.ddgauss_noise(l2_clip, DDGAUSS_BITS)
    padded = baselines.ddgauss_params(
        noise_multiplier=z, l2_clip=l2_clip, bits=DDGAUSS_BITS,
        clients_per_round=fed.clients_per_round,
        dimension=fed.dimension).padded_dim
  except ValueError as e:  # Out of reach, or too few bits for B.
    padded = math.ceil(fed.dimension / 2) * 2
    return results.DdgaussPlan(
        parameter=None, relative_noise=None,
        upload_bits=DDGAUSS_BITS * padded, download_bits=_model_bits(fed),
        bits=DDGAUSS_BITS, l2_clip=l2_clip, error=str(e))
  return results.DdgaussPlan(
      parameter=z,
      relative_noise=search.gaussian_relative_noise(z,
                                                    fed.clients_per_round),
      upload_bits=DDGAUSS_BITS * padded, download_bits=_model_bits(fed),
      bits=DDGAUSS_BITS, l2_clip=l2_clip)


@attrs.frozen
class _DpRecSetting:
  """DP-REC's settings besides the federation: bits (None: from c), groups
  and the full state its history competes with."""
  bits: Optional[int]
  num_groups: int
  full_bits: int

  def message_bits(self, bits):
    return sizes.SEED_BITS + self.num_groups * bits


def _dp_rec_plan(fed, cal, rec, fedavg, with_break_even):
  b = fed.clients_per_round
  try:
    chosen, c, met = cal.dp_rec_at(b, rec.bits, rec.num_groups)
  except ValueError as e:
    return results.DpRecPlan(
        parameter=None, relative_noise=None,
        upload_bits=rec.message_bits(rec.bits or search.MAX_AUTO_BITS),
        download_bits=None, num_groups=rec.num_groups,
        bits_from_c=rec.bits is None, full_bits=rec.full_bits, error=str(e))
  searched = None
  if with_break_even:
    searched = _break_even(fed, cal, rec, fedavg, (c, chosen))
  return results.DpRecPlan(
      parameter=c, relative_noise=search.dp_rec_relative_noise(c, b),
      upload_bits=rec.message_bits(chosen),
      download_bits=expected_history_download_bits(
          population=fed.population, clients_per_round=b, rounds=fed.rounds,
          message_bits=rec.message_bits(chosen), full_bits=rec.full_bits),
      num_groups=rec.num_groups, bits_from_c=rec.bits is None,
      full_bits=rec.full_bits, bits=chosen, bits_margin_met=met,
      outside_idealisation=c >= sizes.IDEALISED_CLIP_RATIO_LIMIT,
      local_epsilon=accounting.dp_rec_local_epsilon(
          clip_ratio=c, delta=fed.delta, bits=chosen,
          num_groups=rec.num_groups),
      break_even_searched=with_break_even, break_even=searched)


def _break_even(fed, cal, rec, fedavg, at_b):
  """DP-REC's break-even against DP-FedAvg at B, or None when N misses."""
  result = cal.dp_rec_break_even(fedavg.relative_noise, rec.bits,
                                 rec.num_groups, at_b)
  if result is None:
    return None
  clients, c, chosen = result
  download = expected_history_download_bits(
      population=fed.population, clients_per_round=clients,
      rounds=fed.rounds, message_bits=rec.message_bits(chosen),
      full_bits=rec.full_bits)
  return results.BreakEven(
      clients_per_round=clients, clip_ratio=c, bits=chosen,
      bits_margin_met=(None if rec.bits is not None else
                       search.margin_met(chosen, c)),
      outside_idealisation=c >= sizes.IDEALISED_CLIP_RATIO_LIMIT,
      relative_noise=search.dp_rec_relative_noise(c, clients),
      upload_bits_per_round=clients * rec.message_bits(chosen),
      download_bits_per_round=clients * download)
