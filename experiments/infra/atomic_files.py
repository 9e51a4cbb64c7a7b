"""Files written whole or not at all: a temporary name, then a rename.

A report, a table or a record that a reader (or a resumed run) opens must
never be half written, even when the process is killed mid-write or two
processes write the same file. Everything is written at a temporary name
unique to this write, in the target's folder (so the rename stays on one file
system and is atomic), and renamed onto the target when complete. A failed
write removes its temporary file and leaves the previous target untouched.
A process killed mid-write leaves its temporary file behind; the next write
in that folder removes it (`remove_stale`).
"""

import contextlib
import csv
import json
import os
import re
import uuid
from typing import Iterator


@contextlib.contextmanager
def replacing_path(path: str, suffix: str = '.tmp') -> Iterator[str]:
  """Yields a temporary path; renames it onto `path` if the block succeeds.

  For writers that take a file name (`savefig`, `np.savez`). `suffix` is the
  temporary name's ending, for writers that choose a format by it.

  Args:
    path: The file to replace.
    suffix: How the temporary name ends.

  Yields:
    The temporary path to write.
  """
  folder = os.path.dirname(path) or '.'
  os.makedirs(folder, exist_ok=True)
  remove_stale(folder)
  # Not mkstemp: its files are private (0600), and a report should get the
  # permissions any other file written here gets.
  tmp = os.path.join(
      folder, f'{os.path.basename(path)}.{os.getpid()}.{uuid.uuid4().hex}'
      f'{suffix}')
  try:
    yield tmp
    os.replace(tmp, path)
  except OSError as e:
    if e.filename != tmp:
      raise
    # A full disk, say: name the file being replaced, which is intact.
    raise OSError(e.errno, e.strerror, path) from None
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


@contextlib.contextmanager
def replacing(path: str, mode: str = 'w', **open_kwargs):
  """Yields an open file whose contents replace `path` if the block succeeds.

  Args:
    path: The file to replace.
    mode: `'w'` or `'wb'`.
    **open_kwargs: Passed to `open` (`newline=''` for csv).

  Yields:
    The open temporary file.
  """
  if mode not in ('w', 'wb'):
    raise ValueError(f"mode must be 'w' or 'wb', found {mode!r}.")
  with replacing_path(path) as tmp:
    with open(tmp, mode, **open_kwargs) as f:
      yield f


def write_text(path: str, text: str) -> str:
  """Replaces `path` with `text`; returns `path`."""
  with replacing(path) as f:
    f.write(text)
  return path


def write_json(path: str, value, indent: int = 1) -> str:
  """Replaces `path` with `value` as JSON; returns `path`.

  The JSON is formed before the file is opened, so a value that cannot be
  serialised raises without touching `path`.
  """
  return write_text(path, json.dumps(value, indent=indent))


def write_csv(path: str, rows, leave_out=()) -> str:
  """Replaces `path` with a CSV of `rows` (dicts); returns `path`.

  The header is every key of the rows, in the order they first appear,
  but those in `leave_out`; a row without a key leaves its cell empty.
  """
  fields = list(dict.fromkeys(k for row in rows for k in row
                              if k not in leave_out))
  with replacing(path, newline='') as f:
    writer = csv.DictWriter(f, fieldnames=fields, extrasaction='ignore')
    writer.writeheader()
    writer.writerows(rows)
  return path


# The temporary names of the project's writers, each with its writer's pid:
# `replacing_path`, `ledger.write_json_atomically` and the output folder's
# write probe (`training`).
_TEMPORARY = re.compile(r'^(?:.+\.(?P<a>\d+)\.[0-9a-f]{32}(?:\.\w+)?|'
                        r'.+\.tmp(?P<b>\d+)|\.write_test(?P<c>\d+))$')


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def remove_stale(folder: str) -> list[str]:
  """Removes the temporary files in `folder` that killed writers left.

  A temporary file is stale when the process that named it is no longer
  running (a live writer's file, even another process's, is left alone).
  Returns the paths removed.
  """
  removed = []
  try:
    names = os.listdir(folder)
  except OSError:
    return removed
  for name in names:
    match = _TEMPORARY.match(name)
    if match is None:
      continue
    pid = int(next(g for g in match.groups() if g is not None))
    path = os.path.join(folder, name)
    if pid != os.getpid() and not _alive(pid) and os.path.isfile(path):
      try:
        os.remove(path)
        removed.append(path)
      except OSError:
        pass  # Another process removed it first.
  return removed
