"""Tests of tff_dprec/worker_reaper.py (TFF's local C++ workers)."""

import gc
import os
import subprocess
import sys
import time
import types

import numpy as np
import tensorflow_federated as tff
from tensorflow_federated.python.core.impl.executor_stacks import (
    executor_factory)

from absl.testing import absltest
from tff_dprec import worker_reaper
from tests import support

_ROOT = support.REPO


class StartPromptlyTest(absltest.TestCase):

  def test_tffs_waits_are_shortened_once(self):
    worker_reaper.install()  # conftest.py installed it already: idempotent.
    self.assertEqual(executor_factory._LOCALHOST_SERVER_WAIT_TIME_SEC,
                     worker_reaper._READY_POLL_SECONDS)
    options = dict(executor_factory._GRPC_CHANNEL_OPTIONS)
    for name, value in worker_reaper._RECONNECT_BACKOFF_MS:
      self.assertEqual(options[name], value)
    # TFF's own options are kept.
    self.assertIn('grpc.max_message_length', options)
    # A second pass adds nothing.
    before = list(executor_factory._GRPC_CHANNEL_OPTIONS)
    worker_reaper._start_promptly(executor_factory)
    self.assertEqual(executor_factory._GRPC_CHANNEL_OPTIONS, before)

  def test_a_tff_without_the_settings_is_left_as_it_is(self):
    bare = types.SimpleNamespace()
    worker_reaper._start_promptly(bare)
    self.assertEqual(vars(bare), {})
    # Settings of another shape, or already chosen, are kept.
    other = types.SimpleNamespace(
        _LOCALHOST_SERVER_WAIT_TIME_SEC='1',
        _GRPC_CHANNEL_OPTIONS=[('grpc.initial_reconnect_backoff_ms', 5)])
    worker_reaper._start_promptly(other)
    self.assertEqual(other._LOCALHOST_SERVER_WAIT_TIME_SEC, '1')
    self.assertEqual(dict(other._GRPC_CHANNEL_OPTIONS), {
        'grpc.initial_reconnect_backoff_ms': 5,
        'grpc.min_reconnect_backoff_ms': 20,
        'grpc.max_reconnect_backoff_ms': 200})
    shorter = types.SimpleNamespace(_LOCALHOST_SERVER_WAIT_TIME_SEC=0.001)
    worker_reaper._start_promptly(shorter)
    self.assertEqual(shorter._LOCALHOST_SERVER_WAIT_TIME_SEC, 0.001)


class ReapTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.addCleanup(tff.framework.set_default_context,
                    tff.framework.get_context_stack().current)

  def _compute_in_a_fresh_context(self, value):
    """Reaps, sets TFF's local C++ context, adds one to `value` there;
    returns the workers the context started."""
    @tff.tensorflow.computation(np.int32)
    def add_one(x):
      return x + 1

    worker_reaper.reap_context_workers()
    tff.backends.native.set_sync_local_cpp_execution_context()
    self.assertEqual(add_one(value), value + 1)
    started = list(worker_reaper._workers)
    self.assertNotEmpty(started)
    return started

  def test_fresh_contexts_compute_and_their_workers_are_killed(self):
    for value in (1, 2):
      started = self._compute_in_a_fresh_context(value)
      worker_reaper.reap_context_workers()
      self.assertEmpty(worker_reaper._workers)
      for process in started:
        # Killed; a tracer (py-spy) can delay its exit status a little.
        self.assertEqual(process.wait(timeout=60), -9)

  def test_a_context_whose_worker_was_reaped_starts_another(self):
    (first,) = self._compute_in_a_fresh_context(1)
    worker_reaper.reap_context_workers()  # The context stays the default.
    self.assertEqual(first.wait(timeout=60), -9)

    @tff.tensorflow.computation(np.int32)
    def add_two(x):
      return x + 2

    # TFF finds its service down and restarts it; the dead pid is not
    # signalled (it raised ProcessLookupError, or could hit a reused pid).
    self.assertEqual(add_two(1), 3)
    (second,) = worker_reaper._workers
    self.assertNotEqual(second.pid, first.pid)
    self.assertIsNone(second.poll())

  def test_tffs_del_leaves_the_worker_to_the_reaper(self):
    # TFF's ServiceManager.__del__ would SIGINT its worker and wait (minutes
    # for a busy one); the reaper kills it instead, when asked.
    (worker,) = self._compute_in_a_fresh_context(1)
    self.assertIsInstance(worker, subprocess.Popen)
    managers = [obj for obj in gc.get_objects()
                if type(obj).__name__ == 'ServiceManager' and
                getattr(obj, '_process', None) is worker]
    self.assertLen(managers, 1)
    type(managers[0]).__del__(managers[0])
    self.assertIsNone(worker.poll())  # Not stopped, not waited for.
    worker_reaper.reap_context_workers()
    self.assertEqual(worker.wait(timeout=60), -9)

class DeathSignalTest(absltest.TestCase):

  def test_a_worker_dies_with_its_parent_and_no_preexec_fn_runs(self):
    if not worker_reaper._death_signal_prefix():
      self.skipTest('no setpriv: the atexit reaper alone stops workers')
    # A parent process starts a long sleeper through the reaper, prints its
    # pid, and is killed: the sleeper must die too.
    code = ('import sys, time\n'
            'from tff_dprec import worker_reaper\n'
            "p = worker_reaper.start_worker(['sleep', '60'])\n"
            'print(p.pid, flush=True)\n'
            'time.sleep(60)\n')
    parent = subprocess.Popen([sys.executable, '-c', code],
                              stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=_ROOT))
    try:
      child = int(parent.stdout.readline())
      self.assertTrue(_alive(child))
    finally:
      parent.kill()
      parent.wait(timeout=30)
    deadline = time.time() + 10
    while _alive(child) and time.time() < deadline:
      time.sleep(0.05)
    self.assertFalse(_alive(child))

  def test_popen_is_given_no_preexec_fn(self):
    process = worker_reaper.start_worker(['true'])
    process.wait(timeout=30)
    self.assertEqual(process.args[:len(worker_reaper._death_signal_prefix())],
                     list(worker_reaper._death_signal_prefix()))
    self.assertEqual(process.args[-1], 'true')


def _alive(pid) -> bool:
  """Whether `pid` runs (a zombie, dead but not yet reaped, is not alive)."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().split(') ')[1][0] != 'Z'
  except FileNotFoundError:
    return False


if __name__ == '__main__':
  absltest.main()
