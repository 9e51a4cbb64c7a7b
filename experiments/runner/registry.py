"""The aggregators the experiments compare: a registry, by name.

Each aggregator is an `AggregatorSpec`: its capabilities as data (private,
supports_history, needs_test_context, sampling, the protocol it simulates
in law) and a builder (`aggregator_builders`) that calibrates it to a
privacy budget and returns a `CalibratedAggregator` (`build`). Code
elsewhere asks the spec, never the name.
"""

import dataclasses
from typing import Callable, Optional

from experiments.runner import aggregator_builders as builders

# How a run draws its clients each round (`AggregatorSpec.sampling`): the
# scheme its accountant assumes.
WITH_REPLACEMENT = 'with replacement'  # DP-REC: B draws (Algorithm 7).
POISSON = 'poisson'  # Each client with probability B/N (DP-FedAvg).
FIXED_SIZE = 'without replacement within a round'  # B distinct clients.
SAMPLINGS = (WITH_REPLACEMENT, POISSON, FIXED_SIZE)

NO_NOISE_SUFFIX = '_no_noise'
EXACT_SAMPLE_SUFFIX = '_exact_sample'
EXACT_SAMPLE = 'dp_rec_exact_sample'
# DP-FedAvg under RDP, the reference for DDGauss
# (`aggregator_builders.build_dp_fedavg_rdp`).
DP_FEDAVG_RDP = 'dp_fedavg_rdp'
# DP-REC's decoded updates drawn in law: a simulation, not a protocol.
DP_REC_IN_LAW = 'dp_rec_in_law'
IN_LAW_NOTE = ('simulates DP-REC\'s decoded update in law: its clients send '
               'floats, so it is not a deployable protocol; its traffic is '
               'the real protocol\'s, analytic')


@dataclasses.dataclass(frozen=True)
class AggregatorSpec:
  """An aggregator's capabilities and its builder."""
  name: str
  private: bool
  supports_history: bool
  needs_test_context: bool
  sampling: str
  build: Callable[['AggregatorSpec', builders.AggregatorSetting],
                  builders.CalibratedAggregator]
  # Seconds per round relative to FedAvg's, to balance runs over processes
  # (`experiments.runner.jobs`) and order a study's points; measured in
  # docs/EXPERIMENTS.md ("Time").
  relative_cost: float = 1.0
  # SIMULATION ONLY: the decoded updates of `simulates` drawn in law
  # (`tff_dprec.in_law`); clients send floats, traffic is the real
  # protocol's, analytic, and history downlinks are sized, not replayed.
  simulates: Optional[str] = None
  # A control (`<method>_no_noise`, DP-REC's exact-sample control): the spec
  # of the private method it shadows.
  base: Optional['AggregatorSpec'] = None

  @property
  def in_law(self) -> bool:
    return self.simulates is not None

  @property
  def protocol(self) -> str:
    """The protocol this aggregator runs, or simulates in law."""
    return self.simulates or self.name


_REGISTRY: dict = {}


def register(spec: AggregatorSpec) -> AggregatorSpec:
  if spec.name in _REGISTRY:
    raise ValueError(f'Aggregator {spec.name!r} is already registered.')
  _REGISTRY[spec.name] = spec
  return spec


def names() -> tuple:
  return tuple(_REGISTRY)


def private_names() -> tuple:
  return tuple(n for n, s in _REGISTRY.items() if s.private)


def protocol(name: str) -> str:
  """The protocol aggregator `name` runs or simulates ('dp_rec' for
  'dp_rec_in_law'); ValueError for an unknown name."""
  return get(name).protocol


def get(name: str) -> AggregatorSpec:
  if name not in _REGISTRY:
    raise ValueError(f'Unknown aggregator {name!r}; choose from {names()}.')
  return _REGISTRY[name]


def build(name: str, **setting) -> builders.CalibratedAggregator:
  """Builds and calibrates aggregator `name` (`AggregatorSetting`'s fields).

  Private aggregators are calibrated so that epsilon after `rounds` rounds is
  at most `target_epsilon` at `delta`. `record_messages` makes the REC-based
  aggregators report their messages (for history downlinks);
  `insecure_test_seed` (tests only, not private) makes their messages
  deterministic. `accounting` is DP-REC's (`'min_pld_rdp'`, `'rdp'` or
  `'paper'`) and DP-FedAvg's (`'min_pld_rdp'`, or RDP otherwise).

  Raises:
    ValueError: For an unknown aggregator.
    tff_dprec.accounting.OverheadExceedsDeltaError: Paper accounting, the
      bits cannot reach delta.
    tff_dprec.accounting.TargetUnreachableError: No parameter meets the
      target.
  """
  spec = get(name)
  return spec.build(spec, builders.AggregatorSetting(**setting))


def control_of(name: str) -> Optional[str]:
  """The private method a `<method>_no_noise` control row shadows, or None."""
  if name.endswith(NO_NOISE_SUFFIX):
    return name[:-len(NO_NOISE_SUFFIX)]
  return None


def idealisation_warning(params) -> Optional[str]:
  """A warning when DP-REC's clip ratio is outside the proof's idealisation."""
  from tff_dprec import rec  # pylint: disable=g-import-not-at-top
  clip_ratio = params.get('clip_ratio')
  if clip_ratio is None or clip_ratio < rec.IDEALISED_CLIP_RATIO_LIMIT:
    return None
  return (f'WARNING: clip ratio {clip_ratio:.3f} >= '
          f'{rec.IDEALISED_CLIP_RATIO_LIMIT:g}: outside the idealisation the '
          'privacy proof relies on (bounded Gumbel selection noise, '
          'docs/PRIVACY.md section 7); do not trust this epsilon.')


# Order: the default comparison first. DP-REC samples with replacement
# (Algorithm 7). DP-FedAvg samples each client independently with
# probability B/N, as its accountant (Poisson-subsampled Gaussian, fixed
# denominator B: McMahan et al. 2018) assumes. DDGauss needs exactly B
# clients (each adds 1/B of the noise), so it draws B distinct clients; its
# Poisson accounting is an assumption for that sampler (docs/PRIVACY.md,
# section 8).
for _spec in (
    AggregatorSpec('dp_rec', private=True, supports_history=True,
                   needs_test_context=False, sampling=WITH_REPLACEMENT,
                   build=builders.build_rec, relative_cost=5.0),
    AggregatorSpec('rec', private=False, supports_history=True,
                   needs_test_context=False, sampling=WITH_REPLACEMENT,
                   build=builders.build_rec, relative_cost=5.0),
    AggregatorSpec('dp_fedavg', private=True, supports_history=False,
                   needs_test_context=False, sampling=POISSON,
                   build=builders.build_dp_fedavg, relative_cost=1.25),
    AggregatorSpec(DP_FEDAVG_RDP, private=True, supports_history=False,
                   needs_test_context=False, sampling=POISSON,
                   build=builders.build_dp_fedavg_rdp, relative_cost=1.25),
    AggregatorSpec('ddgauss16', private=True, supports_history=False,
                   needs_test_context=True, sampling=FIXED_SIZE,
                   build=builders.build_ddgauss, relative_cost=3.5),
    AggregatorSpec('ddgauss12', private=True, supports_history=False,
                   needs_test_context=True, sampling=FIXED_SIZE,
                   build=builders.build_ddgauss, relative_cost=3.5),
    AggregatorSpec('fedavg', private=False, supports_history=False,
                   needs_test_context=False, sampling=FIXED_SIZE,
                   build=builders.build_fedavg),
):
  register(_spec)

for _base in ('dp_rec', 'dp_fedavg', DP_FEDAVG_RDP, 'ddgauss16', 'ddgauss12'):
  register(AggregatorSpec(
      _base + NO_NOISE_SUFFIX, private=False, supports_history=False,
      needs_test_context=False, sampling=get(_base).sampling,
      build=builders.build_no_noise, base=get(_base)))
register(AggregatorSpec(
    EXACT_SAMPLE, private=False, supports_history=False,
    needs_test_context=False, sampling=get('dp_rec').sampling,
    build=builders.build_exact_sample, relative_cost=1.25,
    base=get('dp_rec')))
register(AggregatorSpec(
    DP_REC_IN_LAW, private=True, supports_history=True,
    needs_test_context=False, sampling=get('dp_rec').sampling,
    build=builders.build_rec, relative_cost=1.5, simulates='dp_rec'))
