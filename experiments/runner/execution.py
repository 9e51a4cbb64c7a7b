"""The TFF process a run trains, and the execution context that runs it.

`build_process` is TFF's unweighted FedAvg with a calibrated aggregator, built
so that the same build gives the same computation in every process;
`set_context` installs TFF's local C++ context (the test context for
DDGauss's secure sum) with compiled computations kept on disk
(`experiments.infra.compile_cache`), or a worker pool's.
"""

import asyncio
import contextlib
import errno
import random
from typing import Optional

import tensorflow_federated as tff

from tff_dprec import learning
from tff_dprec import process_check
from tff_dprec import worker_reaper
from tff_dprec.aggregators import dp_rec

from experiments.data import tasks as tasks_lib
from experiments.infra import compile_cache
from experiments.runner import config as config_lib

# Python's `random` seed while a process is built (`_fixed_keras_seeds`).
_BUILD_SEED = 0x7FF0


def allow_oversize_protos():
  """DDGauss's computation exceeds protobuf's default nesting limit."""
  try:
    from google._upb import _message  # pylint: disable=g-import-not-at-top
    _message.SetAllowOversizeProtos(True)
  except ImportError:  # Other protobuf backends have no such limit switch.
    pass


def server_optimizer_for(task: tasks_lib.Task, server_lr: float,
                         config: Optional[config_lib.RunConfig] = None,
                         private: bool = False):
  """The run's server optimizer (`config`'s choice, else the task's)."""
  d = task.defaults
  if optimizer_name(task, config, private) == 'adam':
    return tff.learning.optimizers.build_adam(server_lr)
  momentum = d.server_momentum
  if config is not None and config.server_momentum is not None:
    momentum = config.server_momentum
  return tff.learning.optimizers.build_sgdm(server_lr,
                                            momentum=momentum or None)


def optimizer_name(task, config, private) -> str:
  """'adam' or 'sgdm': `config`'s choice, else the task's default."""
  d = task.defaults
  return (config and config.server_optimizer) or (
      private and d.private_server_optimizer) or d.server_optimizer


def build_process(task: tasks_lib.Task, aggregator, client_lr: float,
                  server_optimizer, loop_implementation=(
                      tff.learning.LoopImplementation.DATASET_ITERATOR)):
  """TFF's unweighted FedAvg with a calibrated aggregator's factory.

  A DP-REC protocol run's process is checked (`tff_dprec.process_check`,
  strict): `ClientDataOutsideDpRecError` if any client data other than its
  DP-REC messages would reach the server.

  The client's loop over its batches is a `tf.while_loop` over a dataset
  iterator (`DATASET_ITERATOR`), TFF's other choice: it computes the same
  updates as `DATASET_REDUCE` (TFF's default), bit for bit
  (`tests/experiments/throughput_test.py`), at a fifth of the C++ runtime's
  CPU time per client here (26 against 5 ms; `python -m experiments.bench
  rounds`).
  """
  # Private runs release no client training metrics: they would leave the
  # clients outside the DP mechanism.
  metrics = {}
  if aggregator.private_setting:
    metrics['metrics_aggregator'] = learning.no_client_metrics
  with _fixed_keras_seeds():
    process = tff.learning.algorithms.build_unweighted_fed_avg(
        task.baseline.model_fn,
        client_optimizer_fn=tff.learning.optimizers.build_sgdm(client_lr),
        server_optimizer_fn=server_optimizer,
        model_aggregator=aggregator.factory,
        loop_implementation=loop_implementation, **metrics)
  if isinstance(getattr(aggregator, 'rec_sum', None), dp_rec.DpRecSumFactory):
    # The protocol's runs: nothing but DP-REC messages (and the public count
    # of them) leaves the clients, read off the built computation.
    process_check.check_process(process, strict=True)
  return process


@contextlib.contextmanager
def _fixed_keras_seeds():
  """Keras's initializer seeds, drawn from Python's `random`, made fixed.

  The traced graphs create the model's variables with seeded initializers;
  with seeds fixed, the same build gives the same computation in every
  process, so `compile_cache` can serve it. The values those initializers
  draw never reach training: a run starts from `seeded_model_weights` (R'),
  and each client's variables are overwritten by the broadcast model. The
  caller's `random` state is restored. Other Keras layers that take their
  op seeds from the same source (dropout) get the same seeds in every
  process; none of the privacy mechanisms' randomness does
  (tests/experiments/execution_test.py checks that every stateful random op
  of the private processes seeds itself at run time).
  """
  state = random.getstate()
  random.seed(_BUILD_SEED)
  try:
    yield
  finally:
    random.setstate(state)


# Rounds between fresh local contexts in a run (`training`). TFF's C++
# worker grows with every round of TFF's DP-FedAvg (the cause is inside TFF
# and was not found): on Fashion-MNIST by 20 to 40 MB a round, to 13.6 GB by
# round 930, and two such runs filled this machine's memory (FedAvg's worker
# stays near 0.6 GB). A fresh context (`set_context`) frees it. The run's
# state and history live outside the worker, and every random op seeds
# itself afresh when its worker starts (PrivacyOfTheTrainingProcessTest), so
# no draw repeats; in insecure test mode a run computes what it would
# without a renewal (ContextRenewalTest). A `--workers` pool stays.
CONTEXT_ROUNDS = 50


def set_context(aggregator, pool=None, use_compile_cache: bool = True):
  """Sets the execution context the aggregator needs (a pool's workers, if
  any).

  `use_compile_cache=False` compiles as TFF's own local contexts do (the
  rounds benchmark's reference path).
  """
  # The previous context's worker is killed, not asked to wind down.
  worker_reaper.reap_context_workers()
  if pool is not None:
    pool.set_default_context()
  else:
    # TFF's local contexts (DDGauss's secure sum runs only in the test
    # one), with compiled computations kept on disk.
    tff.framework.set_default_context(compile_cache.local_context(
        compile_cache.TEST if aggregator.needs_test_context
        else compile_cache.NATIVE, use_cache=use_compile_cache))


class MetricsRelease:
  """A run's per-round metrics, to its metrics.csv and TensorBoard logs.

  A write that fails (a full disk) raises OSError naming the file or the
  TensorBoard folder: TensorFlow's event writer raises its own errors,
  which are turned into OSError here, so that the command ends with one
  line (`cli.write_failure`).
  """

  def __init__(self, csv_path: str, summary_dir: str):
    self._summary_dir = summary_dir
    self._manager = tff.program.GroupingReleaseManager([
        tff.program.CSVFileReleaseManager(
            file_path=csv_path, save_mode=tff.program.CSVSaveMode.WRITE,
            key_fieldname='round'),
        tff.program.TensorBoardReleaseManager(summary_dir=summary_dir)])

  def __call__(self, row: dict, round_num: int) -> None:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    try:
      asyncio.run(self._manager.release(row, key=round_num))
    except tf.errors.OpError as e:
      code = (errno.ENOSPC if 'No space left' in (e.message or '')
              else errno.EIO)
      raise OSError(code, e.message, self._summary_dir) from None
