"""Checkpoint and resume for the training loop.

Each aggregator's run keeps, under `<output_dir>/<task>/<aggregator>/`:
* `checkpoints/`: versions of a `tff.program.FileProgramStateManager` (one per
  completed round; TFF's naming and retention, each version one NumPy .npz
  instead of a SavedModel: 5 ms instead of 0.2 s a round on SO-LR), holding the
  learning process state's leaves and the driver's state (round, sampling RNG,
  totals, curve, privacy ledger, history downlink) as JSON, with a SHA-256 over
  both and a fingerprint of the run's configuration. A version that fails to
  load or to verify is reported, renamed to `*.corrupt`, and the previous one is
  used.
* `privacy_ledger.json` (`experiments.runner.ledger`): written before each round
  runs; checkpoints carry a copy of its total.
* `record.json`: the finished run's record, so a resumed multi-aggregator run
  skips the aggregators already done.

`--noresume` removes the run's checkpoints and record and archives its ledger;
folders set aside (`*.corrupt*`, `*.foreign*`) are kept, since they may hold
another configuration's work: delete them by hand.
"""

import asyncio
import base64
import hashlib
import json
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.runner import calibration_cache
from experiments.runner import ledger
from tff_dprec.accounting import accountings

_PREFIX = 'round_'


class CheckpointConfigMismatchError(ValueError):
  """The checkpoints in a directory belong to a differently configured run."""


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


class NpzProgramStateManager(tff.program.FileProgramStateManager):
  """`FileProgramStateManager` that stores each version as one `.npz`.

  For program states that are flat dicts of arrays and strings, or of lists
  of arrays (what `RunCheckpointer` saves). A version is written to a
  `.partial` folder, flushed and renamed, so a crash never leaves a version
  that `get_versions` lists half written.
  """

  async def save(self, program_state, version: int) -> None:
    path = self._get_path_for_version(version)
    if os.path.exists(path):
      raise tff.program.ProgramStateExistsError(version=version,
                                                path=self._root_dir)
    arrays = {}
    for key, value in program_state.items():
      if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
          arrays[f'{key}/{i:06d}'] = np.asarray(item)
      else:
        arrays[key] = np.asarray(value)
    # A fresh name even if a killed process left a partial folder behind.
    partial = tempfile.mkdtemp(dir=self._root_dir,
                               prefix=f'{os.path.basename(path)}.partial')
    file_path = os.path.join(partial, _STATE_FILE)
    try:
      with open(file_path, 'wb') as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    except OSError as e:  # A full disk: the older versions stay intact.
      shutil.rmtree(partial, ignore_errors=True)
      raise OSError(e.errno, e.strerror, path) from None
    os.rename(partial, path)
    await self._remove_old_program_state()

  async def load(self, version: int, structure):
    path = os.path.join(self._get_path_for_version(version), _STATE_FILE)
    if not os.path.exists(path):
      raise tff.program.ProgramStateNotFoundError(version)
    with np.load(path, allow_pickle=False) as f:
      stored = {key: f[key] for key in f.files}
    state = {}
    for key, like in structure.items():
      if isinstance(like, (list, tuple)):
        items = sorted(k for k in stored if k.startswith(f'{key}/'))
        state[key] = [stored[k] for k in items]
      else:
        value = stored[key]
        state[key] = value.item() if value.dtype.kind == 'U' else value
    return state


_STATE_FILE = 'state.npz'
# A finished run's record (`RunCheckpointer.write_record`), in its folder.
RECORD_FILE = 'record.json'
# How closely a finished run's parameters must agree with a run's for its
# record to be read with them pinned (`RunCheckpointer.recalibration_params`)
# or for a started run to continue at its own (`experiments.runner.run_params`).
PARAMS_RTOL = calibration_cache.CALIBRATION_RTOL


def _fingerprint(config: dict) -> str:
  return hashlib.sha256(
      json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


_close = calibration_cache.same_calibration
# A run's params name its accounting as the records were written: the
# default's earlier name ('pld', now 'min_pld_rdp') is kept in fingerprints,
# so that runs recorded before the rename resume and are reused.
_FINGERPRINT_NAMES = {new: old for old, new in accountings.RENAMED.items()}


def fingerprint_params(params: dict) -> dict:
  """`params` with the accounting under the name fingerprints use."""
  if params.get('accounting') in _FINGERPRINT_NAMES:
    params = dict(params,
                  accounting=_FINGERPRINT_NAMES[params['accounting']])
  return params


class RunCheckpointer:
  """Saves and restores one aggregator's training run."""

  def __init__(self, run_dir: str, config: dict, *, keep: int = 3,
               print_fn: Callable[..., None] = print):
    self._run_dir = run_dir
    self._dir = os.path.join(run_dir, 'checkpoints')
    os.makedirs(self._dir, exist_ok=True)
    self._manager = NpzProgramStateManager(
        self._dir, prefix=_PREFIX, keep_total=keep, keep_first=False)
    self._config = config
    self._fingerprint = _fingerprint(config)
    self._record_path = os.path.join(run_dir, RECORD_FILE)
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
    self._remove_partial_versions()
    template_leaves = tf.nest.flatten(template_state)
    structure = dict(leaves=[np.asarray(x) for x in template_leaves],
                     driver='', fingerprint='', digest='')
    foreign = []
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
        foreign.append(self._set_aside(version, 'foreign'))
        continue
      if foreign:
        break
      state = tf.nest.pack_sequence_as(template_state, leaves)
      return version, state, decode(json.loads(driver_json))
    if foreign:
      raise CheckpointConfigMismatchError(
          f'{", ".join(foreign)} came from a run with another configuration '
          'and were set aside; resume with that run\'s flags (rename them '
          'back), or rerun to continue from the remaining checkpoints of '
          'this configuration, or use another --output_dir.')
    return None

  def _remove_partial_versions(self) -> None:
    """Removes versions a killed save left half written (never listed as
    versions: `NpzProgramStateManager.save`); only the run's own process
    loads, so none is being written."""
    for name in os.listdir(self._dir):
      if name.startswith(_PREFIX) and '.partial' in name:
        shutil.rmtree(os.path.join(self._dir, name), ignore_errors=True)

  def _set_aside(self, version: int, kind: str) -> str:
    path = os.path.join(self._dir, f'{_PREFIX}{version}')
    target = f'{path}.{kind}{time.time_ns()}'
    if os.path.exists(path):
      os.rename(path, target)
    return target

  def _quarantine(self, version: int, error: Exception) -> None:
    path = os.path.join(self._dir, f'{_PREFIX}{version}')
    target = f'{path}.corrupt{time.time_ns()}'
    self._print(f'warning: checkpoint {path} is corrupt or partial '
                f'({type(error).__name__}: {error}); moved to {target}, '
                'using the previous one.')
    if os.path.exists(path):
      os.rename(path, target)

  def remove_all(self) -> None:
    """Removes the checkpoints and the record (the ledger is not theirs)."""
    asyncio.run(self._manager.remove_all())
    if os.path.exists(self._record_path):
      os.remove(self._record_path)

  def has_checkpoints(self) -> bool:
    """Whether any checkpoint, valid or set aside, exists."""
    return any(name.startswith(_PREFIX) for name in os.listdir(self._dir))

  def read_record(self) -> Optional[dict]:
    """The finished run's record file, if it is this configuration's."""
    saved = self._saved_record()
    if saved is not None and saved.get('fingerprint') == self._fingerprint:
      return saved
    return None

  def recalibration_params(self) -> Optional[dict]:
    """The finished run's params, if only their calibration differs.

    Calibrated parameters (a noise multiplier, DP-REC's c) can differ in
    their last bits between machines, whose FFTs round differently, or a
    little more between releases of the accountant. The record matches this
    configuration once its own params replace this run's, and every param
    agrees to a relative `PARAMS_RTOL`. The caller rebuilds the aggregator
    with these values pinned (`calibration_cache.pinned`, which checks each
    against the target with this accountant) and reads the record with the
    rebuilt configuration: a value a user set, or one over the target, is
    never pinned, so its record is never reused.

    Returns:
      The stored record's params, or None.
    """
    saved = self._saved_record()
    if saved is None or saved.get('fingerprint') == self._fingerprint:
      return None
    stored = (saved.get('record') or {}).get('params')
    mine = self._config.get('params')
    if not isinstance(stored, dict) or not isinstance(mine, dict):
      return None
    if stored.keys() != mine.keys() or not all(
        _close(stored[key], mine[key]) for key in mine):
      return None
    if saved.get('fingerprint') != _fingerprint(
        dict(self._config, params=fingerprint_params(stored))):
      return None
    return stored

  def _saved_record(self) -> Optional[dict]:
    if not os.path.exists(self._record_path):
      return None
    with open(self._record_path) as f:
      return json.load(f)

  def write_record(self, record: dict, curve) -> None:
    ledger.write_json_atomically(self._record_path, dict(
        record=record, curve=curve, fingerprint=self._fingerprint))
