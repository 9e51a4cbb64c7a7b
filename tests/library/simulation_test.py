"""Tests for tff_dprec.simulation: the simulation in law, a type of its own.

The law itself is tested in in_law_test.py; here, that the simulation is
told apart from the protocol by its namespace and its type.
"""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import aggregators
from tff_dprec import learning
from tff_dprec import simulation
from tff_dprec.aggregators import dp_rec_in_law

_VECTOR = tff.TensorType(np.float32, [4])


class SimulationTest(tf.test.TestCase):

  def test_aggregator_is_a_type_of_its_own(self):
    simulated = simulation.dp_rec_in_law_aggregator(0.1, 0.2, bits=5)
    self.assertIsInstance(simulated, simulation.DpRecInLawMeanFactory)
    self.assertNotIsInstance(simulated, aggregators.DpRecMeanFactory)
    self.assertNotIsInstance(learning.dp_rec_aggregator(0.1, 0.2),
                             simulation.DpRecInLawMeanFactory)
    self.assertIsInstance(simulated.sum_factory,
                          simulation.DpRecInLawSumFactory)
    self.assertIsInstance(simulated, tff.aggregators.UnweightedMeanFactory)
    self.assertEqual(
        repr(simulated),
        'DpRecInLawMeanFactory(DpRecInLawSumFactory(noise_stddev=0.1, '
        "l2_clip=0.2, bits=5, grouping='tensor'))")

  def test_exports_are_the_in_law_classes(self):
    self.assertIs(simulation.DpRecInLawMeanFactory,
                  dp_rec_in_law.DpRecInLawMeanFactory)
    self.assertIs(simulation.DpRecInLawSumFactory,
                  dp_rec_in_law.DpRecInLawSumFactory)
    for name in simulation.__all__:
      self.assertTrue(hasattr(simulation, name), name)

  def test_only_here(self):
    self.assertFalse(hasattr(learning, 'dp_rec_in_law_aggregator'))
    for name in ('DpRecInLawSumFactory', 'DpRecInLawMeanFactory'):
      self.assertNotIn(name, aggregators.__all__)

  def test_settings_and_layout_are_the_simulated_protocols(self):
    simulated = simulation.dp_rec_in_law_aggregator(0.1, 0.3, bits=6,
                                                    grouping='network')
    real = learning.dp_rec_aggregator(0.1, 0.3, bits=6, grouping='network')
    self.assertEqual(simulated.layout(_VECTOR), real.layout(_VECTOR))
    self.assertEqual(simulated.dp_event(_VECTOR), real.dp_event(_VECTOR))

  def test_clip_is_required(self):
    with self.assertRaisesRegex(TypeError, 'l2_clip.*None'):
      simulation.dp_rec_in_law_aggregator(0.1, None)


if __name__ == '__main__':
  tf.test.main()
