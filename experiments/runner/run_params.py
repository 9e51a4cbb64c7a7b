"""A started run continues at the parameters it started with.

Calibrated parameters (DP-REC's c, a noise multiplier) can differ in their
last bits between machines, whose FFTs round differently, and by a little
more between releases of the accountant. A run's
checkpoints and privacy ledger are tied to a fingerprint of its whole
configuration, calibrated parameters included, so a run interrupted on one
machine would be refused on another. Each run therefore keeps its
configuration beside its checkpoints (`RUN_CONFIG_FILE`, JSON, written
whole or not at all). On resume:

* the same configuration: nothing to do;
* the same but for parameters that agree to a relative
  `calibration_cache.CALIBRATION_RTOL`: the run is re-calibrated with its own
  values pinned (`calibration_cache.pinned`; each is checked against the
  target by this machine's accountant, so the privacy spent is this
  machine's honest account of the run's own parameters, and no check is
  relaxed) and continues with its checkpoints and ledger;
* the same but for parameters further apart: `CalibrationDriftError`, one
  line naming both values.

Anything else is left to the checkpoints and the ledger, which refuse a
foreign configuration as before.
"""

import json
import os
from typing import Optional

import numpy as np

from experiments.runner import calibration_cache
from experiments.runner import checkpoints
from experiments.runner import ledger
from experiments.runner import registry

RUN_CONFIG_FILE = 'run_config.json'


class CalibrationDriftError(checkpoints.CheckpointConfigMismatchError):
  """A started run's calibrated parameters differ beyond `CALIBRATION_RTOL`."""


def normalized(config: dict) -> dict:
  """`config` as JSON gives it back (the fingerprint's view of it)."""
  return json.loads(json.dumps(config, sort_keys=True, default=str))


def stored(run_dir: str) -> Optional[dict]:
  """The configuration a run in `run_dir` started with, or None."""
  path = os.path.join(run_dir, RUN_CONFIG_FILE)
  try:
    with open(path, encoding='utf-8') as f:
      value = json.load(f)
  except FileNotFoundError:
    return None
  except (OSError, ValueError):
    return None  # Unreadable: the checkpoints' own fingerprint decides.
  return value if isinstance(value, dict) else None


def write(run_dir: str, config: dict) -> None:
  """Records the configuration a run starts (or continues) with."""
  ledger.write_json_atomically(os.path.join(run_dir, RUN_CONFIG_FILE),
                               normalized(config))


def record(run_dir: str, config: dict, *, restart: bool = False) -> None:
  """Records `config` as the run's unless a started run in `run_dir` has
  another (which its ledger then refuses); `restart` (--noresume) always
  records it."""
  saved = stored(run_dir)
  if restart or saved is None or saved == normalized(config) or (
      not started(run_dir)):
    write(run_dir, config)


def started(run_dir: str) -> bool:
  """Whether a run in `run_dir` has a ledger or checkpoints."""
  folder = os.path.join(run_dir, 'checkpoints')
  return os.path.exists(os.path.join(run_dir, ledger.LEDGER_FILE)) or (
      os.path.isdir(folder) and any(os.scandir(folder)))


def params_to_pin(run_dir: str, config: dict) -> Optional[dict]:
  """The started run's own params where they differ from `config`'s only
  by at most `calibration_cache.CALIBRATION_RTOL`; None where there is
  nothing to pin.

  Raises:
    CalibrationDriftError: If the run in `run_dir` has started with
      parameters that differ from `config`'s beyond that, and
      nothing else differs.
  """
  saved, mine = stored(run_dir), normalized(config)
  if saved is None or saved == mine or not started(run_dir):
    return None
  old, new = saved.get('params'), mine.get('params')
  if (not isinstance(old, dict) or not isinstance(new, dict) or
      old.keys() != new.keys() or dict(saved, params=new) != mine):
    return None  # Another configuration: the ledger refuses it.
  far = [k for k in new
         if not calibration_cache.same_calibration(old[k], new[k])]
  if far:
    raise CalibrationDriftError(
        f'{run_dir} started with ' + ', '.join(
            f'{k}={old[k]!r}' for k in far) + '; this machine calibrates ' +
        ', '.join(f'{k}={new[k]!r}' for k in far) + ' (more than a '
        f'relative {calibration_cache.CALIBRATION_RTOL:g} apart): resume '
        'where it started, pass --noresume to start over (its ledger is '
        'kept), or use another --output_dir.')
  return old


def fingerprint_config(task, config, aggregator, server_lr,
                       use_history) -> dict:
  """What a checkpoint must match."""
  return dict(
      task=task.name, data_source=task.data_source,
      population=task.population, aggregator=aggregator.name,
      params=checkpoints.fingerprint_params(jsonable(aggregator.params)),
      rounds=config.rounds,
      clients_per_round=config.clients_per_round,
      target_epsilon=config.target_epsilon, delta=config.delta,
      seed=config.seed, eval_every=config.eval_every,
      eval_examples=config.eval_examples, client_lr=config.client_lr,
      server_optimizer=config.server_optimizer,
      server_momentum=config.server_momentum, eval_split=config.eval_split,
      server_lr=server_lr, history=use_history,
      verify_clients=config.verify_clients,
      insecure_test_seed=config.insecure_test_seed,
      # Clients made on demand came after the first checkpoints: named only
      # then (a stored and a made population of equal size differ).
      **({'population_source': task.population_source}
         if task.population_source != 'stored' else {}),
      # Poisson sampling came after the first checkpoints: only it is named,
      # so that the others' fingerprints (and their resumes) are unchanged,
      # and a DP-FedAvg run of the fixed-size sampler is refused.
      **({'sampling': aggregator.sampling}
         if aggregator.sampling == registry.POISSON else {}),
      # Named only when set (the default's fingerprints are unchanged): the
      # embedded data's generator settings are the data.
      **({'embedded_config': config.embedded_config}
         if config.embedded_config else {}))


def jsonable(params):
  """NumPy scalars as Python ones (JSON has no numpy types)."""
  return {k: v.item() if isinstance(v, np.generic) else v
          for k, v in params.items()}
