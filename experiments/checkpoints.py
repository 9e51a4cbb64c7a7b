"""Checkpoint and resume for the training loop, with a privacy ledger.

Each aggregator's run keeps, under `<output_dir>/<task>/<aggregator>/`:
* `checkpoints/`: TFF's `tff.program.FileProgramStateManager` versions (one per
  completed round), each holding the learning process state's leaves and the
  driver's state (round, sampling RNG, totals, curve, privacy ledger, history
  downlink) as JSON, with a SHA-256 over both and a fingerprint of the run's
  configuration. A version that fails to load or to verify is reported,
  renamed to `*.corrupt`, and the previous one is used.
* `privacy_ledger.json`: written (atomically, fsynced) before each round runs,
  so a round whose messages may have been produced is never forgotten: on
  resume, rounds started after the newest checkpoint count as spent.
* `record.json`: the finished run's record, so a resumed multi-aggregator run
  skips the aggregators already done.
"""

import asyncio
import base64
import hashlib
import json
import os
import time
from typing import Any, Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

_PREFIX = 'round_'


class CheckpointConfigMismatchError(ValueError):
  """The checkpoints in a directory belong to a differently configured run."""


class PrivacyLedgerError(ValueError):
  """The privacy ledger is missing, unreadable, or behind the checkpoints.

  The ledger is the record of privacy spent in a run directory: it is never
  reset or guessed, so every such case stops the run.
  """


def encode(value) -> Any:
  """Makes nested dicts/lists/NumPy values JSON-serializable, exactly."""
  if isinstance(value, dict):
    return {'__dict__': [[encode(k), encode(v)] for k, v in value.items()]}
  if isinstance(value, (list, tuple)):
    return [encode(v) for v in value]
  if isinstance(value, np.ndarray) or isinstance(value, np.generic):
    array = np.asarray(value)
    return {'__nd__': base64.b64encode(array.tobytes()).decode('ascii'),
            'dtype': array.dtype.str, 'shape': list(array.shape)}
  return value


def decode(value) -> Any:
  """The inverse of `encode`."""
  if isinstance(value, dict):
    if '__nd__' in value:
      array = np.frombuffer(base64.b64decode(value['__nd__']),
                            dtype=np.dtype(value['dtype']))
      return array.reshape(value['shape']).copy()
    return {decode(k): decode(v) for k, v in value['__dict__']}
  if isinstance(value, list):
    return [decode(v) for v in value]
  return value


def _digest(leaves, driver_json: str) -> str:
  h = hashlib.sha256()
  for leaf in leaves:
    array = np.asarray(leaf)
    h.update(array.dtype.str.encode())
    h.update(str(array.shape).encode())
    h.update(array.tobytes())
  h.update(driver_json.encode())
  return h.hexdigest()


def _text(value) -> str:
  # SavedModel gives string tensors back as bytes.
  return value.decode() if isinstance(value, bytes) else value


def _write_json_atomically(path: str, value) -> None:
  tmp = f'{path}.tmp{os.getpid()}'
  with open(tmp, 'w') as f:
    json.dump(value, f)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
  dir_fd = os.open(os.path.dirname(path) or '.', os.O_RDONLY)
  try:
    os.fsync(dir_fd)
  finally:
    os.close(dir_fd)


class RunCheckpointer:
  """Saves and restores one aggregator's training run."""

  def __init__(self, run_dir: str, config: dict, *, keep: int = 3,
               print_fn: Callable[..., None] = print):
    self._run_dir = run_dir
    self._dir = os.path.join(run_dir, 'checkpoints')
    os.makedirs(self._dir, exist_ok=True)
    self._manager = tff.program.FileProgramStateManager(
        self._dir, prefix=_PREFIX, keep_total=keep, keep_first=False)
    self._fingerprint = hashlib.sha256(
        json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
    self._ledger_path = os.path.join(run_dir, 'privacy_ledger.json')
    self._record_path = os.path.join(run_dir, 'record.json')
    self._print = print_fn

  @property
  def fingerprint(self) -> str:
    return self._fingerprint

  def _versions(self) -> list[int]:
    return asyncio.run(self._manager.get_versions()) or []

  def save(self, round_num: int, process_state, driver: dict) -> None:
    """Saves the state after `round_num` completed rounds."""
    leaves = [np.asarray(x) for x in tf.nest.flatten(process_state)]
    driver_json = json.dumps(encode(driver))
    program_state = dict(
        leaves=leaves, driver=driver_json, fingerprint=self._fingerprint,
        digest=_digest(leaves, driver_json))
    asyncio.run(self._manager.save(program_state, round_num))

  def load_latest(self, template_state) -> Optional[tuple[int, Any, dict]]:
    """Returns (round, process state, driver) of the newest valid checkpoint.

    Raises:
      CheckpointConfigMismatchError: If the newest valid checkpoint was made
        by a run with another configuration.
    """
    template_leaves = tf.nest.flatten(template_state)
    structure = dict(leaves=[np.asarray(x) for x in template_leaves],
                     driver='', fingerprint='', digest='')
    for version in sorted(self._versions(), reverse=True):
      try:
        loaded = asyncio.run(self._manager.load(version, structure))
        leaves = [np.asarray(x) for x in loaded['leaves']]
        driver_json, fingerprint, digest = (
            _text(loaded[key]) for key in ('driver', 'fingerprint', 'digest'))
        if digest != _digest(leaves, driver_json):
          raise ValueError('checksum mismatch')
        if len(leaves) != len(template_leaves):
          raise ValueError(f'{len(leaves)} state tensors, expected '
                           f'{len(template_leaves)}')
        for leaf, like in zip(leaves, template_leaves):
          like = np.asarray(like)
          if leaf.shape != like.shape or leaf.dtype != like.dtype:
            raise ValueError(f'tensor {leaf.dtype}{list(leaf.shape)} does '
                             f'not match {like.dtype}{list(like.shape)}')
      except Exception as e:  # pylint: disable=broad-except
        self._quarantine(version, e)
        continue
      if fingerprint != self._fingerprint:
        raise CheckpointConfigMismatchError(
            f'The checkpoints in {self._dir} come from a run with another '
            'configuration; resume with the same flags, pass --noresume to '
            'start over (removes them), or use another --output_dir.')
      state = tf.nest.pack_sequence_as(template_state, leaves)
      return version, state, decode(json.loads(driver_json))
    return None

  def _quarantine(self, version: int, error: Exception) -> None:
    path = os.path.join(self._dir, f'{_PREFIX}{version}')
    target = f'{path}.corrupt{int(time.time())}'
    self._print(f'warning: checkpoint {path} is corrupt or partial '
                f'({type(error).__name__}: {error}); moved to {target}, '
                'using the previous one.')
    if os.path.exists(path):
      os.rename(path, target)

  def remove_all(self) -> None:
    """Removes checkpoints and record; archives (never deletes) the ledger."""
    asyncio.run(self._manager.remove_all())
    if os.path.exists(self._record_path):
      os.remove(self._record_path)
    if os.path.exists(self._ledger_path):
      target = os.path.join(
          self._run_dir, f'privacy_ledger.archived-{time.time_ns()}.json')
      os.rename(self._ledger_path, target)
      self._print(f'note: the previous privacy ledger is kept as {target}: '
                  'privacy spent on this data by earlier runs still counts.')

  def has_checkpoints(self) -> bool:
    """Whether any checkpoint, valid or set aside, exists."""
    return any(name.startswith(_PREFIX) for name in os.listdir(self._dir))

  def read_ledger(self) -> Optional[dict]:
    """The privacy ledger (rounds started, lost rounds), or None if absent.

    Raises:
      PrivacyLedgerError: If it cannot be read or has the wrong shape.
      CheckpointConfigMismatchError: If it belongs to another configuration.
    """
    if not os.path.exists(self._ledger_path):
      return None
    advice = ('It records privacy already spent and is never reset: restore '
              'it, or use another --output_dir.')
    try:
      with open(self._ledger_path, encoding='utf-8') as f:
        text = f.read()
      ledger = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
      raise PrivacyLedgerError(
          f'The privacy ledger {self._ledger_path} cannot be read '
          f'({type(e).__name__}: {e}). {advice}') from None
    if not (isinstance(ledger, dict) and all(
        isinstance(ledger.get(k), int) and not isinstance(ledger.get(k), bool)
        and ledger[k] >= 0 for k in ('started', 'lost'))):
      raise PrivacyLedgerError(
          f'The privacy ledger {self._ledger_path} is malformed (expected '
          f'non-negative integers "started" and "lost", found '
          f'{text[:120]!r}). {advice}')
    if ledger.get('fingerprint') != self._fingerprint:
      raise CheckpointConfigMismatchError(
          f'{self._ledger_path} belongs to a run with another configuration; '
          'pass --noresume to start over (the old ledger is archived, not '
          'deleted) or use another --output_dir.')
    return ledger

  def write_ledger(self, *, started: int, lost: int) -> None:
    """Records, durably, that `started` rounds may have produced messages."""
    _write_json_atomically(self._ledger_path, dict(
        started=started, lost=lost, fingerprint=self._fingerprint))

  def read_record(self) -> Optional[dict]:
    if not os.path.exists(self._record_path):
      return None
    with open(self._record_path) as f:
      saved = json.load(f)
    if saved.get('fingerprint') != self._fingerprint:
      return None
    return saved

  def write_record(self, record: dict, curve) -> None:
    _write_json_atomically(self._record_path, dict(
        record=record, curve=curve, fingerprint=self._fingerprint))
