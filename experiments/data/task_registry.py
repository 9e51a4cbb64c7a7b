"""The tasks the experiments train, by name: a registry of `TaskSpec`s.

Each spec holds what is particular to a task as data: its defaults (the
DP-REC paper's Appendix C, scaled where needed: docs/EXPERIMENTS.md,
"Task defaults"), its metric, its builder (which finds or makes its data and
returns a `task_types.TaskData`), and its capabilities (the summed loss of TFF's
SO-LR model, the frequent-tags baseline, an on-demand population, a dataset
computation shared across tasks). Code elsewhere asks the spec, never the
name. No TensorFlow here: `experiments.runner.config` reads the specs
without loading the data modules; builders load theirs when called. The
types are in `task_types`.
"""

from experiments.data import task_types

_REGISTRY: dict = {}


def register(spec: task_types.TaskSpec) -> task_types.TaskSpec:
  if spec.name in _REGISTRY:
    raise ValueError(f'Task {spec.name!r} is already registered.')
  _REGISTRY[spec.name] = spec
  return spec


def names() -> tuple:
  return tuple(_REGISTRY)


def get(name: str) -> task_types.TaskSpec:
  """The spec of task `name`; ValueError naming the choices otherwise."""
  if name not in _REGISTRY:
    raise ValueError(f'Unknown task {name!r}; choose one of {names()}.')
  return _REGISTRY[name]


def _stackoverflow_lr(settings):
  from experiments.data import stackoverflow_task  # pylint: disable=g-import-not-at-top
  return stackoverflow_task.build(settings)


def _emnist(settings):
  from experiments.data import tff_baseline_tasks  # pylint: disable=g-import-not-at-top
  return tff_baseline_tasks.build_emnist(settings)


def _shakespeare(settings):
  from experiments.data import tff_baseline_tasks  # pylint: disable=g-import-not-at-top
  return tff_baseline_tasks.build_shakespeare(settings)


def _mnist(settings):
  from experiments.data import image_tasks  # pylint: disable=g-import-not-at-top
  return image_tasks.build_mnist(settings)


def _fashion_mnist(settings):
  from experiments.data import image_tasks  # pylint: disable=g-import-not-at-top
  return image_tasks.build_fashion_mnist(settings)


def _paper_model_only(settings):
  from experiments.data import image_tasks  # pylint: disable=g-import-not-at-top
  return image_tasks.build_paper_model_only(settings)


def _digits(settings):
  from experiments.data import image_tasks  # pylint: disable=g-import-not-at-top
  return image_tasks.build_digits(settings)


for _spec in (
    # The paper's SO-LR scaled for the embedded data (1/10 of each
    # vocabulary: 1000 words x 50 tags, 1% of the paper's parameters; the
    # paper's 342,477 training clients, made on demand) and a main job of
    # 50 rounds of 40 clients. The reproduction ran it before the main job
    # moved to the paper's population: the 4,000 stored clients, 10 rounds
    # of 40, one group of 4 bits, clip and prior 0.5, server SGD 1.0.
    task_types.TaskSpec('stackoverflow_lr', task_types.Defaults(
        rounds=50, clients_per_round=40, client_lr=1.0, server_lr=0.03,
        server_momentum=0.9, batch_size=100, bits=None, grouping='network',
        noise_stddev=0.006, l2_clip=0.2, server_optimizer='adam',
        eval_every=10, private_server_lr=10.0,
        private_server_optimizer='sgdm'),
             'recall_at_5', 'recall@5', _stackoverflow_lr,
             loss_summed_over_batch=True, frequent_tags=True,
             population_applies=True,
             reproduction=dict(population='stored', rounds=10, eval_every=2,
                               bits=4, noise_stddev=0.5, l2_clip=0.5,
                               server_lr=1.0)),
    task_types.TaskSpec('emnist', task_types.Defaults(
        rounds=1500, clients_per_round=100, client_lr=0.05, server_lr=1.0,
        server_momentum=0.0, batch_size=20, bits=7, grouping='tensor',
        noise_stddev=0.03, l2_clip=0.1, eval_every=50),
             'accuracy', 'accuracy', _emnist),
    task_types.TaskSpec('shakespeare', task_types.Defaults(
        rounds=200, clients_per_round=66, client_lr=1.0, server_lr=1.0,
        server_momentum=0.0, batch_size=10, bits=7, grouping='tensor',
        noise_stddev=0.1, l2_clip=0.3, eval_every=20),
             'accuracy', 'accuracy', _shakespeare),
    task_types.TaskSpec('mnist', task_types.Defaults(
        rounds=1000, clients_per_round=10, client_lr=0.01, server_lr=2e-3,
        server_momentum=0.0, batch_size=20, bits=7, grouping='tensor',
        noise_stddev=0.005, l2_clip=0.01, server_optimizer='adam',
        eval_every=50),
             'accuracy', 'accuracy', _mnist, model_only=_paper_model_only),
    # The paper's MNIST hyperparameters on real Fashion-MNIST; DP-REC's
    # bits from c.
    task_types.TaskSpec('fashion_mnist', task_types.Defaults(
        rounds=1000, clients_per_round=10, client_lr=0.01, server_lr=2e-3,
        server_momentum=0.0, batch_size=20, bits=None, grouping='tensor',
        noise_stddev=0.005, l2_clip=0.01, server_optimizer='adam',
        eval_every=50),
             'accuracy', 'accuracy', _fashion_mnist,
             model_only=_paper_model_only),
    # A small real-data task that always runs: scikit-learn's 8x8 digits.
    task_types.TaskSpec('digits', task_types.Defaults(
        rounds=60, clients_per_round=10, client_lr=0.2, server_lr=1.0,
        server_momentum=0.0, batch_size=20, bits=7, grouping='tensor',
        noise_stddev=0.1, l2_clip=0.5, eval_every=10),
             'accuracy', 'accuracy', _digits, shared_dataset=True),
):
  register(_spec)
