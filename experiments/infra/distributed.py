"""Runs TFF computations on several C++ worker processes over gRPC.

TFF 0.87's public remote stack: each worker is TFF's C++ executor service
(`worker_binary`, the same one the local context starts), reached through
`tff.framework.RemoteExecutor` over a gRPC channel, and
`tff.backends.native.set_mergeable_comp_execution_context` splits each round's
clients across the workers and merges their partial aggregates. `WorkerPool`
starts the workers on loopback ports and stops them.

With `DpRecSumFactory(record_messages=True)` the server sorts and decodes the
collected messages after the merge, so the result does not depend on how the
clients were split: a distributed run equals the local run bit for bit. With
per-message decoding in the accumulate step (`record_messages=False`), and for
any float sum (FedAvg), the merge order changes the last bits.
"""

import os
import signal
import subprocess
import time
import grpc
import portpicker
import tensorflow_federated as tff

from experiments.infra import compile_cache
from tff_dprec import worker_reaper

_GRPC_OPTIONS = [('grpc.max_send_message_length', -1),
                 ('grpc.max_receive_message_length', -1)]


def worker_binary_path() -> str:
  return os.path.join(os.path.dirname(tff.__file__), 'data', 'worker_binary')


class WorkerPool:
  """`num_workers` TFF C++ workers on loopback ports; a context manager."""

  def __init__(self, num_workers: int, *, start_timeout: float = 60.0):
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or (
        num_workers < 1):
      raise ValueError(
          f'num_workers must be a positive int, found {num_workers!r}.')
    self._num_workers = num_workers
    self._start_timeout = start_timeout
    self._processes = []
    self.ports = []
    self._stubs = []

  def __enter__(self) -> 'WorkerPool':
    self.start()
    return self

  def __exit__(self, *exc):
    self.stop()

  def start(self) -> None:
    binary = worker_binary_path()
    if not os.path.isfile(binary):
      raise RuntimeError(f'TFF worker binary not found at {binary}.')
    for _ in range(self._num_workers):
      port = portpicker.pick_unused_port()
      process = worker_reaper.start_worker(
          [binary, f'--port={port}', '--max_concurrent_computation_calls=-1'])
      self._processes.append(process)
      self.ports.append(port)
    deadline = time.time() + self._start_timeout
    for port, process in zip(self.ports, self._processes):
      stub = tff.framework.RemoteExecutorGrpcStub(
          grpc.insecure_channel(f'localhost:{port}', _GRPC_OPTIONS))
      while not stub.is_ready:
        if process.poll() is not None:
          self.stop()
          raise RuntimeError(
              f'TFF worker on port {port} exited with {process.returncode}.')
        if time.time() > deadline:
          self.stop()
          raise RuntimeError(f'TFF worker on port {port} did not start in '
                             f'{self._start_timeout} s.')
        time.sleep(0.05)
      self._stubs.append(stub)

  def stop(self) -> None:
    for process in self._processes:
      if process.poll() is None:
        process.send_signal(signal.SIGINT)
    for process in self._processes:
      try:
        process.wait(timeout=10)
      except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    self._processes, self.ports, self._stubs = [], [], []

  def contexts(self) -> list[tff.framework.AsyncExecutionContext]:
    """One async execution context per worker."""
    return [_remote_context(stub) for stub in self._stubs]

  def set_default_context(self) -> None:
    """Makes TFF run computations across the workers."""
    tff.backends.native.set_mergeable_comp_execution_context(self.contexts())


def _remote_context(stub) -> tff.framework.AsyncExecutionContext:

  def stack_fn(cardinalities):
    # As TFF's local context: unknown client counts default to zero.
    if cardinalities.get(tff.CLIENTS) is None:
      cardinalities[tff.CLIENTS] = 0
    executor = tff.framework.RemoteExecutor(stub)
    executor.set_cardinalities(cardinalities)
    return executor

  return tff.framework.AsyncExecutionContext(
      executor_fn=tff.framework.ResourceManagingExecutorFactory(stack_fn),
      compiler_fn=compile_cache.cached(compile_cache.NATIVE),
      transform_args=tff.tensorflow.transform_args,
      transform_result=tff.tensorflow.transform_result)

