"""Tests of experiments.studies.worst_pair (small Monte Carlo sizes)."""

from absl.testing import absltest
import numpy as np

from experiments.studies import worst_pair
from tff_dprec.accounting import message_profile

EPS = np.array([0.5, 1.0, 2.0, 4.0])


def _substitution(mode, c=1.4, bits=3):
  with worst_pair.step_three(mode, samples=4000, seed=1):
    _, _, sub = message_profile.message_profiles(
        clip_ratio=c, bits=bits, num_groups=1, max_epsilon=6.0)
  return sub.value(EPS)


class StepThreeTest(absltest.TestCase):

  def test_monte_carlo_below_default_below_without(self):
    default = _substitution('default')
    self.assertTrue(np.all(_substitution('monte_carlo') <= default))
    self.assertTrue(np.all(default <= _substitution('without')))
    self.assertTrue(np.any(default < _substitution('without')))

  def test_restores_the_accountant(self):
    before = message_profile._message_profiles  # pylint: disable=protected-access
    _substitution('monte_carlo')
    self.assertIs(message_profile._message_profiles, before)  # pylint: disable=protected-access
    after = message_profile.message_profiles(
        clip_ratio=1.4, bits=3, num_groups=1, max_epsilon=6.0)[2]
    np.testing.assert_array_equal(after.value(EPS),
                                  _substitution('default'))

  def test_refuses_an_unknown_mode(self):
    with self.assertRaisesRegex(ValueError, 'mode'):
      with worst_pair.step_three('exact'):
        pass


class MonteCarloTest(absltest.TestCase):

  def test_plain_and_conditional_agree_within_their_errors(self):
    gammas = np.exp(EPS)
    plain, plain_se = worst_pair.monte_carlo_values(1.4, 3, 1, EPS, 20000,
                                                    seed=2)
    cond, cond_se = worst_pair.conditional_monte_carlo(1.4, 3, gammas,
                                                       20000, seed=3)
    np.testing.assert_array_less(np.abs(plain - cond),
                                 4 * np.hypot(plain_se, cond_se) + 2e-3)


if __name__ == '__main__':
  absltest.main()
