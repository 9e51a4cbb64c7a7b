"""Tests for tff_dprec.aggregators.creation_guard.

TFF's internals are simulated: a fake builder is defined in a module named
like TFF's (`_fake_builder`) and `tff.aggregators.as_weighted_aggregator` is
patched. The real `build_*` paths are tested in learning_test.py.
"""

import sys
import traceback
from unittest import mock
import warnings

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import learning
from tff_dprec.aggregators import creation_guard
from tff_dprec.aggregators import dp_rec

_VALUE = tff.TensorType(np.float32, [3])
_WEIGHT = tff.TensorType(np.float32)
_LEARNING_MODULE = 'tensorflow_federated.python.learning.algorithms.fed_avg'
_BUILDER_SOURCE = '''
def {name}(create, {metrics_local}):  # The guard reads {metrics_local}.
  return create()
'''


def _fake_builder(name='build_weighted_fed_avg',
                  metrics_local='metrics_aggregator',
                  module=_LEARNING_MODULE):
  """A function `name(create, <metrics_local>)` as if in TFF's `module`.

  Like TFF 0.87's builders with the defaults, it holds the metrics
  aggregator in a local and creates the model aggregator (`create()`).
  """
  namespace = {'__name__': module}
  source = _BUILDER_SOURCE.format(name=name, metrics_local=metrics_local)
  exec(source, namespace)  # pylint: disable=exec-used
  return namespace[name]


def _create_as_fed_avg(model_aggregator):
  """A function creating `model_aggregator` as `build_unweighted_fed_avg`."""

  def create():
    wrapped = tff.aggregators.as_weighted_aggregator(model_aggregator)
    return wrapped.create(_VALUE, _WEIGHT)

  return create


def _private_mean():
  return learning.dp_rec_aggregator(0.1, 1.0)


def _check_sum_from_here(sum_factory):
  """A function running the sum's guard as if its caller called `create`."""

  def create():
    caller = sys._getframe(1)  # pylint: disable=protected-access
    creation_guard.check_unweighted_creator(sum_factory, caller,
                                            is_mean=False)

  return create


class _MovedAdapter(tff.aggregators.WeightedAggregationFactory):
  """TFF's weight-ignoring adapter, as if renamed and moved."""

  def __init__(self, unweighted_factory):
    self._factory = unweighted_factory

  def create(self, value_type, weight_type):
    del weight_type
    return self._factory.create(value_type)


class _PrivateMean(tff.aggregators.MeanFactory):
  """A private subclass of a public factory that sends the weights."""


class ExpectedInternalsTest(tf.test.TestCase):
  """The simulation reproduces TFF 0.87's behaviour where nothing differs."""

  def _caught(self, create, metrics_aggregator):
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter('always')
      _fake_builder()(create, metrics_aggregator)
    return [w for w in caught
            if issubclass(w.category, creation_guard.ClientMetricsWarning)]

  def test_client_metrics_warn_at_the_users_call(self):
    caught = self._caught(_create_as_fed_avg(_private_mean()),
                          tff.learning.metrics.sum_then_finalize)
    self.assertLen(caught, 1)
    self.assertIn('no_client_metrics', str(caught[0].message))
    self.assertEqual(caught[0].filename, __file__)

  def test_no_client_metrics_pass_silently(self):
    self.assertEmpty(self._caught(
        _check_sum_from_here(_private_mean().sum_factory),
        learning.no_client_metrics))

  def test_adapter_is_tffs_private_class(self):
    weights_ignored_type = creation_guard._weights_ignored_type  # pylint: disable=protected-access
    adapter_type = weights_ignored_type(None)
    self.assertIs(adapter_type, type(tff.aggregators.as_weighted_aggregator(
        tff.aggregators.SumFactory())))
    self.assertTrue(adapter_type.__name__.startswith('_'))

  def test_learning_reexports_the_guards_classes(self):
    self.assertIs(learning.ClientMetricsWarning,
                  creation_guard.ClientMetricsWarning)
    self.assertIs(learning.TffInternalsError, creation_guard.TffInternalsError)


class _DriftTestCase(tf.test.TestCase, parameterized.TestCase):

  def assert_one_line_error(self, create, regex):
    """Asserts that `create()` raises TffInternalsError in one line."""
    with self.assertRaises(creation_guard.TffInternalsError) as raised:
      create()
    error = raised.exception
    shown = traceback.format_exception_only(type(error), error)
    self.assertLen(shown, 1)
    self.assertEqual(shown[0].count('\n'), 1)
    self.assertRegex(str(error), regex)
    # It names the release it was written for and the one it found.
    self.assertIn('relies on TFF 0.87 internals', str(error))
    self.assertIn(f'found tensorflow_federated {tff.__version__}', str(error))
    # No chained exception: nothing but this line explains the refusal.
    self.assertIsNone(error.__cause__)
    self.assertTrue(error.__context__ is None or error.__suppress_context__)


class BuilderDriftTest(_DriftTestCase):
  """TFF's builders are renamed, or their metrics local is."""

  @parameterized.named_parameters(
      ('client_metrics', tff.learning.metrics.sum_then_finalize),
      ('no_client_metrics', learning.no_client_metrics))
  def test_renamed_builder_is_refused(self, metrics_aggregator):
    builder = _fake_builder(name='fed_avg_process')
    self.assert_one_line_error(
        lambda: builder(_create_as_fed_avg(_private_mean()),
                        metrics_aggregator),
        r'^DPRecSumFactory cannot check the TFF code that creates it: no '
        r'function named build_\* among the tff.learning frames that create '
        rf'it \({_LEARNING_MODULE}\.fed_avg_process\)\.')

  @parameterized.named_parameters(
      ('client_metrics', tff.learning.metrics.sum_then_finalize),
      ('no_client_metrics', learning.no_client_metrics))
  def test_renamed_metrics_local_is_refused(self, metrics_aggregator):
    builder = _fake_builder(metrics_local='metrics_aggregation_fn')
    self.assert_one_line_error(
        lambda: builder(_create_as_fed_avg(_private_mean()),
                        metrics_aggregator),
        rf'the tff.learning builder {_LEARNING_MODULE}\.build_weighted_fed_avg'
        ' has no local metrics_aggregator, so its client metrics cannot be '
        'checked')

  def test_checks_before_drift(self):
    # A misuse the guard can see is refused as on TFF 0.87.
    builder = _fake_builder(name='fed_avg_process')
    with self.assertRaisesRegex(TypeError, 'sums the client updates'):
      builder(_create_as_fed_avg(_private_mean().sum_factory),
              learning.no_client_metrics)

  def test_compression_only_is_not_checked(self):
    sum_factory = dp_rec.DPRecSumFactory(noise_stddev=0.1, l2_clip=None)
    for builder in (_fake_builder(name='fed_avg_process'),
                    _fake_builder(metrics_local='metrics_aggregation_fn')):
      builder(_check_sum_from_here(sum_factory), None)

  def test_creation_outside_tff_learning_is_not_checked(self):
    sum_factory = _private_mean().sum_factory
    _check_sum_from_here(sum_factory)()
    _fake_builder(name='create_process',
                  module='tensorflow_federated.python.aggregators.mean')(
                      _check_sum_from_here(sum_factory), None)


class AdapterDriftTest(_DriftTestCase):
  """`tff.aggregators.as_weighted_aggregator` or its class differ."""

  def test_missing_function_is_refused(self):
    wrapped = tff.aggregators.as_weighted_aggregator(_private_mean())
    with mock.patch.dict(vars(tff.aggregators)):
      del vars(tff.aggregators)['as_weighted_aggregator']
      self.assert_one_line_error(
          lambda: wrapped.create(_VALUE, _WEIGHT),
          r'^DPRecMeanFactory cannot check the TFF code that creates it: '
          r'tff.aggregators.as_weighted_aggregator does not exist\.')

  def test_failing_function_is_refused(self):
    wrapped = tff.aggregators.as_weighted_aggregator(_private_mean())
    with mock.patch.object(tff.aggregators, 'as_weighted_aggregator',
                           side_effect=AttributeError('moved')):
      self.assert_one_line_error(
          lambda: wrapped.create(_VALUE, _WEIGHT),
          r'as_weighted_aggregator\(SumFactory\(\)\) raised AttributeError\.')

  @parameterized.named_parameters(
      ('public_class', tff.aggregators.MeanFactory, 'mean.MeanFactory'),
      ('subclass_of_public', _PrivateMean, '_PrivateMean'))
  def test_public_factory_is_not_taken_for_the_adapter(self, returned, name):
    wrapped = tff.aggregators.as_weighted_aggregator(_private_mean())
    with mock.patch.object(tff.aggregators, 'as_weighted_aggregator',
                           lambda factory: returned()):
      self.assert_one_line_error(
          lambda: wrapped.create(_VALUE, _WEIGHT),
          rf'as_weighted_aggregator returned a [\w.]*{name}, not a private '
          'WeightedAggregationFactory outside the public factory classes')

  def test_moved_adapter_is_followed(self):
    with mock.patch.object(tff.aggregators, 'as_weighted_aggregator',
                           lambda factory: _MovedAdapter(factory)):  # pylint: disable=unnecessary-lambda
      with self.assertRaisesRegex(TypeError, 'sums the client updates'):
        _create_as_fed_avg(_private_mean().sum_factory)()
      process = _create_as_fed_avg(_private_mean())()
    self.assertIsInstance(process, tff.templates.AggregationProcess)

  def test_unused_adapter_is_not_checked(self):
    # Without a weighted factory around DP-REC there is nothing to tell apart.
    with mock.patch.dict(vars(tff.aggregators)):
      del vars(tff.aggregators)['as_weighted_aggregator']
      _check_sum_from_here(_private_mean().sum_factory)()


if __name__ == '__main__':
  tf.test.main()
