"""Reaps TFF's C++ `worker_binary` so that runs, kernels and tests end.

TFF 0.87 starts a `worker_binary` subprocess for its local C++ execution
context. It outlives the Python process and keeps the parent's stdout open: a
script piped to `tee` or `pytest -s` never finishes, and a notebook's kernel
leaves it running. `install()` makes every worker that TFF starts die with
its parent (Linux parent-death signal) and terminates the workers still
running at interpreter exit; `reap()` terminates them on demand
(pytest_sessionfinish). It also makes TFF notice a started worker promptly
(`_start_promptly`).

Call `install()` once, before the first TFF computation runs:

  from tff_dprec import worker_reaper
  worker_reaper.install()

The library's one piece of process-wide state: the workers belong to the
process, so the list of them does too. `install` patches a private module of
TFF 0.87 (`executor_factory`, which starts the workers); TFF exports no hook.
"""

import atexit
import functools
import gc
import os
import shutil
import signal
import subprocess
import types

__all__ = ['install', 'reap', 'reap_context_workers', 'start_worker']

# How often TFF checks whether a worker it started is ready, and the gRPC
# reconnect backoff of the channel to it (both a second in TFF 0.87).
_READY_POLL_SECONDS = 0.02
_RECONNECT_BACKOFF_MS = (('grpc.initial_reconnect_backoff_ms', 20),
                         ('grpc.min_reconnect_backoff_ms', 20),
                         ('grpc.max_reconnect_backoff_ms', 200))
_installed = False
# Workers started by TFF's local contexts, and by `start_worker`.
_workers: list[subprocess.Popen] = []
_own_workers: list[subprocess.Popen] = []
# Pids of workers killed and waited for here (`_OsShim`).
_reaped_pids: set[int] = set()


@functools.lru_cache(maxsize=1)
def _death_signal_prefix() -> tuple:
  """The command prefix that gives a child SIGKILL when this process dies.

  util-linux's `setpriv --pdeathsig` sets the parent-death signal and execs
  the command. A `preexec_fn` would do it in Python between fork and exec,
  which the subprocess docs warn is unsafe in a threaded process: a child
  forked while another thread held a lock aborted there, and TFF waited for
  its worker forever. Without `setpriv` (not Linux) the prefix is empty and
  the atexit reaper alone stops the workers.
  """
  setpriv = shutil.which('setpriv')
  if setpriv is None:
    return ()
  return (setpriv, '--pdeathsig', 'KILL', '--')


class _Popen(subprocess.Popen):
  """`subprocess.Popen` that ties the child's life to this process."""

  def __init__(self, args, *rest, own=False, **kwargs):
    if not isinstance(args, (str, bytes, os.PathLike)):
      args = [*_death_signal_prefix(), *args]
    super().__init__(args, *rest, **kwargs)
    (_own_workers if own else _workers).append(self)


class _NoInstances(type):

  def __instancecheck__(cls, instance):
    del instance
    return False


class _TffPopen(metaclass=_NoInstances):
  """TFF's `subprocess.Popen`: starts a `_Popen`, and nothing is an instance.

  TFF's ServiceManager, dropped with its context, stops its worker in
  `__del__` only when `isinstance(self._process, subprocess.Popen)`: with
  SIGINT, then a wait that a worker still holding a run's values can stretch
  to minutes (a SO-LR run's worker spun for over 10 minutes). Here that test
  is false, and `reap_context_workers` kills the workers instead.
  """

  # TFF annotates with `subprocess.Popen[bytes]`.
  __class_getitem__ = classmethod(types.GenericAlias)

  def __new__(cls, *args, **kwargs):
    process = _Popen(*args, **kwargs)
    _reaped_pids.discard(process.pid)  # A pid the system gave out again.
    return process


class _OsShim:
  """TFF's `os`: `kill` skips the workers this module killed and waited for.

  A context whose worker was reaped (`reap_context_workers`, say before
  another context ran) and which runs again finds its service down, and
  TFF means to restart it: it signals the old worker, waits for it and
  starts a new one. The old pid is gone (or, worse, reused by another
  process), so that signal is skipped; the wait returns at once.
  """

  @staticmethod
  def kill(pid, sig):
    if pid in _reaped_pids:
      return
    os.kill(pid, sig)

  def __getattr__(self, name):
    return getattr(os, name)


class _SubprocessShim:
  Popen = _TffPopen

  def __getattr__(self, name):
    return getattr(subprocess, name)


def start_worker(args, **popen_kwargs) -> subprocess.Popen:
  """Starts a worker that dies with this process and is reaped at exit.

  `popen_kwargs` go to `subprocess.Popen` (say, `stdout`).
  """
  install()
  return _Popen(args, own=True, **popen_kwargs)


def _no_op_del(self):
  del self


def install() -> None:
  """Ties TFF's local workers to this process; idempotent."""
  global _installed
  if _installed:
    return
  # pylint: disable-next=g-import-not-at-top
  from tensorflow_federated.python.core.impl.executor_stacks import (
      executor_factory)
  executor_factory.subprocess = _SubprocessShim()
  executor_factory.os = _OsShim()
  _start_promptly(executor_factory)
  atexit.register(_at_exit)
  _installed = True


def _start_promptly(executor_factory) -> None:
  """Has TFF use a local worker as soon as it listens.

  TFF's ServiceManager checks the worker's channel once a second, and the
  channel's first connection, tried before the worker listens, fails and
  waits gRPC's default reconnect backoff (a second) before the next: every
  local context paid a second or more for a worker that starts in a tenth
  of one. Here it polls every `_READY_POLL_SECONDS` and reconnects after
  tens of milliseconds. Only the waiting changes (the channel is to
  localhost). A TFF without these private settings keeps its own waits:
  this is speed, never behaviour.
  """
  wait = getattr(executor_factory, '_LOCALHOST_SERVER_WAIT_TIME_SEC', None)
  if isinstance(wait, (int, float)) and wait > _READY_POLL_SECONDS:
    executor_factory._LOCALHOST_SERVER_WAIT_TIME_SEC = _READY_POLL_SECONDS  # pylint: disable=protected-access
  options = getattr(executor_factory, '_GRPC_CHANNEL_OPTIONS', None)
  if isinstance(options, list):
    set_already = {name for name, _ in options}
    options.extend(option for option in _RECONNECT_BACKOFF_MS
                   if option[0] not in set_already)


def reap() -> None:
  """Terminates the worker processes started by this process."""
  reap_context_workers()
  _kill_all(_own_workers)


def reap_context_workers() -> None:
  """Kills the workers of TFF's local/test contexts (call before switching).

  TFF no longer stops them (`_TffPopen`): the worker of a context dropped
  without this call lives on, idle, until the next call or this process's
  exit.
  """
  _kill_all(_workers)


def _at_exit() -> None:
  """Reaps, and quiets the `__del__` of TFF's remaining ServiceManagers.

  At interpreter shutdown their `__del__` runs after TFF's module globals
  are gone, and prints an ignored AttributeError. Each context makes its own
  ServiceManager class, so the classes are found among the live objects:
  once, here, as the scan's cost grows with them.
  """
  for obj in gc.get_objects():
    if type(obj).__name__ == 'ServiceManager' and hasattr(obj, '_process'):
      type(obj).__del__ = _no_op_del
  reap()


def _kill_all(workers):
  while workers:
    process = workers.pop()
    if process.poll() is None:
      try:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
      except (OSError, subprocess.TimeoutExpired):
        pass
    if process.returncode is not None:
      _reaped_pids.add(process.pid)
