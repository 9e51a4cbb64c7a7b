"""Reaps TFF's C++ `worker_binary` so that runs and test sessions end.

TFF 0.87 starts a `worker_binary` subprocess for its local C++ execution
context. It outlives the Python process and keeps the parent's stdout open, so
`python -m experiments.run | tee log` or `pytest -s` never finish. `install()`
makes every worker that TFF starts die with its parent (Linux parent-death
signal) and terminates the workers still running at interpreter exit;
`reap()` terminates them on demand (pytest_sessionfinish).
"""

import atexit
import ctypes
import gc
import os
import signal
import subprocess

_PR_SET_PDEATHSIG = 1
_installed = False
_workers: list[subprocess.Popen] = []


def _die_with_parent():
  try:
    libc = ctypes.CDLL('libc.so.6', use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
  except OSError:  # Not Linux: fall back to the atexit reaper.
    pass


class _Popen(subprocess.Popen):
  """`subprocess.Popen` that ties the child's life to this process."""

  def __init__(self, *args, **kwargs):
    kwargs.setdefault('preexec_fn', _die_with_parent)
    super().__init__(*args, **kwargs)
    _workers.append(self)


class _SubprocessShim:
  Popen = _Popen

  def __getattr__(self, name):
    return getattr(subprocess, name)


def start_worker(args) -> subprocess.Popen:
  """Starts a worker that dies with this process and is reaped at exit."""
  install()
  return _Popen(args)


def _no_op_del(self):
  del self


def install() -> None:
  """Patches TFF's worker launcher; idempotent."""
  global _installed
  if _installed:
    return
  from tensorflow_federated.python.core.impl.executor_stacks import executor_factory  # pylint: disable=g-import-not-at-top
  executor_factory.subprocess = _SubprocessShim()
  atexit.register(reap)
  _installed = True


def reap() -> None:
  """Terminates the worker processes started by this process."""
  # TFF's ServiceManager kills its worker in __del__, which fails noisily at
  # interpreter shutdown (module globals are gone); the workers are reaped
  # here instead.
  for obj in gc.get_objects():
    if type(obj).__name__ == 'ServiceManager' and hasattr(obj, '_process'):
      type(obj).__del__ = _no_op_del
  while _workers:
    process = _workers.pop()
    if process.poll() is None:
      try:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
      except (OSError, subprocess.TimeoutExpired):
        pass
