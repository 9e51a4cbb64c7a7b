"""The privacy ledger: the durable record of privacy spent in a run folder.

`<output_dir>/<task>/<aggregator>/privacy_ledger.json` is written (atomically,
fsynced) before each round runs, so a round whose messages may exist is
never forgotten. It only grows: it is never reset, guessed or deleted. A
resume reconciles it with the newest checkpoint (which carries a copy of the
ledger's total) and refuses, with a `PrivacyLedgerError`, when either one
shows the other was lost or edited. `--noresume` archives it.

The ledger covers privacy spent in this folder, on this data, by runs of this
configuration.
"""

import dataclasses
import json
import os
import time
from typing import Callable, Optional

from experiments.infra import atomic_files

LEDGER_FILE = 'privacy_ledger.json'


class PrivacyLedgerError(ValueError):
  """The ledger is missing, unreadable, or behind the checkpoints."""


class LedgerConfigMismatchError(ValueError):
  """The ledger belongs to a run with another configuration."""


@dataclasses.dataclass(frozen=True)
class LedgerEntry:
  """What the ledger says: rounds started (the last one may not have ended),
  rounds lost in earlier crashes, and the bits those rounds sent."""
  started: int = 0
  lost: int = 0
  upload_bits: int = 0
  download_bits: int = 0

  @property
  def spent(self) -> int:
    """Rounds that may have released messages."""
    return self.started + self.lost


@dataclasses.dataclass(frozen=True)
class Reconciled:
  """A resume's view: rounds and traffic spent beyond the checkpoint."""
  unrecorded_rounds: int = 0
  unrecorded_upload_bits: int = 0
  unrecorded_download_bits: int = 0


class PrivacyLedger:
  """Reads, writes, archives and reconciles one run folder's ledger."""

  def __init__(self, run_dir: str, fingerprint: str, *,
               print_fn: Callable[..., None] = print):
    self._run_dir = run_dir
    self._path = os.path.join(run_dir, LEDGER_FILE)
    self._fingerprint = fingerprint
    self._print = print_fn

  @property
  def path(self) -> str:
    return self._path

  def read(self) -> Optional[LedgerEntry]:
    """The ledger, or None when there is none.

    Raises:
      PrivacyLedgerError: If it cannot be read or has the wrong shape.
      LedgerConfigMismatchError: If it belongs to another configuration.
    """
    if not os.path.exists(self._path):
      return None
    advice = ('It records privacy already spent and is never reset: restore '
              'it, or use another --output_dir.')
    try:
      with open(self._path, encoding='utf-8') as f:
        text = f.read()
      data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
      raise PrivacyLedgerError(
          f'The privacy ledger {self._path} cannot be read '
          f'({type(e).__name__}: {e}). {advice}') from None
    fields = [f.name for f in dataclasses.fields(LedgerEntry)]
    if not (isinstance(data, dict) and all(
        _is_count(data[k]) for k in fields if k in data) and
            'started' in data and 'lost' in data):
      raise PrivacyLedgerError(
          f'The privacy ledger {self._path} is malformed (expected '
          f'non-negative integers "started" and "lost", found '
          f'{text[:120]!r}). {advice}')
    if data.get('fingerprint') != self._fingerprint:
      raise LedgerConfigMismatchError(
          f'{self._path} belongs to a run with another configuration; pass '
          '--noresume to start over (the old ledger is archived, not '
          'deleted) or use another --output_dir.')
    return LedgerEntry(**{k: data[k] for k in fields if k in data})

  def record_start(self, entry: LedgerEntry) -> None:
    """Durably records `entry` before the round it counts can release."""
    write_json_atomically(self._path, dict(
        dataclasses.asdict(entry), fingerprint=self._fingerprint))

  def archive(self) -> Optional[str]:
    """Moves the ledger aside (never deletes it); returns the new path."""
    if not os.path.exists(self._path):
      return None
    target = os.path.join(
        self._run_dir, f'privacy_ledger.archived-{time.time_ns()}.json')
    os.rename(self._path, target)
    self._print(f'note: the previous privacy ledger is kept as {target}: '
                'privacy spent on this data by earlier runs still counts.')
    return target

  def reconcile(self, entry: Optional[LedgerEntry], *,
                checkpoint_round: Optional[int], checkpoint_lost: int,
                checkpoint_upload_bits: int, checkpoint_download_bits: int,
                any_checkpoints: bool) -> Reconciled:
    """Checks the ledger against the newest checkpoint.

    Args:
      entry: The ledger as read (None: no ledger file).
      checkpoint_round: The newest valid checkpoint's round, or None.
      checkpoint_lost: Lost rounds recorded in that checkpoint.
      checkpoint_upload_bits: Its upload total.
      checkpoint_download_bits: Its download total.
      any_checkpoints: Whether any checkpoint exists, valid or set aside.

    Returns:
      What the ledger records beyond the checkpoint: rounds that started and
      were lost, and their traffic.

    Raises:
      PrivacyLedgerError: If the ledger is missing while checkpoints exist,
        or records fewer rounds than the checkpoint proves.
    """
    if checkpoint_round is None:
      if entry is None and any_checkpoints:
        raise PrivacyLedgerError(
            f'{self._run_dir} has checkpoints but no usable one and no '
            f'privacy ledger ({LEDGER_FILE}): the privacy already spent '
            'there is unknown. Restore the ledger, or use another '
            '--output_dir.')
      entry = entry or LedgerEntry()
      return Reconciled(entry.spent, entry.upload_bits, entry.download_bits)
    spent = checkpoint_round + checkpoint_lost
    if entry is None:
      raise PrivacyLedgerError(
          f'{self._path} is missing, but the checkpoint of round '
          f'{checkpoint_round} shows at least {spent} round(s) of privacy '
          'spent; rounds started after it are unknown. Restore the ledger, '
          'or use another --output_dir (--noresume would archive the '
          'checkpoints, not recover what was spent).')
    if entry.spent < spent:
      raise PrivacyLedgerError(
          f'{self._path} records {entry.started} started and {entry.lost} '
          f'lost round(s), fewer than the {spent} the checkpoint of round '
          f'{checkpoint_round} proves: the ledger is stale or was edited. '
          'Restore it, or use another --output_dir.')
    return Reconciled(
        entry.spent - spent,
        max(0, entry.upload_bits - checkpoint_upload_bits),
        max(0, entry.download_bits - checkpoint_download_bits))


def _is_count(value) -> bool:
  return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def write_json_atomically(path: str, value) -> None:
  """Writes JSON to `path` atomically and durably (fsync of file and dir)."""
  atomic_files.remove_stale(os.path.dirname(path) or '.')
  tmp = f"{path}.tmp{os.getpid()}"
  try:
    with open(tmp, 'w') as f:
      json.dump(value, f)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except OSError as e:  # A full disk, say: `path` is intact.
    if os.path.exists(tmp):
      os.remove(tmp)
    raise OSError(e.errno, e.strerror, path) from None
  directory = os.open(os.path.dirname(path) or '.', os.O_RDONLY)
  try:
    os.fsync(directory)
  finally:
    os.close(directory)
