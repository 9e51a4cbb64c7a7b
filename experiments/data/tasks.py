"""A federated task ready for a training loop, and `create_task`.

`create_task(name, data_dir)` asks the task's spec (`task_registry`) for its
builder, which returns a `TaskData`; the `Task` adds what every task has (its
defaults, its metric, the dataset computation TFF runs inside a round).
"""

import dataclasses
import functools
from typing import Any, Optional

import tensorflow_federated as tff

from experiments.data import task_registry
from experiments.data import task_types


@dataclasses.dataclass
class Task:
  """A federated task ready for a training loop."""
  spec: task_types.TaskSpec
  baseline: tff.simulation.baselines.BaselineTask
  data_source: str  # 'real' or 'embedded'
  data_note: str
  # The embedded SO-LR data preprocessed once into arrays
  # (`stackoverflow_arrays`): {split: SplitArrays}; None elsewhere.
  arrays: Optional[dict] = None
  # (ids, seed) -> the clients' training data as tensors when `arrays` are
  # held (`stackoverflow_arrays.ClientTensors`); else None and TFF builds the
  # datasets from ids inside the round (`dataset_computation`).
  client_data: Any = None
  # 'stored' (the data files' clients) or 'on demand'
  # (`stackoverflow_population`).
  population_source: str = 'stored'
  # The training clients where they are not the TFF dataset's (on demand).
  client_ids: Any = None
  # Tasks of one key have the same training data and preprocessing (digits:
  # its name, batch size and seed) and share one `dataset_computation` in a
  # process, traced once; None: a computation of its own.
  dataset_key: Optional[tuple] = None
  _dense: dict = dataclasses.field(default_factory=dict, repr=False)
  # `evaluate_with_model`'s (model, traced forward pass), made once.
  _evaluator: Any = dataclasses.field(default=None, repr=False)

  @property
  def name(self) -> str:
    return self.spec.name

  @property
  def metric(self) -> str:
    """The key of the evaluation metrics that the task reports."""
    return self.spec.metric

  @property
  def metric_label(self) -> str:
    return self.spec.metric_label

  @property
  def defaults(self) -> task_types.Defaults:
    return self.spec.defaults

  def learning_process(self, process):
    """`process` fed as `round_input` requires (ids or tensors)."""
    computation = (self.dataset_computation if self.client_data is None else
                   self.client_data.dataset_computation)
    return tff.simulation.compose_dataset_computation_with_learning_process(
        computation, process)

  def round_input(self, client_ids, seed) -> list:
    """What `learning_process(...).next` takes for these clients.

    Args:
      client_ids: The round's clients.
      seed: Seeds the order of the clients' examples where the task holds
        its data as arrays (an int or a sequence of ints, for
        `np.random.default_rng`); TFF's loaders shuffle unseeded.
    """
    if self.client_data is not None:
      return self.client_data(client_ids, seed)
    return [str(i) for i in client_ids]

  def eval_arrays(self, split: str):
    """(x, y) of a split held as arrays (built once), or None."""
    if self.arrays is None:
      return None
    if split not in self._dense:
      self._dense[split] = self.arrays[split].all_dense()
    return self._dense[split]

  @property
  def train_client_ids(self):
    """The training clients' ids (a sequence; not a list when on demand)."""
    if self.client_ids is not None:
      return self.client_ids
    return list(self.baseline.datasets.train_data.client_ids)

  @property
  def population(self) -> int:
    return len(self.train_client_ids)

  @functools.cached_property
  def dataset_computation(self) -> tff.Computation:
    """TFF computation client id -> preprocessed dataset.

    Building datasets inside TFF's runtime from client ids avoids building a
    preprocessing graph per client in Python (2x faster rounds on SO-LR).
    """
    if self.dataset_key in _DATASET_COMPUTATIONS:
      return _DATASET_COMPUTATIONS[self.dataset_key]
    datasets = self.baseline.datasets
    data = datasets.train_data
    if datasets.train_preprocess_fn is not None:
      data = data.preprocess(datasets.train_preprocess_fn)
    computation = data.dataset_computation
    if self.dataset_key is not None:
      _DATASET_COMPUTATIONS[self.dataset_key] = computation
    return computation


# `Task.dataset_computation` by `Task.dataset_key`.
_DATASET_COMPUTATIONS = {}


def create_task(task_name: str,
                data_dir: str,
                *,
                batch_size: Optional[int] = None,
                seed: int = 0,
                embedded_config: Optional[dict] = None,
                population=None,
                model_only: bool = False) -> Task:
  """Builds `task_name` from `data_dir` (see each builder for the files).

  Args:
    task_name: A registered task (`task_registry.names()`).
    data_dir: The data directory.
    batch_size: The training batch size (default: the task's).
    seed: The task's data seed (where it has one).
    embedded_config: Overrides of the embedded SO-LR data's generator.
    population: Where `population_applies` (embedded SO-LR): None (the
      paper's 342,477 training clients, made on demand), 'stored' (the data
      files' clients) or an int >= 2 (that many, on demand).
    model_only: The task's model and training clients without its data
      (`TaskSpec.model_only`): enough to read stored records, nothing to
      train or evaluate with.

  Raises:
    ValueError: For an unknown task or a population that does not apply.
    MissingDataError: When a real dataset is required and missing.
  """
  spec = task_registry.get(task_name)
  if population is not None and not spec.population_applies:
    raise ValueError(
        f'population={population!r} applies to the embedded stackoverflow_lr '
        f'data only, not to {task_name}.')
  batch = batch_size or spec.defaults.batch_size
  build = spec.build
  if model_only:
    if spec.model_only is None:
      raise ValueError(f'model_only: the {task_name} task cannot say its '
                       'model without its data.')
    build = spec.model_only
  data = build(task_types.BuildSettings(
      data_dir=data_dir, batch_size=batch, seed=seed,
      embedded_config=embedded_config, population=population))
  return Task(spec, data.baseline, data.data_source, data.data_note,
              arrays=data.arrays, client_data=data.client_data,
              population_source=data.population_source,
              client_ids=data.client_ids,
              dataset_key=((task_name, batch, seed) if spec.shared_dataset
                           else None))
