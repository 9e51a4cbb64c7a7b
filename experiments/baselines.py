"""Aggregators compared in the experiments, calibrated to one privacy budget."""

import dataclasses
import math
from typing import Callable, Optional

import tensorflow as tf
import tensorflow_federated as tff
# TFF 0.87 does not export `DistributedDpSumFactory` (needed for the
# distributed discrete Gaussian) from `tff.aggregators`; it is imported from
# its module, here only.
from tensorflow_federated.python.aggregators import distributed_dp

from tff_dprec import accounting
from tff_dprec.aggregators import dp_rec

AGGREGATORS = ('dp_rec', 'rec', 'dp_fedavg', 'ddgauss16', 'ddgauss12',
               'fedavg')
PRIVATE = ('dp_rec', 'dp_fedavg', 'ddgauss16', 'ddgauss12')
FLOAT_BITS = 32


@dataclasses.dataclass
class AggregatorPlan:
  """An aggregator with its calibration, privacy ledger and wire sizes."""
  name: str
  factory: tff.aggregators.UnweightedAggregationFactory
  private: bool
  sample_with_replacement: bool
  params: dict
  upload_bits_per_client: int
  download_bits_per_client: int
  needs_test_context: bool = False
  # epsilon after r rounds (None for non-private aggregators).
  epsilon_after: Optional[Callable[[int], float]] = None
  # The DP-REC sum inside the mean (REC-based aggregators only): its messages
  # allow server-to-client history compression.
  rec_sum: Optional[dp_rec.DPRecSumFactory] = None


def plan(name: str, *, value_type, population: int, clients_per_round: int,
         rounds: int, target_epsilon: float, delta: float, bits: int,
         grouping, noise_stddev: float, l2_clip: float,
         record_messages: bool = False,
         accounting_mode: str = accounting.SOUND,
         insecure_test_seed: Optional[int] = None) -> AggregatorPlan:
  """Builds and calibrates aggregator `name` for `value_type` (model weights).

  Private aggregators are calibrated so that epsilon after `rounds` rounds is
  at most `target_epsilon` at `delta`. `record_messages` makes the REC-based
  aggregators report their messages (for history downlinks);
  `insecure_test_seed` (tests only, not private) makes their messages
  deterministic. `accounting_mode` is DP-REC's accounting (`'sound'`, the
  default, or `'paper'`; see docs/PRIVACY.md).

  Raises:
    ValueError: For an unknown aggregator.
    accounting.OverheadExceedsDeltaError: DP-REC's bits cannot reach delta.
    accounting.TargetUnreachableError: DDGauss cannot reach the target.
  """
  dim = _num_elements(value_type)
  full_model_bits = FLOAT_BITS * dim
  common = dict(population=population, clients_per_round=clients_per_round,
                delta=delta)
  if name in ('dp_rec', 'rec'):
    probe = dp_rec.DPRecSumFactory(noise_stddev=noise_stddev, l2_clip=1.0,
                                   bits=bits, grouping=grouping)
    num_groups = probe.num_groups(value_type)
    total_bits = bits * num_groups
    if name == 'rec':
      clip, epsilon_after, params = None, None, dict(
          noise_stddev=noise_stddev, bits=bits, grouping=grouping,
          num_groups=num_groups, total_bits=total_bits)
    else:
      message = dict(bits=bits, num_groups=num_groups,
                     accounting=accounting_mode)
      c = accounting.calibrate_clip_ratio(
          target_epsilon=target_epsilon, rounds=rounds, **message, **common)
      clip = c * noise_stddev
      params = dict(noise_stddev=noise_stddev, clip_ratio=c, l2_clip=clip,
                    bits=bits, grouping=grouping, num_groups=num_groups,
                    total_bits=total_bits, accounting=accounting_mode)

      def epsilon_after(r, c=c):
        if r == 0:
          return 0.0
        return accounting.dp_rec_epsilon(clip_ratio=c, rounds=r, **message,
                                         **common)

    rec_sum = dp_rec.DPRecSumFactory(noise_stddev, clip, bits=bits,
                                     grouping=grouping,
                                     record_messages=record_messages,
                                     insecure_test_seed=insecure_test_seed)
    factory = tff.aggregators.UnweightedMeanFactory(value_sum_factory=rec_sum)
    return AggregatorPlan(
        name, factory, private=name == 'dp_rec', sample_with_replacement=True,
        params=params,
        upload_bits_per_client=probe.message_bits(value_type),
        download_bits_per_client=full_model_bits, epsilon_after=epsilon_after,
        rec_sum=rec_sum)
  if name == 'dp_fedavg':
    z = accounting.calibrate_dp_fedavg_noise(
        target_epsilon=target_epsilon, rounds=rounds, **common)
    factory = tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
        noise_multiplier=z, clients_per_round=clients_per_round, clip=l2_clip)

    def epsilon_after(r, z=z):
      if r == 0:
        return 0.0
      return accounting.dp_fedavg_epsilon(noise_multiplier=z, rounds=r,
                                          **common)

    return AggregatorPlan(
        name, factory, private=True, sample_with_replacement=False,
        params=dict(noise_multiplier=z, l2_clip=l2_clip),
        upload_bits_per_client=full_model_bits,
        download_bits_per_client=full_model_bits, epsilon_after=epsilon_after)
  if name in ('ddgauss16', 'ddgauss12'):
    ddg_bits = int(name[len('ddgauss'):])
    z = accounting.calibrate_ddgauss_noise(
        target_epsilon=target_epsilon, l2_clip=l2_clip, bits=ddg_bits,
        rounds=rounds, dimension=dim, **common)
    params = accounting.ddgauss_params(
        noise_multiplier=z, l2_clip=l2_clip, bits=ddg_bits,
        clients_per_round=clients_per_round, dimension=dim)
    factory = tff.aggregators.UnweightedMeanFactory(
        value_sum_factory=distributed_dp.DistributedDpSumFactory(
            noise_multiplier=z, expected_clients_per_round=clients_per_round,
            bits=ddg_bits, l2_clip=l2_clip, mechanism='distributed_dgauss'))

    def epsilon_after(r, z=z):
      if r == 0:
        return 0.0
      return accounting.ddgauss_epsilon(
          noise_multiplier=z, l2_clip=l2_clip, bits=ddg_bits, rounds=r,
          dimension=dim, **common)

    return AggregatorPlan(
        name, factory, private=True, sample_with_replacement=False,
        params=dict(noise_multiplier=z, l2_clip=l2_clip, bits=ddg_bits,
                    scale=params.scale, padded_dim=params.padded_dim),
        upload_bits_per_client=ddg_bits * params.padded_dim,
        download_bits_per_client=full_model_bits, needs_test_context=True,
        epsilon_after=epsilon_after)
  if name == 'fedavg':
    return AggregatorPlan(
        name, tff.aggregators.UnweightedMeanFactory(), private=False,
        sample_with_replacement=False, params={},
        upload_bits_per_client=full_model_bits,
        download_bits_per_client=full_model_bits)
  raise ValueError(f'Unknown aggregator {name!r}; choose from {AGGREGATORS}.')


def _num_elements(value_type) -> int:
  specs = tff.types.type_to_tf_tensor_specs(value_type)
  return int(sum(
      math.prod(s.shape.as_list()) for s in tf.nest.flatten(specs)))

