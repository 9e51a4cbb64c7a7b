"""Will DP-REC pay in a federation? Calibrations, noise, traffic, beforehand.

  python -m tff_dprec.plan --population=342477 --clients_per_round=40 \
      --rounds=50 --target_epsilon=1 --dimension=50050 [--json]

For a federation of N clients, B clients per round, T rounds, a target
(epsilon, delta) and a model of d parameters, `plan` calibrates DP-REC,
DP-FedAvg and DDGauss (16 bits), each with its default accountant, and
reports for each:

* the calibrated parameter: DP-REC's clip ratio c (PLD), DP-FedAvg's noise
  multiplier z (PLD; also under RDP, to compare with DDGauss's), DDGauss's
  z (its RDP accountant);
* the relative noise: the standard deviation of the noise in one coordinate
  of the averaged update, divided by the clip. DP-REC's decoded update is a
  sample of N(clipped update, sigma^2 I) and its clip is c sigma, so the
  mean of B messages has sigma / sqrt(B) per coordinate: 1 / (c sqrt(B)).
  DP-FedAvg and DDGauss add noise z C to the sum of B clipped updates:
  z / B. At equal clips and rounds, the smaller relative noise learns more
  (a prediction; `python -m experiments.frontier` measures it);
* upload and download bits per client-round. DP-REC uploads its message
  (64 + M b bits) and downloads the history of messages since the client's
  last round, or the model and server optimizer state when smaller (the
  rule of `history.HistoryServer`), in expectation under with-replacement
  sampling (`expected_history_download_bits`). The others upload d floats
  (DDGauss: 16 bits per padded coordinate) and download the model;
* DP-REC's bits (chosen from c, `auto_bits`), groups and local epsilon per
  participation (what the server itself learns from one message);
* DP-REC's break-even clients per round: the smallest B' <= N at which its
  relative noise, calibrated at B' to the same (epsilon, delta) over the
  same T, is at most DP-FedAvg's at B (`break_even`). Only `main` prints.
"""

import argparse
import functools
import json
import math
import sys
from typing import Callable, Optional, Sequence

import attrs
import numpy as np

from tff_dprec import accounting
from tff_dprec import sizes
from tff_dprec import validation

# Bits chosen from c: the smallest b whose K = 2^b candidates exceed
# exp(KL + margin), KL <= c^2 / 2 nats being the divergence of a clipped
# update's posterior from the prior. Importance sampling needs about
# exp(KL + t) samples, its error falling like exp(-t / 4) (Chatterjee and
# Diaconis 2018, Thm. 1.1; Havasi et al. 2019 for REC); t = 2 nats (each bit
# more doubles the encode's time: 7 bits instead of 5 made the main job's
# DP-REC rounds 2.3 s instead of about 1 s). At most 8 bits: the encode
# generates 2^bits candidates of the group's size; a larger c needs more
# groups rather than more bits per group.
REC_MARGIN_NATS = 2.0
MAX_AUTO_BITS = 8
DDGAUSS_BITS = 16
DDGAUSS_L2_CLIP = 1.0
# Per-parameter slots of the server optimizer state a history replays.
OPTIMIZER_SLOTS = {'sgd': 0, 'sgdm': 1, 'adam': 2}
_MAX_BREAK_EVEN_STEPS = 200


def auto_bits(calibrate_c: Callable[[int], float],
              start: Optional[int] = None) -> tuple:
  """(bits, c, met): the smallest bits with bits ln 2 >= c(bits)^2 / 2 + margin.

  `calibrate_c(bits)` is DP-REC's clip ratio at `bits` (calibrated, which
  falls as bits grow under the proven accountings, or fixed); a bit width it
  refuses (raises ValueError: a target out of reach) is skipped. When no
  width up to the cap `MAX_AUTO_BITS` meets the margin, the largest width
  that calibrated is returned with `met` False.

  Without `start` the widths are scanned upwards from the smallest. With
  `start` (a guess, for example from a nearby calibration) the search walks
  down from it while the margin holds, or up until it holds: the scan's
  answer whenever the margin is monotone in bits (it is when c does not
  grow with bits), in fewer calibrations; where the walk cannot conclude (a
  refused start, nothing met above it) it falls back to the scan.

  Raises:
    The last refusal of `calibrate_c` when every bit width up to the cap is
    refused.
  """
  lowest = max(1, math.ceil(REC_MARGIN_NATS / math.log(2)))
  seen = {}

  def outcome(bits):  # None (refused) or (c, margin met).
    if bits not in seen:
      try:
        c = calibrate_c(bits)
        seen[bits] = (c, bits * math.log(2) >= c * c / 2 + REC_MARGIN_NATS)
      except ValueError as e:  # TargetUnreachable, OverheadExceedsDelta.
        seen[bits] = e
    return None if isinstance(seen[bits], ValueError) else seen[bits]

  if start is not None:
    found = _walk(outcome, min(max(int(start), lowest), MAX_AUTO_BITS),
                  lowest)
    if found is not None:
      return found[0], outcome(found[0])[0], True
  for bits in range(lowest, MAX_AUTO_BITS + 1):
    result = outcome(bits)
    if result is not None and result[1]:
      return bits, result[0], True
  calibrated = [b for b in seen if outcome(b) is not None]
  if not calibrated:
    raise seen[MAX_AUTO_BITS]
  return max(calibrated), outcome(max(calibrated))[0], False


def _walk(outcome, start, lowest):
  """auto_bits' walk from `start`: (bits,) or None where it cannot tell."""
  here = outcome(start)
  if here is not None and here[1]:
    best = start
    for bits in range(start - 1, lowest - 1, -1):
      below = outcome(bits)
      if below is None:
        continue  # Refused: the ones below may still meet the margin.
      if not below[1]:
        break
      best = bits
    return (best,)
  if here is None:
    return None
  for bits in range(start + 1, MAX_AUTO_BITS + 1):
    above = outcome(bits)
    if above is not None and above[1]:
      return (bits,)
  return None


def bits_for_clip_ratio(clip_ratio: float) -> int:
  """The smallest bits meeting the margin at a fixed c (`auto_bits`' start)."""
  return math.ceil((clip_ratio**2 / 2 + REC_MARGIN_NATS) / math.log(2))


def dp_rec_relative_noise(clip_ratio: float, clients_per_round: int) -> float:
  """1 / (c sqrt(B)): noise per coordinate of the mean, over the clip."""
  return 1.0 / (clip_ratio * math.sqrt(clients_per_round))


def gaussian_relative_noise(noise_multiplier: float,
                            clients_per_round: int) -> float:
  """z / B: DP-FedAvg's and DDGauss's noise on the mean over the clip."""
  return noise_multiplier / clients_per_round


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


@attrs.frozen
class Federation:
  """The setting a plan is for.

  Attributes:
    population: N, the clients that may be sampled.
    clients_per_round: B.
    rounds: T.
    target_epsilon: The epsilon every mechanism is calibrated to.
    delta: The delta (default N^-1.1, as the experiments').
    dimension: d, the model's parameters (the update's coordinates).
  """
  population: int
  clients_per_round: int
  rounds: int
  target_epsilon: float
  delta: float
  dimension: int

  def common(self) -> dict:
    return dict(population=self.population,
                clients_per_round=self.clients_per_round, rounds=self.rounds,
                delta=self.delta)


def federation(*, population: int, clients_per_round: int, rounds: int,
               target_epsilon: float, dimension: int,
               delta: Optional[float] = None) -> Federation:
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
  return Federation(int(population), int(clients_per_round), int(rounds),
                    float(target_epsilon), float(delta), int(dimension))


class Calibrations:
  """The calibrations a plan needs, each computed once per process.

  Subclass it to route them through a cache of your own (the experiments
  pass their on-disk cache); every value must meet the target.
  """

  def __init__(self, fed: Federation):
    self.federation = fed

  @functools.lru_cache(maxsize=None)
  def dp_rec_clip_ratio(self, clients_per_round: int, bits: int,
                        num_groups: int) -> float:
    """DP-REC's largest c (PLD accountant), rounded down."""
    fed = self.federation
    return accounting.round_down(accounting.calibrate_clip_ratio(
        target_epsilon=fed.target_epsilon, population=fed.population,
        clients_per_round=clients_per_round, rounds=fed.rounds,
        delta=fed.delta, bits=bits, num_groups=num_groups))

  @functools.lru_cache(maxsize=None)
  def dp_fedavg_noise(self, accountant: str) -> float:
    """DP-FedAvg's smallest z under `accountant` ('pld', 'rdp'), rounded up."""
    fed = self.federation
    return accounting.round_up(accounting.calibrate_dp_fedavg_noise(
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


@attrs.frozen
class MechanismPlan:
  """One mechanism at one federation.

  Attributes:
    name: 'dp_rec', 'dp_fedavg' or 'ddgauss'.
    parameter_name: 'clip_ratio' (c) or 'noise_multiplier' (z).
    parameter: The calibrated value, or None when the target is out of reach
      (`error` says why).
    accountant: The accountant it was calibrated with.
    relative_noise: Noise per coordinate of the mean update over the clip.
    upload_bits: Bits a client sends per round.
    download_bits: Bits a client receives per round (DP-REC: expected).
    extra: Mechanism-specific fields (DP-REC's bits, groups, local epsilon
      and break-even; DP-FedAvg's RDP z; DDGauss's bits and clip).
    error: Why there is no parameter, else None.
  """
  name: str
  parameter_name: str
  parameter: Optional[float]
  accountant: str
  relative_noise: Optional[float]
  upload_bits: int
  download_bits: Optional[float]
  extra: dict = attrs.field(factory=dict)
  error: Optional[str] = None

  def to_json(self) -> dict:
    out = dict(parameter_name=self.parameter_name, parameter=self.parameter,
               accountant=self.accountant,
               relative_noise=self.relative_noise,
               upload_bits=self.upload_bits,
               download_bits=self.download_bits)
    out.update(self.extra)
    if self.error is not None:
      out['error'] = self.error
    return out


@attrs.frozen
class Plan:
  """A federation and its three mechanisms (`plan`)."""
  federation: Federation
  dp_rec: MechanismPlan
  dp_fedavg: MechanismPlan
  ddgauss: MechanismPlan

  def to_json(self) -> dict:
    """{'dp_rec': ..., 'dp_fedavg': ..., 'ddgauss': ..., 'federation': ...}."""
    return dict(dp_rec=self.dp_rec.to_json(),
                dp_fedavg=self.dp_fedavg.to_json(),
                ddgauss=self.ddgauss.to_json(),
                federation=attrs.asdict(self.federation))


def plan(*, population: int, clients_per_round: int, rounds: int,
         target_epsilon: float, dimension: int,
         delta: Optional[float] = None, bits: Optional[int] = None,
         num_groups: int = 1, full_bits: Optional[int] = None,
         server_optimizer: str = 'sgd',
         ddgauss_l2_clip: float = DDGAUSS_L2_CLIP,
         with_break_even: bool = True,
         calibrations: Optional[Callable[[Federation], Calibrations]] = None
         ) -> Plan:
  """DP-REC, DP-FedAvg and DDGauss (16 bits) calibrated for one federation.

  Args:
    population, clients_per_round, rounds, target_epsilon, dimension, delta:
      The federation (`federation`; delta defaults to N^-1.1).
    bits: DP-REC's index bits per group; None chooses them from c
      (`auto_bits`, as the experiments do).
    num_groups: DP-REC's groups per message (1: the whole model as one
      group; `learning.message_layout(model_fn, ...).num_groups` for yours).
    full_bits: The size of the model and server optimizer state a DP-REC
      history competes with; None: 32 d (1 + slots of `server_optimizer`).
    server_optimizer: 'sgd', 'sgdm' or 'adam' (for `full_bits`).
    ddgauss_l2_clip: DDGauss's clip, which sets its quantisation grid.
    with_break_even: Whether to search DP-REC's break-even B'.
    calibrations: A `Calibrations` factory (default: computed here).

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
  return Plan(fed,
              _dp_rec_plan(fed, cal, bits, num_groups, full_bits, fedavg,
                           with_break_even),
              fedavg, _ddgauss_plan(fed, cal, ddgauss_l2_clip))


def _model_bits(fed):
  return sizes.FLOAT_BITS * fed.dimension


def _dp_fedavg_plan(fed, cal):
  z = cal.dp_fedavg_noise(accounting.PLD)
  return MechanismPlan(
      'dp_fedavg', 'noise_multiplier', z, accounting.PLD,
      gaussian_relative_noise(z, fed.clients_per_round), _model_bits(fed),
      _model_bits(fed), extra=dict(rdp_parameter=cal.dp_fedavg_noise(
          accounting.RDP)))


def _ddgauss_plan(fed, cal, l2_clip):
  extra = dict(bits=DDGAUSS_BITS, l2_clip=l2_clip)
  try:
    z = cal.ddgauss_noise(l2_clip, DDGAUSS_BITS)
    padded = accounting.ddgauss_params(
        noise_multiplier=z, l2_clip=l2_clip, bits=DDGAUSS_BITS,
        clients_per_round=fed.clients_per_round,
        dimension=fed.dimension).padded_dim
  except ValueError as e:  # Out of reach, or too few bits for B.
    padded = math.ceil(fed.dimension / 2) * 2
    return MechanismPlan('ddgauss', 'noise_multiplier', None, accounting.RDP,
                         None, DDGAUSS_BITS * padded, _model_bits(fed),
                         extra=extra, error=str(e))
  return MechanismPlan(
      'ddgauss', 'noise_multiplier', z, accounting.RDP,
      gaussian_relative_noise(z, fed.clients_per_round),
      DDGAUSS_BITS * padded, _model_bits(fed), extra=extra)


def _dp_rec_at(cal, clients, bits, num_groups, start=None):
  """(bits, c, margin met or None for fixed bits) at `clients` per round."""
  if bits is not None:
    return bits, cal.dp_rec_clip_ratio(clients, bits, num_groups), None
  return auto_bits(
      lambda b: cal.dp_rec_clip_ratio(clients, b, num_groups), start=start)


def _dp_rec_plan(fed, cal, bits, num_groups, full_bits, fedavg,
                 with_break_even):
  b = fed.clients_per_round
  try:
    chosen, c, met = _dp_rec_at(cal, b, bits, num_groups)
  except ValueError as e:
    return MechanismPlan(
        'dp_rec', 'clip_ratio', None, accounting.PLD, None,
        sizes.SEED_BITS + num_groups * (bits or MAX_AUTO_BITS), None,
        extra=dict(num_groups=num_groups), error=str(e))
  message_bits = sizes.SEED_BITS + num_groups * chosen
  extra = dict(
      bits=chosen, num_groups=num_groups, bits_from_c=bits is None,
      bits_margin_met=met, full_bits=full_bits,
      outside_idealisation=c >= sizes.IDEALISED_CLIP_RATIO_LIMIT,
      local_epsilon=accounting.dp_rec_local_epsilon(
          clip_ratio=c, delta=fed.delta, bits=chosen, num_groups=num_groups))
  if with_break_even:
    extra.update(_break_even_fields(fed, cal, bits, num_groups, full_bits,
                                    fedavg, (b, c, chosen)))
  return MechanismPlan(
      'dp_rec', 'clip_ratio', c, accounting.PLD,
      dp_rec_relative_noise(c, b), message_bits,
      expected_history_download_bits(
          population=fed.population, clients_per_round=b, rounds=fed.rounds,
          message_bits=message_bits, full_bits=full_bits), extra=extra)


def break_even(target_noise: float, population: int,
               clip_ratio_at: Callable[[int, Optional[float]], tuple],
               clients_per_round: int) -> Optional[tuple]:
  """The smallest B' <= N with 1 / (c(B') sqrt(B')) <= target_noise.

  `clip_ratio_at(B', previous_c)` returns `(c, bits)` at B' (raising
  ValueError where the target is out of reach, which counts as a miss).
  Assumption (stated, and checked where the answer is found): the relative
  noise 1 / (c(B') sqrt(B')) does not grow with B', i.e. c falls more
  slowly than 1 / sqrt(B'). It holds where sampling amplifies (there c
  falls about as B'^(-1/4)); a drop of the bits chosen from c only lowers
  the noise.

  The search brackets the answer between a miss and a hit, then narrows
  it: steps from a miss go to max(f(B'), B' + jump), with f(B') =
  1 / (target c(B'))^2 (where c no longer falls, f is the answer) and a
  jump that doubles with every step on which f moves less than it (so
  about log2 N misses at most, however slowly f moves); a hit at h is the
  answer when h - 1 misses, else the bracket is bisected.

  Returns:
    `(B', c, bits)`, or None when N itself misses the target.
  """
  validation.check_positive_number(target_noise, 'target_noise')
  validation.check_positive_int(population, 'population')
  validation.check_positive_int(clients_per_round, 'clients_per_round')
  if clients_per_round > population:
    raise ValueError(f'clients_per_round={clients_per_round!r} exceeds '
                     f'population={population!r}.')
  known = {}

  def at(b, previous=None):  # (meets, c, bits); c None where out of reach.
    if b not in known:
      try:
        c, bits = clip_ratio_at(b, previous)
        known[b] = (dp_rec_relative_noise(c, b) <= target_noise, c, bits)
      except ValueError:
        known[b] = (False, None, None)
    return known[b]

  if at(clients_per_round)[0]:
    miss, hit = 0, clients_per_round  # 0: a sentinel miss.
  else:
    miss, hit = _bracket(at, target_noise, population, clients_per_round)
    if hit is None:
      return None
  while hit - miss > 1 and at(hit - 1, at(hit)[1])[0]:
    hit -= 1  # The hit is not the smallest: bisect what is left.
    middle = (miss + hit) // 2
    if middle > miss and at(middle, at(hit)[1])[0]:
      hit = middle
    elif middle > miss:
      miss = middle
  return (hit,) + at(hit)[1:]


def _bracket(at, target_noise, population, miss):
  """(last miss, first hit) above a miss, or (N, None) when N misses."""
  jump = 1
  while miss < population:
    c = at(miss)[1]
    needed = (math.ceil(1.0 / (target_noise * c)**2 - 1e-9)
              if c is not None else miss + jump)
    trial = min(max(needed, miss + jump), population)
    if at(trial, c)[0]:
      return miss, trial
    # f moving slower than the jump: double it; f moving fast: follow f.
    jump = 2 * jump if needed - miss <= jump else 1
    miss = trial
  return population, None


def _break_even_fields(fed, cal, bits, num_groups, full_bits, fedavg, known):
  """DP-REC's break-even B' against DP-FedAvg at B, and its traffic there."""
  found = {known[0]: known[1:]}

  def clip_ratio_at(clients, previous_c):
    if clients not in found:
      start = None if previous_c is None else bits_for_clip_ratio(previous_c)
      chosen, c, _ = _dp_rec_at(cal, clients, bits, num_groups, start)
      found[clients] = (c, chosen)
    return found[clients]

  result = break_even(fedavg.relative_noise, fed.population, clip_ratio_at,
                      fed.clients_per_round)
  if result is None:
    return dict(break_even_clients_per_round=None)
  clients, c, chosen = result
  message_bits = sizes.SEED_BITS + num_groups * chosen
  download = expected_history_download_bits(
      population=fed.population, clients_per_round=clients,
      rounds=fed.rounds, message_bits=message_bits, full_bits=full_bits)
  return dict(break_even_clients_per_round=clients,
              break_even_clip_ratio=c, break_even_bits=chosen,
              break_even_bits_margin_met=None if bits is not None else (
                  chosen * math.log(2) >= c * c / 2 + REC_MARGIN_NATS),
              break_even_outside_idealisation=(
                  c >= sizes.IDEALISED_CLIP_RATIO_LIMIT),
              break_even_relative_noise=dp_rec_relative_noise(c, clients),
              break_even_upload_bits_per_round=clients * message_bits,
              break_even_download_bits_per_round=clients * download)


_LABELS = {'dp_rec': 'DP-REC', 'dp_fedavg': 'DP-FedAvg',
           'ddgauss': f'DDGauss{DDGAUSS_BITS}'}


def format_plan(p: Plan) -> list[str]:
  """The plan as lines of text (`python -m tff_dprec.plan` prints them)."""
  fed = p.federation
  reference = p.dp_fedavg.relative_noise
  lines = [
      f'Federation: N={fed.population:,} clients, B={fed.clients_per_round:,}'
      f' per round, T={fed.rounds} rounds, d={fed.dimension:,} parameters, '
      f'target epsilon={fed.target_epsilon:g} at delta={fed.delta:.3g}.',
      '| mechanism | accountant | calibrated | relative noise | vs DP-FedAvg '
      '| upload bits/client-round | download bits/client-round |',
      '|---|---|---|---|---|---|---|']
  for m in (p.dp_rec, p.dp_fedavg, p.ddgauss):
    symbol = 'c' if m.parameter_name == 'clip_ratio' else 'z'
    download = ('-' if m.download_bits is None else
                f'{m.download_bits:,.0f}')
    if m.parameter is None:
      lines.append(f'| {_LABELS[m.name]} | {m.accountant} | out of reach | - '
                   f'| - | {m.upload_bits:,} | {download} |')
      continue
    # c rounded down and DP-FedAvg's z rounded up by the calibrations print
    # exactly at 6 digits; DDGauss's z (not monotone) with all its digits.
    value = (f'{m.parameter:.6g}' if m.name != 'ddgauss' else
             repr(m.parameter))
    lines.append(
        f'| {_LABELS[m.name]} | {m.accountant} | {symbol}={value} '
        f'| {m.relative_noise:.4g} | {m.relative_noise / reference:.3g}x | '
        f'{m.upload_bits:,} | {download} |')
  lines.extend(_notes(p))
  return lines


def _notes(p):
  fed, r, f, g = p.federation, p.dp_rec, p.dp_fedavg, p.ddgauss
  z_rdp = f.extra['rdp_parameter']
  notes = [f"DP-FedAvg under RDP (DDGauss's accountant): z={z_rdp:.6g}, "
           'relative noise '
           f'{gaussian_relative_noise(z_rdp, fed.clients_per_round):.4g}.']
  if g.error:
    notes.append(f'DDGauss{DDGAUSS_BITS}: {g.error}')
  if r.parameter is None:
    return notes + [f'DP-REC: {r.error}']
  x = r.extra
  source = 'chosen from c' if x['bits_from_c'] else 'given'
  notes.append(
      f"DP-REC: {x['bits']} bits ({source}) x {x['num_groups']} group(s), "
      f"a {r.upload_bits}-bit message; local epsilon per participation "
      f"{accounting.round_up(x['local_epsilon'], 4):.4g} (what the server "
      'learns from one message, rounded up); download: the history or the '
      f"full state ({x['full_bits']:,} bits), whichever is smaller, in "
      'expectation.')
  notes += _warnings(x)
  if 'break_even_clients_per_round' not in x:
    return notes
  clients = x['break_even_clients_per_round']
  if clients is None:
    return notes + [
        f"DP-REC break-even: none up to N={fed.population:,} clients per "
        f"round: its relative noise stays above DP-FedAvg's at "
        f"B={fed.clients_per_round:,}."]
  fedavg_round = fed.clients_per_round * f.upload_bits
  notes += _warnings(x, 'break_even_')
  notes.append(
      f"DP-REC break-even: B'={clients:,} clients per round (c="
      f"{x['break_even_clip_ratio']:.6g}, {x['break_even_bits']} bits) "
      f"match DP-FedAvg's relative noise at B={fed.clients_per_round:,}. "
      'Per round DP-REC would upload '
      f"{x['break_even_upload_bits_per_round'] / 8e6:.4g} MB (DP-FedAvg: "
      f"{fedavg_round / 8e6:.4g} MB) and download "
      f"{x['break_even_download_bits_per_round'] / 8e6:.4g} MB (DP-FedAvg: "
      f"{fed.clients_per_round * f.download_bits / 8e6:.4g} MB).")
  return notes


def _warnings(x, prefix=''):
  """Warnings for a DP-REC setting: outside the idealisation, margin unmet."""
  out = []
  where = 'at the break-even' if prefix else 'at B'
  if x.get(prefix + 'outside_idealisation'):
    out.append(f'WARNING: DP-REC {where}: c >= '
               f'{sizes.IDEALISED_CLIP_RATIO_LIMIT:g} is outside the '
               'idealisation the privacy proof relies on (docs/PRIVACY.md, '
               'section 7): do not trust its epsilon.')
  if x.get(prefix + 'bits_margin_met') is False:
    out.append(f'WARNING: DP-REC {where}: {MAX_AUTO_BITS} bits (the cap) '
               'do not meet the coding margin at this c; more groups would.')
  return out


def main(argv: Optional[Sequence[str]] = None) -> None:
  """`python -m tff_dprec.plan`; exit code 2 with one line for bad input."""
  parser = argparse.ArgumentParser(
      prog='python -m tff_dprec.plan',
      description='Calibrates DP-REC, DP-FedAvg and DDGauss (16 bits) for a '
      'federation and compares their noise on the averaged update and '
      'their traffic, with the clients per round at which DP-REC matches '
      "DP-FedAvg's noise.")
  parser.add_argument('--population', type=int, required=True, help='N')
  parser.add_argument('--clients_per_round', type=int, required=True,
                      help='B')
  parser.add_argument('--rounds', type=int, required=True, help='T')
  parser.add_argument('--target_epsilon', type=float, required=True)
  parser.add_argument('--dimension', type=int, required=True,
                      help="d, the model's parameters")
  parser.add_argument('--delta', type=float, default=None,
                      help='default: population ** -1.1')
  parser.add_argument('--bits', type=int, default=None,
                      help="DP-REC's bits per group (default: from c)")
  parser.add_argument('--num_groups', type=int, default=1,
                      help="DP-REC's groups per message (default 1)")
  parser.add_argument('--server_optimizer', default='sgd',
                      choices=sorted(OPTIMIZER_SLOTS),
                      help='sizes the state a DP-REC history competes with')
  parser.add_argument('--full_bits', type=int, default=None,
                      help='that state in bits (overrides the estimate)')
  parser.add_argument('--ddgauss_l2_clip', type=float,
                      default=DDGAUSS_L2_CLIP,
                      help="DDGauss's clip (sets its quantisation grid)")
  parser.add_argument('--nobreak_even', dest='break_even',
                      action='store_false',
                      help="skip the search for DP-REC's break-even B'")
  parser.add_argument('--json', action='store_true',
                      help='one JSON object keyed by dp_rec, dp_fedavg, '
                      'ddgauss')
  args = parser.parse_args(argv)
  try:
    result = plan(
        population=args.population, clients_per_round=args.clients_per_round,
        rounds=args.rounds, target_epsilon=args.target_epsilon,
        dimension=args.dimension, delta=args.delta, bits=args.bits,
        num_groups=args.num_groups, full_bits=args.full_bits,
        server_optimizer=args.server_optimizer,
        ddgauss_l2_clip=args.ddgauss_l2_clip,
        with_break_even=args.break_even)
  except (TypeError, ValueError) as e:
    parser.exit(2, f'error: {e}\n')
  if args.json:
    json.dump(result.to_json(), sys.stdout, indent=1)
    print()
  else:
    print('\n'.join(format_plan(result)))


if __name__ == '__main__':
  main()
