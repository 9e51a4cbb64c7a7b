"""Tests of experiments.studies.audit: the empirical lower bound on epsilon."""

import tensorflow as tf

from experiments.studies import audit


class AuditTest(tf.test.TestCase):

  def test_lower_bound_detects_leakage_but_stays_below_accountant(self):
    result = audit.run_audit(clip_ratio=2.0, trials=3000, seed=1)
    # A grouped release: 4 groups of 7 bits.
    self.assertEqual(result['total_bits'], 4 * 7)
    # A clipped update at c = 2 is clearly distinguishable from zero...
    self.assertGreater(result['empirical_epsilon_lower_bound'], 1.0)
    # ...but never beyond what the proven accountant allows.
    self.assertLess(result['empirical_epsilon_lower_bound'],
                    result['accountant_epsilon'])

  def test_no_signal_gives_no_leakage(self):
    # c = 0: both inputs are zero, so the bound is 0 up to the 95% level.
    result = audit.run_audit(clip_ratio=0.0, trials=3000, seed=2)
    self.assertLess(result['empirical_epsilon_lower_bound'], 0.3)


if __name__ == '__main__':
  tf.test.main()
