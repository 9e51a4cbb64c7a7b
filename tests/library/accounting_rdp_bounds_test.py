"""Tests for tff_dprec.accounting.rdp_bounds: Zhu and Wang's bound."""

from absl.testing import parameterized
from dp_accounting.rdp import rdp_privacy_accountant
import mpmath
import numpy as np

from tff_dprec.accounting import rdp_bounds


def _zhu_wang_mpmath(q, base, alpha):
  """Zhu and Wang's bracket in 60-digit arithmetic (the reference)."""
  mp = mpmath.mp.clone()
  mp.dps = 60
  q = mp.mpf(q)
  total = (1 - q)**(alpha - 1) * (alpha * q - q + 1)
  total += mp.binomial(alpha, 2) * q**2 * (1 - q)**(alpha - 2) * mp.exp(
      mp.mpf(base[0]))
  for l in range(3, alpha + 1):
    total += 3 * mp.binomial(alpha, l) * (1 - q)**(alpha - l) * q**l * mp.exp(
        (l - 1) * mp.mpf(base[l - 2]))
  return max(mp.log(total), 0) / (alpha - 1)


class ZhuWangTest(parameterized.TestCase):

  @parameterized.parameters((1 / 342477, 2.0), (1e-4, 1.0), (0.01, 1.0),
                            (0.3, 0.5))
  def test_agrees_with_high_precision_arithmetic(self, q, z):
    # Tiny q: the bracket is 1 + O(q^2), where a log-sum-exp lost 1e-8 of
    # the value (rounded down, the unsafe way).
    orders = np.arange(2, 33)
    base = np.asarray([l / (2 * z * z) for l in range(2, 33)])
    bound = rdp_bounds.zhu_wang_upper_bound(q, base, orders)
    for alpha, value in zip(orders, bound):
      reference = float(_zhu_wang_mpmath(q, base, int(alpha)))
      self.assertAlmostEqual(value, reference, delta=1e-11 * reference,
                             msg=f'order {alpha}')

  @parameterized.parameters((0.01, 1.0), (0.1, 2.0), (0.001, 0.5))
  def test_upper_bounds_exact_subsampled_gaussian(self, q, z):
    # For the Gaussian mechanism (eps(l) = l / (2 z^2)) the general bound
    # must lie above the exact subsampled RDP and below the unamplified one.
    orders = list(range(2, 65))
    base = [l / (2 * z * z) for l in range(2, 65)]
    bound = rdp_bounds.zhu_wang_upper_bound(
        q, np.asarray(base), np.asarray(orders))
    exact = rdp_privacy_accountant._compute_rdp_poisson_subsampled_gaussian(  # pylint: disable=protected-access
        q, z, orders)
    self.assertTrue(np.all(bound >= exact - 1e-12))
    # At order 2 the bound is exact: log(1 + q^2 (e^{eps(2)} - 1)).
    self.assertAlmostEqual(bound[0], exact[0], delta=1e-9 * exact[0])


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
