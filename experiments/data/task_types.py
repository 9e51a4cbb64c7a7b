"""The plain types of the tasks: their specs, defaults, builders' inputs and
outputs. No TensorFlow, no data modules: everything else in `data/`
imports these, and these import nothing of the project.
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional

# RunConfig.population: the clients in the data files (embedded SO-LR).
STORED = 'stored'


class MissingDataError(FileNotFoundError):
  """The real dataset of a task is not in the data directory."""


@dataclasses.dataclass(frozen=True)
class Defaults:
  """A task's default run settings (`RunConfig.resolved` fills them in)."""
  rounds: int
  clients_per_round: int
  client_lr: float
  server_lr: float
  server_momentum: float
  batch_size: int
  # None: DP-REC picks them from c (tff_dprec.plan.auto_bits).
  bits: Optional[int]
  grouping: Any
  noise_stddev: float  # DP-REC prior stddev sigma.
  l2_clip: float  # DP-FedAvg and DDGauss clip.
  server_optimizer: str = 'sgdm'  # or 'adam'
  eval_every: int = 10
  # Server optimizer and learning rate for private aggregators (default:
  # server_optimizer, server_lr). With Adam, noise-only coordinates move as
  # far as informative ones.
  private_server_lr: Optional[float] = None
  private_server_optimizer: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class BuildSettings:
  """What a task's builder takes."""
  data_dir: str
  batch_size: int
  seed: int
  embedded_config: Optional[dict] = None
  population: Any = None


@dataclasses.dataclass(frozen=True)
class TaskData:
  """What a task's builder returns."""
  baseline: Any  # tff.simulation.baselines.BaselineTask
  data_source: str  # 'real' or 'embedded'
  data_note: str
  # The embedded SO-LR data preprocessed once into arrays
  # (`stackoverflow_arrays`): {split: SplitArrays}; None elsewhere.
  arrays: Optional[dict] = None
  # (ids, seed) -> the clients' training data as tensors, where the task
  # holds them (`stackoverflow_arrays.ClientTensors`, `images.ClientImages`);
  # else None and TFF builds the datasets from ids inside the round.
  client_data: Any = None
  # The training clients where they are not the TFF dataset's (on demand).
  client_ids: Any = None
  # 'stored' (the data files' clients) or 'on demand'.
  population_source: str = 'stored'


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """A task: its defaults, metric, builder and capabilities."""
  name: str
  defaults: Defaults
  metric: str  # The key of the evaluation metrics.
  metric_label: str
  # BuildSettings -> TaskData (imports its data modules when called).
  build: Callable[[BuildSettings], Any]
  # TFF's SO-LR model sums its loss over a batch; the others average.
  loss_summed_over_batch: bool = False
  # The reference row "always predict the 5 most frequent tags".
  frequent_tags: bool = False
  # `--population` (training clients made on demand) applies.
  population_applies: bool = False
  # Tasks of one (batch size, seed) have the same training data and share
  # one TFF dataset computation in a process (traced once).
  shared_dataset: bool = False
  # BuildSettings -> TaskData with the task's model and training clients
  # but no data (a report from stored records needs no data files); None
  # where the task cannot say them without its data.
  model_only: Optional[Callable[[BuildSettings], Any]] = None
  # RunConfig fields the reproduction's training parts
  # (`experiments.studies.utility`) take over the defaults: the setting
  # docs/REPRODUCTION.md ran, pinned so that the committed reproduction
  # stays what it says.
  reproduction: Mapping[str, Any] = dataclasses.field(default_factory=dict,
                                                      hash=False)


@dataclasses.dataclass(frozen=True)
class ModelOnly:
  """A baseline task's model without its datasets (`TaskSpec.model_only`)."""
  model_fn: Callable[[], Any]
