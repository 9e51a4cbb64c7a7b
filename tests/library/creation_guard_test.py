"""Tests for tff_dprec.aggregators.creation_guard: a weighted call refused.

What `create` cannot see (the factories around it, the builder's client
metrics) is tested in process_check_test.py and learning_test.py.
"""

import os

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import learning
from tff_dprec import simulation
from tff_dprec.aggregators import dp_rec
from tff_dprec.aggregators import dp_rec_in_law
from tff_dprec.aggregators import rec_compression

_VALUE = tff.TensorType(np.float32, [3])
_WEIGHT = tff.TensorType(np.float32)
_FACTORIES = (
    ('sum', lambda: dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0)),
    ('in_law_sum', lambda: dp_rec_in_law.DpRecInLawSumFactory(
        noise_stddev=0.1, l2_clip=1.0)),
    ('mean', lambda: learning.dp_rec_aggregator(0.1, 1.0)),
    ('in_law_mean', lambda: simulation.dp_rec_in_law_aggregator(0.1, 1.0)),
    ('compression_sum', lambda: rec_compression.RecCompressionSumFactory(
        noise_stddev=0.1)),
)


class WeightedCallTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(*_FACTORIES)
  def test_weight_type_is_refused_saying_what_to_use(self, make):
    factory = make()
    with self.assertRaisesRegex(
        TypeError,
        rf'^{type(factory).__name__}\.create takes the value type only; it '
        r'was called with a weight type too \(TensorType\(np.float32\)\).*'
        'build_dp_rec_fed_avg.*build_unweighted_fed_avg'):
      factory.create(_VALUE, _WEIGHT)

  @parameterized.named_parameters(*_FACTORIES)
  def test_value_type_alone_creates(self, make):
    factory = make()
    for process in (factory.create(_VALUE), factory.create(_VALUE, None)):
      self.assertIsInstance(process, tff.templates.AggregationProcess)

  def test_enclosing_factories_are_not_seen_by_create(self):
    # MeanFactory calls its value sum with the value type alone: the weights
    # it sends in the clear are for check_process to report.
    mean = tff.aggregators.MeanFactory(
        dp_rec.DpRecSumFactory(noise_stddev=0.1, l2_clip=1.0))
    self.assertIsInstance(mean.create(_VALUE, _WEIGHT),
                          tff.templates.AggregationProcess)


class NoCallStackTest(tf.test.TestCase):

  def test_library_reads_no_python_call_stack(self):
    library = os.path.dirname(os.path.dirname(dp_rec.__file__))
    self.assertEqual(os.path.basename(library), 'tff_dprec')
    readers = ('_getframe', 'inspect.stack', 'inspect.currentframe',
               'f_back', 'f_locals')
    found = []
    for folder, _, files in os.walk(library):
      for name in files:
        if name.endswith('.py'):
          with open(os.path.join(folder, name)) as f:
            text = f.read()
          found += [(name, r) for r in readers if r in text]
    self.assertEmpty(found)


if __name__ == '__main__':
  tf.test.main()
