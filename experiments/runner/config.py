"""`RunConfig`: one frozen configuration per run, built once from the flags.

`RunConfig(...)` checks every field (TypeError / ValueError naming the field
and the value); `resolved(task)` fills what the caller left as None from the
task's defaults (and delta = N^-1.1). The training loop reads only this.
"""

import dataclasses
import os
from typing import Any, Optional

from experiments.data import task_registry
from experiments.data import task_types
from experiments.runner import registry
from tff_dprec.accounting import accountings
from tff_dprec import sizes
from tff_dprec import validation
from tff_dprec.accounting import calibration

TASKS = task_registry.names()
DOWNLINKS = ('auto', 'history', 'full')
SERVER_OPTIMIZERS = ('adam', 'sgdm')
EVAL_SPLITS = ('test', 'validation')
# The rows of `python -m experiments.run` (the main job) by default.
DEFAULT_AGGREGATORS = ('dp_rec', 'dp_rec_no_noise', 'ddgauss16',
                       'ddgauss16_no_noise', 'dp_fedavg',
                       'dp_fedavg_no_noise', 'dp_fedavg_rdp', 'fedavg')
STORED = task_types.STORED
POPULATION_HELP = (
    "Embedded stackoverflow_lr only: the training clients. Default: the "
    "paper's 342,477, each made on demand from the embedded generator; "
    "'stored' = the clients written in --data_dir (4,000); or an int >= 2 "
    "(that many, made on demand).")


def parse_population(text):
  """A --population flag's text as RunConfig.population (None, 'stored', int).

  Raises:
    ValueError: naming the flag and the value, for anything else.
  """
  if text is None or text == STORED:
    return text
  try:
    value = int(text)
  except ValueError:
    value = None
  if value is None or value < 2:
    raise ValueError(f"--population must be 'stored' or an int >= 2, found "
                     f'{text!r}.')
  return value


def default_jobs(num_runs: int, workers: int = 0) -> int:
  """Processes for `num_runs` independent runs by default: one per core
  this process may use, at most one per run; one with TFF workers (each job
  would start its own). A count that `RunConfig` refuses (no runs, say)
  gives 1, and `RunConfig` says what is wrong.
  """
  if workers:
    return 1
  return max(1, min(available_cores(), num_runs))


def available_cores() -> int:
  """The cores this process may run on (its affinity where known)."""
  try:
    return len(os.sched_getaffinity(0)) or 1
  except AttributeError:  # Not Linux.
    return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """Everything a run depends on. None means "the task's default"."""
  task: str
  aggregators: tuple
  data_dir: str = 'data_cache'
  output_dir: str = 'output'
  rounds: Optional[int] = None
  clients_per_round: Optional[int] = None
  bits: Optional[int] = None
  grouping: Any = None
  noise_stddev: Optional[float] = None
  l2_clip: Optional[float] = None
  # DP-FedAvg only: this noise multiplier z instead of the one calibrated to
  # target_epsilon (its epsilon must still be within target_epsilon).
  noise_multiplier: Optional[float] = None
  # DP-REC only: this clip ratio c = l2_clip / noise_stddev instead of the
  # one calibrated to target_epsilon (its epsilon must be within it).
  clip_ratio: Optional[float] = None
  target_epsilon: float = 1.0
  delta: Optional[float] = None
  seed: int = 0
  # Seeds seed, seed + 1, ..., seed + num_seeds - 1, one run each.
  num_seeds: int = 1
  eval_every: Optional[int] = None
  eval_examples: Optional[int] = None  # None: the whole test set.
  client_lr: Optional[float] = None
  server_lr: Optional[float] = None
  server_optimizer: Optional[str] = None  # 'adam' or 'sgdm' (task default).
  server_momentum: Optional[float] = None  # sgdm only (task default).
  # Where every evaluation runs: 'test', or 'validation' (held-out clients)
  # for tuning (`experiments.studies.tune`).
  eval_split: str = 'test'
  progress: bool = True
  downlink: str = 'auto'
  verify_clients: int = 3
  resume: bool = True
  insecure_test_seed: Optional[int] = None
  workers: int = 0
  accounting: str = accountings.DEFAULT_ACCOUNTING
  embedded_config: Optional[dict] = None
  # Embedded SO-LR only: None (the paper's 342,477 training clients, made on
  # demand), 'stored' (the clients written in the data files, 4,000 by
  # default) or an int >= 2 (that many clients, made on demand).
  population: Any = None
  # Processes that train the (aggregator, seed) runs side by side
  # (`experiments.runner.jobs`); 1 = this process.
  jobs: int = 1
  # Set by `jobs` for one of its processes: the (aggregator, seed) pairs it
  # trains. Such a process writes no task-level outputs (summary, table,
  # plots); the parent writes them from the runs' records.
  job_runs: Optional[tuple] = None

  def __post_init__(self):
    self._check_aggregators()
    self._check_counts()
    self._check_numbers()
    self._check_choices()
    self._check_fixed_parameters()

  def _check_aggregators(self):
    """Aggregators known, listed once (normalised to a tuple)."""
    object.__setattr__(self, 'aggregators', tuple(self.aggregators))
    if not self.aggregators:
      raise ValueError('aggregators is empty; choose from '
                       f'{registry.names()}.')
    for name in self.aggregators:
      if name not in registry.names():
        raise ValueError(f'aggregators: unknown {name!r}; choose from '
                         f'{registry.names()}.')
    duplicates = sorted({a for a in self.aggregators
                         if self.aggregators.count(a) > 1})
    if duplicates:
      raise ValueError(f'aggregators lists {", ".join(duplicates)} more than '
                       f'once: {",".join(self.aggregators)}.')

  def _check_counts(self):
    """Integer fields, jobs against workers, and `job_runs`."""
    for name in ('rounds', 'clients_per_round', 'bits', 'eval_every'):
      _check_int(getattr(self, name), name, minimum=1, optional=True)
    _check_int(self.eval_examples, 'eval_examples', minimum=1, optional=True)
    _check_int(self.seed, 'seed', minimum=None)
    _check_int(self.num_seeds, 'num_seeds', minimum=1)
    _check_int(self.verify_clients,
               'verify_clients (--verify_replay_clients)', minimum=0)
    _check_int(self.workers, 'workers', minimum=0)
    _check_int(self.jobs, 'jobs', minimum=1)
    if self.jobs > 1 and self.workers:
      raise ValueError(
          f'jobs={self.jobs} with workers={self.workers}: each job would '
          'start its own workers; use one of them.')
    if self.job_runs is not None:
      # Seeds are not checked against `seeds`: a run's per-seed copies
      # (`dataclasses.replace(config, seed=s)`) keep the job's pairs.
      object.__setattr__(self, 'job_runs', tuple(
          (str(name), int(seed)) for name, seed in self.job_runs))
      unknown = [run for run in self.job_runs
                 if run[0] not in self.aggregators]
      if not self.job_runs or unknown:
        raise ValueError(
            f'job_runs must be a non-empty list of (aggregator, seed) pairs '
            f'of aggregators {self.aggregators}, found {self.job_runs!r}.')
    _check_int(self.insecure_test_seed, 'insecure_test_seed', minimum=None,
               optional=True)

  def _check_numbers(self):
    """Positive rates, clips and noises; delta and momentum in range."""
    for name in ('noise_stddev', 'l2_clip', 'noise_multiplier', 'clip_ratio',
                 'client_lr', 'server_lr'):
      _check_positive(getattr(self, name), name, optional=True)
    _check_positive(self.target_epsilon, 'target_epsilon')
    if self.delta is not None:
      validation.check_probability(self.delta, 'delta')
    if self.bits is not None:
      validation.check_int_in_range(self.bits, 'bits', 1, sizes.MAX_BITS)
    if self.server_optimizer not in (None,) + SERVER_OPTIMIZERS:
      raise ValueError(f'server_optimizer must be one of {SERVER_OPTIMIZERS}, '
                       f'found {self.server_optimizer!r}.')
    if self.server_momentum is not None:
      validation.check_number(self.server_momentum, 'server_momentum')
      if not 0 <= self.server_momentum < 1:
        raise ValueError('server_momentum must be in [0, 1), found '
                         f'{self.server_momentum!r}.')

  def _check_choices(self):
    """Fields with a fixed set of values, population and grouping."""
    if self.task not in TASKS:
      raise ValueError(f'task={self.task!r} is unknown; choose one of '
                       f'{TASKS}.')
    if self.eval_split not in EVAL_SPLITS:
      raise ValueError(f'eval_split must be one of {EVAL_SPLITS}, found '
                       f'{self.eval_split!r}.')
    if self.downlink not in DOWNLINKS:
      raise ValueError(f'downlink must be one of {DOWNLINKS}, found '
                       f'{self.downlink!r}.')
    if self.population is not None and self.population != STORED and (
        isinstance(self.population, bool) or
        not isinstance(self.population, int) or self.population < 2):
      raise ValueError(f"population must be None, {STORED!r} or an int >= 2, "
                       f'found {self.population!r}.')
    if self.population is not None and not task_registry.get(
        self.task).population_applies:
      raise ValueError(f'population={self.population!r} applies to the '
                       'embedded stackoverflow_lr data only, not to '
                       f'task={self.task!r}.')
    if self.accounting in accountings.RENAMED:  # Frozen: set once, here.
      object.__setattr__(self, 'accounting',
                         accountings.resolve(self.accounting))
    if self.accounting not in accountings.ACCOUNTINGS:
      raise ValueError('accounting must be one of '
                       f'{accountings.ACCOUNTINGS}, found '
                       f'{self.accounting!r}.')
    if isinstance(self.grouping, int) and not isinstance(
        self.grouping, bool) and self.grouping < 1:
      raise ValueError(f'grouping must be positive, found {self.grouping}.')
    if self.grouping is not None and not isinstance(self.grouping, int) and (
        self.grouping not in ('tensor', 'network')):
      raise ValueError("grouping must be 'tensor', 'network' or an int, "
                       f'found {self.grouping!r}.')

  def _check_fixed_parameters(self):
    """Fixed noise parameters: in range, for an aggregator that is run."""
    for name, (low, high) in _FIXED_PARAMETER_RANGES.items():
      value = getattr(self, name)
      if value is not None and not low <= value <= high:
        raise ValueError(f'{name} must be in [{low}, {high}] (the '
                         f'calibration range), found {value!r}.')
    for name, aggregator in (('noise_multiplier', 'dp_fedavg'),
                             ('clip_ratio', 'dp_rec')):
      users = {a for a in self.aggregators
               if registry.protocol(a) in (
                   aggregator, aggregator + registry.NO_NOISE_SUFFIX,
                   aggregator + registry.EXACT_SAMPLE_SUFFIX)}
      if getattr(self, name) is not None and not users:
        raise ValueError(
            f'{name}={getattr(self, name)!r} applies to {aggregator} only, '
            f'which is not in aggregators={",".join(self.aggregators)}.')
    if self.workers:
      refused = [a for a in self.aggregators
                 if registry.get(a).needs_test_context]
      if refused:
        raise ValueError(
            f'workers: DDGauss ({", ".join(refused)}) runs only in TFF\'s '
            'test execution context (its secure sum), not on workers; drop '
            'it from aggregators or use workers=0.')

  def resolved(self, task) -> 'RunConfig':
    """A copy with the task's defaults filled in.

    Raises:
      ValueError: If clients_per_round exceeds the task's population.
    """
    d = task.defaults
    config = dataclasses.replace(
        self,
        rounds=self.rounds or d.rounds,
        clients_per_round=self.clients_per_round or d.clients_per_round,
        bits=self.bits or d.bits,
        grouping=self.grouping if self.grouping is not None else d.grouping,
        noise_stddev=self.noise_stddev or d.noise_stddev,
        l2_clip=self.l2_clip or d.l2_clip,
        eval_every=self.eval_every or d.eval_every,
        client_lr=self.client_lr or d.client_lr,
        delta=(self.delta if self.delta is not None else
               accountings.default_delta(task.population)))
    if config.clients_per_round > task.population:
      raise ValueError(
          f'clients_per_round={config.clients_per_round} exceeds the '
          f'population of {task.population} training clients.')
    return config

  def server_lr_for(self, task, private: bool) -> float:
    """The explicit server_lr, else the task's (private) default."""
    d = task.defaults
    if self.server_lr:
      return self.server_lr
    if private and d.private_server_lr:
      return d.private_server_lr
    return d.server_lr

  @property
  def seeds(self) -> tuple:
    return tuple(range(self.seed, self.seed + self.num_seeds))

  def uses_history(self, name: str) -> bool:
    return self.downlink != 'full' and registry.get(name).supports_history

  def asdict(self) -> dict:
    return dataclasses.asdict(self)


# Fixed privacy parameters must lie where the calibrations search.
_FIXED_PARAMETER_RANGES = {
    'noise_multiplier': (calibration.MIN_NOISE_MULTIPLIER,
                         calibration.MAX_NOISE_MULTIPLIER),
    'clip_ratio': (calibration.MIN_CLIP_RATIO, calibration.MAX_CLIP_RATIO),
}


def _check_int(value, name, *, minimum, optional=False):
  """`tff_dprec.validation`'s int checks: any int, >= 0 or >= 1."""
  if value is None and optional:
    return
  {None: validation.check_int, 0: validation.check_nonnegative_int,
   1: validation.check_positive_int}[minimum](value, name)


def _check_positive(value, name, *, optional=False):
  if value is None and optional:
    return
  validation.check_positive_number(value, name)
