"""How each aggregator of the registry is built and calibrated.

A builder takes its `registry.AggregatorSpec` and an `AggregatorSetting`
(the model's type and the run's parameters), calibrates the aggregator to
the privacy target where it is private, and returns a
`CalibratedAggregator`: its TFF factory, parameters, accounting and wire
sizes. `registry` registers each builder under its names.
"""

import dataclasses
import functools
import math
from typing import Any, Callable, Optional

from experiments.runner import calibration_cache
from tff_dprec.plan import search as plan_search
from tff_dprec import rec
from tff_dprec import sizes
from tff_dprec.accounting import accountings
from tff_dprec.accounting import baselines

PAPER_BITS = 7  # REC's bits where they are not chosen from c (the paper's).
IN_LAW = 'in_law'  # `params['simulation']` of an aggregator simulated in law.


@dataclasses.dataclass(frozen=True)
class AggregatorSetting:
  """What the builders need: the model's type and the run's parameters."""
  value_type: Any
  population: int
  clients_per_round: int
  rounds: int
  target_epsilon: float
  delta: float
  bits: Optional[int]  # None: DP-REC picks them from c (`auto_bits`).
  grouping: Any
  noise_stddev: float
  l2_clip: float
  noise_multiplier: Optional[float] = None  # DP-FedAvg: fixed, not calibrated.
  clip_ratio: Optional[float] = None  # DP-REC: fixed, not calibrated.
  record_messages: bool = False
  accounting: str = 'min_pld_rdp'
  insecure_test_seed: Optional[int] = None

  @property
  def common(self) -> dict:
    return dict(population=self.population,
                clients_per_round=self.clients_per_round, delta=self.delta)


@dataclasses.dataclass
class CalibratedAggregator:
  """An aggregator with its calibration, privacy accounting and wire sizes."""
  name: str
  factory: Any  # tff.aggregators.UnweightedAggregationFactory
  private: bool
  sampling: str
  params: dict
  upload_bits_per_client: int
  download_bits_per_client: int
  needs_test_context: bool = False
  # epsilon after r rounds (None for non-private aggregators).
  epsilon_after: Optional[Callable[[int], float]] = None
  # The DP-REC sum inside the mean (REC-based aggregators only): its messages
  # allow server-to-client history compression.
  rec_sum: Any = None
  # Which accounting produces epsilon (None for non-private aggregators).
  accounting: Optional[str] = None
  # Epsilon of one participation against the server, which knows who took
  # part (DP-REC only; None where the server sees the update unprotected or
  # only a noisy sum).
  local_epsilon: Optional[float] = None
  # A `<method>_no_noise` control: the private method it shadows.
  control_of: Optional[str] = None

  @property
  def private_setting(self) -> bool:
    """Trained as a private method is (its optimizer and metrics)."""
    return self.private or self.control_of is not None


class OverBudgetError(ValueError):
  """A fixed (not calibrated) privacy parameter exceeds the budget."""


def _check_within_budget(name, value, epsilon, s):
  """A fixed (not calibrated) parameter must keep epsilon within target."""
  if not epsilon <= s.target_epsilon:  # nan too.
    raise OverBudgetError(
        f'{name}={value} gives epsilon={epsilon:.6g} after {s.rounds} '
        f'rounds, above target_epsilon={s.target_epsilon}; change one of '
        'them.')


def _rec_bits(spec, s, calibrated_c):
  """(bits, calibrated c or None, bits margin met or None) for REC."""
  if s.bits is not None:
    return s.bits, None, None
  if not spec.private:
    return PAPER_BITS, None, None
  if s.clip_ratio is None:
    return plan_search.auto_bits(calibrated_c)
  bits, _, margin_met = plan_search.auto_bits(lambda _: s.clip_ratio)
  return bits, None, margin_met


# Appended to a DP-REC record's accounting label when its PLD accountant
# took the worst pair's profile (docs/PRIVACY.md, Section 11). Records made
# before that profile existed read 'dp_rec_pld' at every setting.
WORST_PAIR_SUFFIX = '+worst_pair'


# A record's accounting label names the accountant that produced it:
# `DpRecPldAccountant` ('dp_rec_pld', under accounting='min_pld_rdp', which
# has returned the smaller of its PLD and RDP epsilons from the start),
# `DpRecRdpAccountant` ('dp_rec_rdp') or the paper's ('dp_rec_paper');
# DP-FedAvg's is 'subsampled_gaussian_pld' or '_rdp' in the same way.
_ACCOUNTANT_LABELS = {accountings.MIN_PLD_RDP: 'dp_rec_pld',
                      accountings.RDP: 'dp_rec_rdp',
                      accountings.PAPER: 'dp_rec_paper'}


def accounting_label(accounting, clip_ratio, bits, num_groups):
  """The record's 'accounting': its accountant's label, marked for step 3."""
  from tff_dprec.accounting import message_profile  # pylint: disable=g-import-not-at-top
  label = _ACCOUNTANT_LABELS[accounting]
  if accounting == accountings.MIN_PLD_RDP and message_profile.uses_worst_pair(
      clip_ratio=clip_ratio, bits=bits, num_groups=num_groups):
    label += WORST_PAIR_SUFFIX
  return label


def _rec_privacy(s, params, c, margin_met):
  """DP-REC's params, accounting label, local epsilon and epsilon_after.

  A clip ratio the user set (`s.clip_ratio`) must meet the target epsilon.
  """
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  message = dict(bits=params['bits'], num_groups=params['num_groups'],
                 accounting=s.accounting)
  if s.clip_ratio is not None:
    _check_within_budget('clip_ratio', c, accounting.dp_rec_epsilon(
        clip_ratio=c, rounds=s.rounds, **message, **s.common), s)
  params = dict(params, clip_ratio=c, l2_clip=c * s.noise_stddev,
                accounting=s.accounting)
  if margin_met is not None:
    params['bits_from_c'] = True
    if not margin_met:
      # The cap: the coding may limit (more groups would not).
      params['bits_margin_met'] = False
  label = accounting_label(s.accounting, c, params['bits'],
                           params['num_groups'])
  local_epsilon = accounting.dp_rec_local_epsilon(
      clip_ratio=c, delta=s.delta, bits=params['bits'],
      num_groups=params['num_groups'], accounting=_proven(s.accounting))

  # One kept state for every round's epsilon (dp_rec_epsilon's values).
  curve = accounting.DpRecEpsilonCurve(clip_ratio=c, **message, **s.common)

  @functools.lru_cache(maxsize=None)  # The loop asks twice per round.
  def epsilon_after(r):
    return curve.epsilon(r)

  return params, label, local_epsilon, epsilon_after


def build_rec(spec, s):
  """DP-REC (`dp_rec`), compression-only REC (`rec`), or DP-REC simulated
  in law (`dp_rec_in_law`, floats sent: `tff_dprec.in_law`).

  `s.bits` None: DP-REC picks its bits from its clip ratio (`auto_bits`);
  compression-only REC then uses 7 bits (the paper's).
  """
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  from tff_dprec.aggregators import dp_rec  # pylint: disable=g-import-not-at-top
  from tff_dprec.aggregators import rec_compression  # pylint: disable=g-import-not-at-top
  from tff_dprec import simulation  # pylint: disable=g-import-not-at-top

  groups = num_groups(s.value_type, s.grouping)

  def calibrated_c(bits):
    message = dict(bits=bits, num_groups=groups,
                   accounting=s.accounting)
    return calibration_cache.calibrate(
        'dp_rec_clip_ratio', accounting.calibrate_clip_ratio,
        lambda c: accounting.dp_rec_epsilon(
            clip_ratio=c, rounds=s.rounds, **message, **s.common),
        s.target_epsilon, rounds=s.rounds, **message, **s.common)

  bits, c, margin_met = _rec_bits(spec, s, calibrated_c)
  params = dict(noise_stddev=s.noise_stddev, bits=bits,
                grouping=s.grouping, num_groups=groups,
                total_bits=bits * groups)
  clip, epsilon_after, label, local_epsilon = None, None, None, None
  if spec.private:
    if c is None:
      c = s.clip_ratio if s.clip_ratio is not None else calibrated_c(bits)
    clip = c * s.noise_stddev
    params, label, local_epsilon, epsilon_after = _rec_privacy(
        s, params, c, margin_met)
  coding = dict(bits=bits, grouping=s.grouping,
                insecure_test_seed=s.insecure_test_seed)
  if spec.in_law:  # Registered private only: the simulation clips.
    params['simulation'] = IN_LAW
    rec_sum = simulation.DpRecInLawSumFactory(s.noise_stddev, clip,
                                              **coding)
  elif spec.private:
    rec_sum = dp_rec.DpRecSumFactory(
        s.noise_stddev, clip, record_messages=s.record_messages, **coding)
  else:
    rec_sum = rec_compression.RecCompressionSumFactory(
        s.noise_stddev, record_messages=s.record_messages, **coding)
  # The layout checks the model's type and the memory budget per group.
  layout = rec_sum.layout(s.value_type)
  return CalibratedAggregator(
      spec.name, tff.aggregators.UnweightedMeanFactory(
          value_sum_factory=rec_sum),
      private=spec.private,
      sampling=spec.sampling, params=params,
      upload_bits_per_client=layout.message_bits,
      download_bits_per_client=_full_model_bits(s.value_type),
      epsilon_after=epsilon_after, rec_sum=rec_sum, accounting=label,
      local_epsilon=local_epsilon)


def build_dp_fedavg(spec, s):
  """DP-FedAvg with fixed clip and noise (McMahan et al. 2018).

  The noise multiplier is calibrated to the target, or is
  `s.noise_multiplier` when given (its epsilon must be within the target).
  """
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  kind = _fedavg_accounting(s.accounting)
  if s.noise_multiplier is None:
    z = calibration_cache.calibrate(
        'dp_fedavg_noise_multiplier', accounting.calibrate_dp_fedavg_noise,
        lambda z: accounting.dp_fedavg_epsilon(
            noise_multiplier=z, rounds=s.rounds, accounting=kind,
            **s.common),
        s.target_epsilon, rounds=s.rounds, accounting=kind, **s.common)
  else:
    z = s.noise_multiplier
    _check_within_budget('noise_multiplier', z, accounting.dp_fedavg_epsilon(
        noise_multiplier=z, rounds=s.rounds, accounting=kind, **s.common), s)
  factory = tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
      noise_multiplier=z, clients_per_round=s.clients_per_round,
      clip=s.l2_clip)

  @functools.lru_cache(maxsize=None)  # The loop asks twice per round.
  def epsilon_after(r, z=z):
    if r == 0:
      return 0.0
    return accounting.dp_fedavg_epsilon(noise_multiplier=z, rounds=r,
                                        accounting=kind, **s.common)

  full = _full_model_bits(s.value_type)
  return CalibratedAggregator(
      spec.name, factory, private=True,
      sampling=spec.sampling,
      params=dict(noise_multiplier=z, l2_clip=s.l2_clip),
      upload_bits_per_client=full, download_bits_per_client=full,
      epsilon_after=epsilon_after,
      accounting=('subsampled_gaussian_pld'
                  if kind == accountings.MIN_PLD_RDP
                  else f'subsampled_gaussian_{kind}'))


def build_ddgauss(spec, s):
  """TFF's distributed discrete Gaussian at 16 or 12 bits."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  # TFF 0.87 does not export `DistributedDpSumFactory` (needed for the
  # distributed discrete Gaussian) from `tff.aggregators`; it is imported
  # from its module, here only.
  from tensorflow_federated.python.aggregators import distributed_dp  # pylint: disable=g-import-not-at-top
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  ddg_bits = int(spec.name[len('ddgauss'):])
  dim = _num_elements(s.value_type)
  settings = dict(l2_clip=s.l2_clip, bits=ddg_bits, rounds=s.rounds,
                  dimension=dim, **s.common)
  z = calibration_cache.calibrate(
      'ddgauss_noise_multiplier', accounting.calibrate_ddgauss_noise,
      lambda z: accounting.ddgauss_epsilon(noise_multiplier=z, **settings),
      s.target_epsilon, **settings)
  params = baselines.ddgauss_params(
      noise_multiplier=z, l2_clip=s.l2_clip, bits=ddg_bits,
      clients_per_round=s.clients_per_round, dimension=dim)
  factory = tff.aggregators.UnweightedMeanFactory(
      value_sum_factory=distributed_dp.DistributedDpSumFactory(
          noise_multiplier=z, expected_clients_per_round=s.clients_per_round,
          bits=ddg_bits, l2_clip=s.l2_clip, mechanism='distributed_dgauss'))

  @functools.lru_cache(maxsize=None)  # The loop asks twice per round.
  def epsilon_after(r, z=z):
    if r == 0:
      return 0.0
    return accounting.ddgauss_epsilon(
        noise_multiplier=z, l2_clip=s.l2_clip, bits=ddg_bits, rounds=r,
        dimension=dim, **s.common)

  return CalibratedAggregator(
      spec.name, factory, private=True,
      sampling=spec.sampling,
      params=dict(noise_multiplier=z, l2_clip=s.l2_clip, bits=ddg_bits,
                  scale=params.scale, padded_dim=params.padded_dim),
      upload_bits_per_client=ddg_bits * params.padded_dim,
      download_bits_per_client=_full_model_bits(s.value_type),
      needs_test_context=True, epsilon_after=epsilon_after,
      accounting='ddgauss_rdp_zhu_wang')


def build_dp_fedavg_rdp(spec, s):
  """DP-FedAvg calibrated and accounted with RDP whatever `s.accounting`:
  the reference beside DDGauss, whose accountant is RDP (its distance to
  DP-FedAvg splits into mechanism and accountant; docs/EXPERIMENTS.md)."""
  return build_dp_fedavg(spec, dataclasses.replace(
      s, accounting=accountings.RDP))


def _proven(name):
  """DP-REC's local epsilon: the proven accounting ('paper' has none)."""
  return accountings.MIN_PLD_RDP if name == accountings.PAPER else name


def _fedavg_accounting(name):
  """DP-FedAvg's accountant: PLD with 'min_pld_rdp', RDP with the others."""
  return (accountings.MIN_PLD_RDP if name == accountings.MIN_PLD_RDP
          else accountings.RDP)


def build_fedavg(spec, s):
  """Non-private FedAvg (unweighted mean)."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  full = _full_model_bits(s.value_type)
  return CalibratedAggregator(
      spec.name, tff.aggregators.UnweightedMeanFactory(), private=False,
      sampling=spec.sampling, params={},
      upload_bits_per_client=full, download_bits_per_client=full)


def build_no_noise(spec, s):
  """A private method's control: its clip and sampling, no noise, no coding.

  The same clip (DP-REC's c * sigma, or DP-FedAvg's and DDGauss's l2_clip,
  calibrated as the method is), the same sampling scheme and the same
  denominator (B); the clipped updates are averaged exactly (TFF's fixed
  Gaussian factory at noise 0). Set beside the method, it separates the
  cost of clipping from the cost of privacy. Not private.
  """
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  base = spec.base
  base_aggregator = base.build(base, dataclasses.replace(
      s, record_messages=False, insecure_test_seed=None))
  clip = base_aggregator.params['l2_clip']
  full = _full_model_bits(s.value_type)
  return CalibratedAggregator(
      spec.name, tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
          noise_multiplier=0.0, clients_per_round=s.clients_per_round,
          clip=clip),
      private=False, sampling=spec.sampling,
      params=dict(control_of=base.name, l2_clip=clip, noise_multiplier=0.0),
      upload_bits_per_client=full, download_bits_per_client=full,
      control_of=base.name)


def exact_sample_parameters(clip_ratio: float, noise_stddev: float,
                            clients_per_round: int) -> dict:
  """DP-FedAvg's (noise_multiplier, l2_clip) equal in law to exact samples.

  DP-REC's ideal channel sends, for each of the B drawn clients, one exact
  sample of N(clip(update, c * sigma), sigma^2 I). The mean of B such
  samples is the mean of the clipped updates plus N(0, sigma^2 / B I).
  TFF's fixed Gaussian mean adds N(0, (z * clip)^2 I) to the sum of the
  clipped updates and divides by B: with clip = c * sigma and
  z = sqrt(B) / c, its noise on the mean is N(0, sigma^2 / B I), the same.

  Raises:
    ValueError: naming the argument, for a non-positive value.
  """
  for name, value in (('clip_ratio', clip_ratio),
                      ('noise_stddev', noise_stddev),
                      ('clients_per_round', clients_per_round)):
    if isinstance(value, bool) or not value > 0 or not math.isfinite(value):
      raise ValueError(f'{name} must be positive and finite, found '
                       f'{value!r}.')
  return dict(noise_multiplier=math.sqrt(clients_per_round) / clip_ratio,
              l2_clip=clip_ratio * noise_stddev)


def build_exact_sample(spec, s):
  """DP-REC's exact-sample control (the paper's "no compression", Fig. 5).

  DP-REC's clip ratio c (calibrated or fixed, as DP-REC's own run would
  have it) and its sigma; each drawn client's update, clipped to c * sigma,
  with exact Gaussian noise of standard deviation sigma instead of a REC
  message: TFF's fixed Gaussian mean at `exact_sample_parameters`, equal
  in distribution (the noise is added once to the sum), with DP-REC's
  sampling (B draws with replacement). It isolates what REC's coding costs
  under noise. Its privacy is not DP-REC's and is not accounted: a
  control, not a private method.
  """
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  base = spec.base
  base_aggregator = base.build(base, dataclasses.replace(
      s, record_messages=False, insecure_test_seed=None))
  c = base_aggregator.params['clip_ratio']
  exact = exact_sample_parameters(c, s.noise_stddev, s.clients_per_round)
  full = _full_model_bits(s.value_type)
  return CalibratedAggregator(
      spec.name, tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
          noise_multiplier=exact['noise_multiplier'],
          clients_per_round=s.clients_per_round, clip=exact['l2_clip']),
      private=False, sampling=spec.sampling,
      params=dict(control_of=base.name, clip_ratio=c,
                  noise_stddev=s.noise_stddev, **exact),
      upload_bits_per_client=full, download_bits_per_client=full,
      control_of=base.name)


def _num_elements(value_type) -> int:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  specs = tff.types.type_to_tf_tensor_specs(value_type)
  return int(sum(
      math.prod(s.shape.as_list()) for s in tf.nest.flatten(specs)))


def _full_model_bits(value_type) -> int:
  return sizes.FLOAT_BITS * _num_elements(value_type)


def num_groups(value_type, grouping) -> int:
  """The number of DP-REC groups (indices per message) of updates of
  `value_type` (a TFF type) under `grouping` (`rec.split_groups`)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  specs = tff.types.type_to_tf_tensor_specs(value_type)
  return len(rec.split_groups(
      [math.prod(s.shape.as_list()) for s in tf.nest.flatten(specs)],
      grouping))
