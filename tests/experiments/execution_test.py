"""Tests of experiments.runner.execution: the built process moves only
DP-REC's messages and seeds its random ops at run time; a fresh context
draws afresh."""

from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiments.data import tasks
from experiments.runner import execution
from experiments.runner import registry
from tests import support
from tff_dprec import process_check
from tff_dprec import rec


class PrivacyOfTheTrainingProcessTest(tf.test.TestCase):

  def test_dp_rec_process_moves_only_integer_messages(self):
    task = tasks.create_task('digits', self.create_tempdir().full_path)
    value_type = tff.learning.models.weights_type_from_model(
        task.baseline.model_fn).trainable
    for record_messages in (False, True):
      aggregator = registry.build(
          'dp_rec', value_type=value_type, population=task.population,
          clients_per_round=5, rounds=3, target_epsilon=8.0, delta=1e-3,
          bits=7, grouping='tensor', noise_stddev=0.02, l2_clip=0.5,
          record_messages=record_messages)
      process = execution.build_process(
          task, aggregator, 0.05, tff.learning.optimizers.build_sgdm(1.0))
      moved = support.clients_to_server_value_types(process.next)
      self.assertNotEmpty(moved)
      for _, moved_type in moved:
        for dtype in support.tensor_dtypes(moved_type.member):
          self.assertTrue(np.issubdtype(dtype, np.integer),
                          msg=str(moved_type))
    # FedAvg (not private) keeps TFF's client metrics: floats move.
    fedavg = registry.build(
        'fedavg', value_type=value_type, population=task.population,
        clients_per_round=5, rounds=3, target_epsilon=8.0, delta=1e-3,
        bits=7, grouping='tensor', noise_stddev=0.02, l2_clip=0.5)
    process = execution.build_process(
        task, fedavg, 0.05, tff.learning.optimizers.build_sgdm(1.0))
    dtypes = [d for _, t in support.clients_to_server_value_types(
        process.next) for d in support.tensor_dtypes(t.member)]
    self.assertTrue(any(np.issubdtype(d, np.floating) for d in dtypes))

  def test_dp_rec_protocol_processes_are_checked_strictly(self):
    # build_process runs tff_dprec.process_check on the protocol's processes
    # (strict), and only on them: the in-law simulation sends floats.
    task = tasks.create_task('digits', self.create_tempdir().full_path)
    value_type = tff.learning.models.weights_type_from_model(
        task.baseline.model_fn).trainable
    checked = []
    real_check = process_check.check_process

    def check(process, *, strict=False):
      report = real_check(process, strict=strict)
      checked.append((strict, report))
      return report

    setting = dict(value_type=value_type, population=task.population,
                   clients_per_round=5, rounds=3, target_epsilon=8.0,
                   delta=1e-3, bits=7, grouping='tensor', noise_stddev=0.02,
                   l2_clip=0.5)
    with mock.patch.object(process_check, 'check_process', check):
      for name in ('dp_rec', 'dp_rec_in_law', 'fedavg'):
        execution.build_process(
            task, registry.build(name, **setting), 0.05,
            tff.learning.optimizers.build_sgdm(1.0))
    self.assertLen(checked, 1)
    strict, report = checked[0]
    self.assertTrue(strict)
    self.assertEmpty(report.outside_dp_rec)
    self.assertNotEmpty(report.dp_rec_messages)

  def test_a_leaking_dp_rec_process_is_refused_at_build(self):
    task = tasks.create_task('digits', self.create_tempdir().full_path)
    value_type = tff.learning.models.weights_type_from_model(
        task.baseline.model_fn).trainable
    aggregator = registry.build(
        'dp_rec', value_type=value_type, population=task.population,
        clients_per_round=5, rounds=3, target_epsilon=8.0, delta=1e-3,
        bits=7, grouping='tensor', noise_stddev=0.02, l2_clip=0.5)
    # As if the run were built without no_client_metrics: TFF's default
    # client metrics leave the clients in the clear.
    with mock.patch.object(type(aggregator), 'private_setting',
                           new_callable=mock.PropertyMock,
                           return_value=False):
      with self.assertRaisesRegex(process_check.ClientDataOutsideDpRecError,
                                  'outside DP-REC messages'):
        execution.build_process(task, aggregator, 0.05,
                                tff.learning.optimizers.build_sgdm(1.0))

  def test_fixed_build_seed_reaches_no_random_op(self):
    # execution.build_process fixes Python's `random` while TFF traces (for
    # Keras's initializer seeds). Every stateful random op of the private
    # processes must still seed itself at run time (seed = seed2 = 0), so
    # that no noise is a constant of the build.
    task = tasks.create_task('digits', self.create_tempdir().full_path)
    value_type = tff.learning.models.weights_type_from_model(
        task.baseline.model_fn).trainable
    execution.allow_oversize_protos()
    for name in ('dp_rec', 'dp_fedavg', 'ddgauss16'):
      aggregator = registry.build(
          name, value_type=value_type, population=task.population,
          clients_per_round=5, rounds=3, target_epsilon=8.0, delta=1e-3,
          bits=7, grouping='tensor', noise_stddev=0.02, l2_clip=0.5)
      process = execution.build_process(
          task, aggregator, 0.05, tff.learning.optimizers.build_sgdm(1.0))
      ops = _stateful_random_ops(
          tff.framework.ConcreteComputation.get_proto(process.next))
      # DDGauss's noise is drawn by stateless samplers whose seeds come from
      # stateful ops (tfp's sanitize_seed); its rounding's seeds come from
      # a timestamp.
      self.assertNotEmpty(ops, name)
      for op, seeds in ops:
        self.assertEqual(seeds, (0, 0), f'{name}: {op}')


class ContextRenewalTest(tf.test.TestCase):

  def test_a_fresh_worker_draws_afresh(self):
    # The same computation, in the worker before a renewal and in the fresh
    # one after: DP-REC's seed word and a Gaussian like DP-FedAvg's noise
    # (both stateful ops with seed = seed2 = 0) must not start over. A seed
    # baked into the graph would give both workers the same draws.
    draw = tff.tensorflow.computation(lambda: (
        rec.fresh_int64([4]), tf.random.normal([4])))
    aggregator = registry.build(
        'fedavg', value_type=tff.TensorType(np.float32, [3]), population=10,
        clients_per_round=2, rounds=1, target_epsilon=None, delta=None,
        bits=None, grouping='tensor', noise_stddev=None, l2_clip=None)
    try:
      draws = []
      for _ in range(2):
        execution.set_context(aggregator)
        draws.append(draw())
    finally:
      tff.backends.native.set_sync_local_cpp_execution_context()
    (words_before, normal_before), (words_after, normal_after) = draws
    self.assertEmpty(set(words_before.tolist()) & set(words_after.tolist()))
    self.assertNotAllClose(normal_before, normal_after)


_STATEFUL_RANDOM_OPS = frozenset({
    'RandomStandardNormal', 'RandomUniform', 'RandomUniformInt',
    'TruncatedNormal', 'RandomShuffle', 'Multinomial', 'RandomGamma',
    'RandomPoisson', 'RandomPoissonV2', 'ParameterizedTruncatedNormal'})


def _stateful_random_ops(proto):
  """[(op name, (seed, seed2))] of every TF graph in a computation proto."""
  found = []

  def visit(message):
    if message.DESCRIPTOR.full_name == 'tensorflow_federated.v0.TensorFlow':
      graph = tf.compat.v1.GraphDef()
      message.graph_def.Unpack(graph)
      nodes = list(graph.node) + [n for f in graph.library.function
                                  for n in f.node_def]
      found.extend((n.name, (n.attr['seed'].i, n.attr['seed2'].i))
                   for n in nodes if n.op in _STATEFUL_RANDOM_OPS)
      return
    for field, value in message.ListFields():
      if field.type != field.TYPE_MESSAGE:
        continue
      for item in (value if field.label == field.LABEL_REPEATED else
                   [value]):
        visit(item)

  visit(proto)
  return found


if __name__ == '__main__':
  tf.test.main()
