"""What the planner is asked about and what it finds, as typed records.

`Federation` is the setting; `Plan` holds one record per mechanism
(`DpRecPlan`, `DpFedAvgPlan`, `DdgaussPlan`, with their common fields in
`MechanismPlan`) and DP-REC's `BreakEven`. `to_json` gives the flat
dictionaries of `python -m tff_dprec.plan --json`.
"""

from typing import ClassVar, Optional

import attrs

from tff_dprec.accounting import accountings


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


@attrs.frozen(kw_only=True)
class MechanismPlan:
  """What every mechanism's record holds.

  Class attributes: `name` ('dp_rec', 'dp_fedavg' or 'ddgauss'),
  `parameter_name` ('clip_ratio' (c) or 'noise_multiplier' (z)) and
  `accountant` (the accountant it is calibrated with).

  Attributes:
    parameter: The calibrated value, or None when the target is out of reach
      (`error` says why).
    relative_noise: Noise per coordinate of the mean update over the clip
      (None with `parameter`).
    upload_bits: Bits a client sends per round.
    download_bits: Bits a client receives per round (DP-REC: expected; None
      where its c is out of reach).
    error: Why there is no parameter, else None.
  """
  name: ClassVar[str]
  parameter_name: ClassVar[str]
  accountant: ClassVar[str]

  parameter: Optional[float]
  relative_noise: Optional[float]
  upload_bits: int
  download_bits: Optional[float]
  error: Optional[str] = None

  def to_json(self) -> dict:
    """The common fields, the mechanism's own, then `error` where set."""
    out = dict(parameter_name=self.parameter_name, parameter=self.parameter,
               accountant=self.accountant,
               relative_noise=self.relative_noise,
               upload_bits=self.upload_bits,
               download_bits=self.download_bits)
    out.update(self._own_json())
    if self.error is not None:
      out['error'] = self.error
    return out

  def _own_json(self) -> dict:
    return {}


@attrs.frozen(kw_only=True)
class BreakEven:
  """DP-REC at its break-even B' (`search.break_even`).

  Attributes:
    clients_per_round: B', the fewest clients per round at which DP-REC's
      relative noise is at most DP-FedAvg's at B.
    clip_ratio: DP-REC's c calibrated at B'.
    bits: Its bits per group there.
    bits_margin_met: Whether those bits meet the coding margin at c (None
      for bits given, not chosen from c).
    outside_idealisation: Whether c is outside the idealisation the privacy
      proof relies on (`sizes.IDEALISED_CLIP_RATIO_LIMIT`).
    relative_noise: 1 / (c sqrt(B')).
    upload_bits_per_round: What B' clients upload in one round.
    download_bits_per_round: What they download in one round, expected.
  """
  clients_per_round: int
  clip_ratio: float
  bits: int
  bits_margin_met: Optional[bool]
  outside_idealisation: bool
  relative_noise: float
  upload_bits_per_round: int
  download_bits_per_round: float


@attrs.frozen(kw_only=True)
class DpRecPlan(MechanismPlan):
  """DP-REC: its clip ratio c (PLD accountant), message and history.

  Attributes (besides `MechanismPlan`'s):
    num_groups: Groups per message.
    bits_from_c: Whether the bits are chosen from c (`search.auto_bits`).
    full_bits: The model and server optimizer state a history competes
      with.
    bits: Index bits per group (None where c is out of reach).
    bits_margin_met: Whether they meet the coding margin at c (None for
      bits given, or where c is out of reach).
    outside_idealisation: Whether c is outside the idealisation the privacy
      proof relies on (None where c is out of reach).
    local_epsilon: Epsilon of one participation without amplification (what
      the server learns from one message; None where c is out of reach).
    break_even_searched: Whether the break-even was searched.
    break_even: The break-even, or None when not searched or when no
      B' <= N matches DP-FedAvg's noise.
  """
  name: ClassVar[str] = 'dp_rec'
  parameter_name: ClassVar[str] = 'clip_ratio'
  accountant: ClassVar[str] = accountings.MIN_PLD_RDP

  num_groups: int
  bits_from_c: bool
  full_bits: int
  bits: Optional[int] = None
  bits_margin_met: Optional[bool] = None
  outside_idealisation: Optional[bool] = None
  local_epsilon: Optional[float] = None
  break_even_searched: bool = False
  break_even: Optional[BreakEven] = None

  def _own_json(self) -> dict:
    if self.parameter is None:
      return dict(num_groups=self.num_groups)
    out = dict(bits=self.bits, num_groups=self.num_groups,
               bits_from_c=self.bits_from_c,
               bits_margin_met=self.bits_margin_met, full_bits=self.full_bits,
               outside_idealisation=self.outside_idealisation,
               local_epsilon=self.local_epsilon)
    if self.break_even_searched:
      out['break_even_clients_per_round'] = None
    if self.break_even is not None:
      out.update({f'break_even_{k}': v
                  for k, v in attrs.asdict(self.break_even).items()})
    return out


@attrs.frozen(kw_only=True)
class DpFedAvgPlan(MechanismPlan):
  """DP-FedAvg: its noise multiplier z (PLD accountant), full-model traffic.

  Attributes (besides `MechanismPlan`'s):
    rdp_noise_multiplier: z calibrated under RDP, DDGauss's accountant (for
      a like-for-like comparison).
  """
  name: ClassVar[str] = 'dp_fedavg'
  parameter_name: ClassVar[str] = 'noise_multiplier'
  accountant: ClassVar[str] = accountings.MIN_PLD_RDP

  rdp_noise_multiplier: float

  def _own_json(self) -> dict:
    return dict(rdp_parameter=self.rdp_noise_multiplier)


@attrs.frozen(kw_only=True)
class DdgaussPlan(MechanismPlan):
  """DDGauss: its noise multiplier z (RDP accountant), quantised upload.

  Attributes (besides `MechanismPlan`'s):
    bits: Bits per padded coordinate.
    l2_clip: Its clip, which sets the quantisation grid.
  """
  name: ClassVar[str] = 'ddgauss'
  parameter_name: ClassVar[str] = 'noise_multiplier'
  accountant: ClassVar[str] = accountings.RDP

  bits: int
  l2_clip: float

  def _own_json(self) -> dict:
    return dict(bits=self.bits, l2_clip=self.l2_clip)


@attrs.frozen
class Plan:
  """A federation and its three mechanisms (`planner.plan`)."""
  federation: Federation
  dp_rec: DpRecPlan
  dp_fedavg: DpFedAvgPlan
  ddgauss: DdgaussPlan

  def to_json(self) -> dict:
    """{'dp_rec': ..., 'dp_fedavg': ..., 'ddgauss': ..., 'federation': ...}."""
    return dict(dp_rec=self.dp_rec.to_json(),
                dp_fedavg=self.dp_fedavg.to_json(),
                ddgauss=self.ddgauss.to_json(),
                federation=attrs.asdict(self.federation))
