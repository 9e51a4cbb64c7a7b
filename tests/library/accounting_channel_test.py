"""Tests for tff_dprec.accounting.channel: the DP-REC channel's divergences.

Reference values: exact (the shared note's table, and an independent
high-precision quadrature for K = 2) and Monte Carlo with its standard error
for the forward direction, whose integrand is bounded by K^a.
"""

import math

from absl.testing import parameterized
import mpmath
import numpy as np
from scipy import special

from tff_dprec.accounting import channel

# Exact reverse divergences (c, K, a), a reference table computed apart
# with multiple precision (the design notes' rec-channel-rdp table).
_EXACT_REVERSE = [
    (0.3, 16, 2, 0.0846), (0.3, 1024, 16, 0.7199), (0.8, 2, 8, 3.7871),
    (0.8, 128, 16, 5.1821), (1.25, 2, 3, 2.4419), (1.25, 16, 4, 3.3209),
    (1.25, 128, 16, 18.9084), (1.25, 1024, 8, 6.2604), (2.0, 2, 16, 59.3069),
    (2.0, 128, 4, 8.8300), (2.0, 1024, 2, 3.9990),
]


def _monte_carlo(c, bits, orders, n, seed):
  """Forward and reverse D_a estimates with standard errors (delta method)."""
  rng = np.random.default_rng(seed)
  k = 2**bits
  batch = max(1, 2**20 // k)
  moments = []
  for start in range(0, n, batch):
    xi = rng.standard_normal((min(batch, n - start), k))
    log_ratio = c * xi[:, 0] - special.logsumexp(c * xi, axis=1) + math.log(k)
    moments.append(np.concatenate(
        [np.exp(np.outer(log_ratio, orders)),
         np.exp(-np.outer(log_ratio, np.asarray(orders) - 1))], axis=1))
  values = np.concatenate(moments)
  mean = values.mean(axis=0)
  se = values.std(axis=0) / math.sqrt(len(values))
  orders = np.tile(np.asarray(orders, np.float64), 2)
  d, d_se = np.log(mean) / (orders - 1), se / mean / (orders - 1)
  half = len(d) // 2
  return d[:half], d_se[:half], d[half:], d_se[half:]


def _reverse_k2_mpmath(c, order):
  """K = 2: E[((1 + exp(c sqrt(2) eta)) / 2)^m], eta ~ N(0, 1)."""
  mpmath.mp.dps = 30
  m = order - 1
  f = lambda x: (((1 + mpmath.exp(c * mpmath.sqrt(2) * x)) / 2)**m *
                 mpmath.exp(-x * x / 2) / mpmath.sqrt(2 * mpmath.pi))
  value = mpmath.quad(f, [-mpmath.inf, -5, 0, 5, mpmath.inf])
  return float(mpmath.log(value) / m)


class ReverseTest(parameterized.TestCase):

  @parameterized.parameters(*_EXACT_REVERSE)
  def test_matches_exact_table(self, c, k, order, expected):
    _, reverse = channel.rec_channel_rdp(
        clip_ratio=c, bits=int(math.log2(k)), orders=[order])
    self.assertAlmostEqual(reverse[0], expected, delta=6e-5)

  @parameterized.parameters((0.5, 2), (1.25, 5), (2.0, 12), (3.0, 7))
  def test_matches_high_precision_quadrature_k2(self, c, order):
    _, reverse = channel.rec_channel_rdp(clip_ratio=c, bits=1,
                                            orders=[order])
    exact = _reverse_k2_mpmath(c, order)
    self.assertGreaterEqual(reverse[0], exact)
    self.assertLess(reverse[0] - exact, 1e-6 * (1 + exact))

  def test_zero_update_is_free(self):
    forward, reverse = channel.rec_channel_rdp(clip_ratio=0.0, bits=7,
                                                  orders=[2, 8])
    np.testing.assert_array_equal(forward, 0.0)
    np.testing.assert_array_equal(reverse, 0.0)

  def test_not_gaussian_dominated_at_high_order(self):
    # The note's finding: 1.5x the Gaussian at c = 1.25, K = 128, a = 16.
    _, reverse = channel.rec_channel_rdp(clip_ratio=1.25, bits=7,
                                            orders=[16])
    self.assertGreater(reverse[0], 1.4 * 16 * 1.25**2 / 2)


class ForwardTest(parameterized.TestCase):

  @parameterized.product(c=(0.3, 0.8, 1.25, 2.0), bits=(2, 4, 7, 10))
  def test_bounds_monte_carlo(self, c, bits):
    orders = [2, 4, 8]
    forward, reverse = channel.rec_channel_rdp(clip_ratio=c, bits=bits,
                                                  orders=orders)
    n = 4000 if bits == 10 else 20000
    fwd, fwd_se, rev, rev_se = _monte_carlo(c, bits, orders, n, seed=bits)
    # A bound below estimate - 5 se would be refuted (chance < 1e-6 each).
    np.testing.assert_array_less(fwd - 5 * fwd_se, forward)
    # The reverse integrand is heavy-tailed, so Monte Carlo tends to
    # underestimate; the exact value must still not be refuted by it.
    np.testing.assert_array_less(rev - 5 * rev_se, reverse)

  @parameterized.product(c=(0.3, 1.25, 2.0), bits=(1, 7, 20))
  def test_within_closed_form_caps(self, c, bits):
    orders = np.arange(2, 40)
    forward, _ = channel.rec_channel_rdp(clip_ratio=c, bits=bits,
                                            orders=orders)
    a = orders.astype(float)
    r = c * c
    amgm = a * r / 2 + a * r * (1 + a / 2.0**bits) / (2 * (a - 1))
    np.testing.assert_array_less(forward, amgm + 1e-12)
    np.testing.assert_array_less(forward, bits * math.log(2) + 1e-12)

  def test_large_k_approaches_gaussian(self):
    forward, reverse = channel.rec_channel_rdp(clip_ratio=1.0, bits=20,
                                                  orders=[2, 4])
    gauss = np.array([2, 4]) / 2.0
    np.testing.assert_allclose(forward, gauss, rtol=1e-3)
    np.testing.assert_allclose(reverse, gauss, rtol=1e-3)


class MessageTest(parameterized.TestCase):

  @parameterized.parameters((1.25, 7, 6), (0.8, 4, 3), (2.0, 10, 10))
  def test_bounds_random_splits(self, c, bits, groups):
    orders = [2, 3, 5, 8, 16]
    forward, reverse = channel.message_rdp(
        clip_ratio=c, bits=bits, num_groups=groups, orders=orders)
    rng = np.random.default_rng(0)
    for _ in range(5):
      shares = rng.dirichlet(np.full(groups, 0.5)) * c * c
      total_f = np.zeros(len(orders))
      total_r = np.zeros(len(orders))
      for r_g in shares:
        f_g, r_g_rev = channel.rec_channel_rdp(
            clip_ratio=math.sqrt(r_g), bits=bits, orders=orders)
        total_f += f_g
        total_r += r_g_rev
      np.testing.assert_array_less(total_f, forward + 1e-12)
      np.testing.assert_array_less(total_r, reverse + 1e-12)

  def test_one_group_message_is_close_to_channel(self):
    orders = [2, 4]
    f1, r1 = channel.rec_channel_rdp(clip_ratio=1.25, bits=7,
                                        orders=orders)
    f6, r6 = channel.message_rdp(clip_ratio=1.25, bits=7, num_groups=6,
                                    orders=orders)
    np.testing.assert_allclose(r6, r1)
    self.assertTrue(np.all(f6 >= f1))
    np.testing.assert_allclose(f6, f1, rtol=0.02)


def _substitution_k2_mpmath(c, order):
  """K = 2, v' = -v: D_a(P_v || P_-v) exactly (one-dimensional integral).

  Given the seed only d = xi_1 - xi_2 ~ N(0, 2) matters: P_v(k=1) =
  sigmoid(c d), P_-v(k=1) = sigmoid(-c d).
  """
  mpmath.mp.dps = 30

  def f(x):
    d = mpmath.sqrt(2) * x
    p1 = 1 / (1 + mpmath.exp(-c * d))
    q1 = 1 - p1
    inner = p1**order * q1**(1 - order) + q1**order * p1**(1 - order)
    return inner * mpmath.exp(-x * x / 2) / mpmath.sqrt(2 * mpmath.pi)

  # Beyond |x| = 30 the Gaussian weight (e^-450) outweighs the integrand.
  value = mpmath.quad(f, [-30, -5, 0, 5, 30])
  return float(mpmath.log(value) / (order - 1))


class SubstitutionTest(parameterized.TestCase):

  @parameterized.parameters((0.5, 2), (0.87, 3), (1.25, 4), (2.0, 6))
  def test_bounds_exact_k2_opposite_updates(self, c, order):
    bound = channel.substitution_rdp(clip_ratio=c, bits=1, num_groups=1,
                                        orders=[order])
    self.assertGreaterEqual(bound[0], _substitution_k2_mpmath(c, order))

  @parameterized.parameters((0.5, 7), (1.25, 10), (0.8, 20))
  def test_near_gaussian_substitution(self, c, bits):
    # For the Gaussian mechanism the pair (v, -v) has a (2c)^2 / 2; the
    # triangle bound through P_0 should be within ~15% of that, not below
    # half of it.
    orders = np.array([2, 4, 8, 16])
    bound = channel.substitution_rdp(clip_ratio=c, bits=bits,
                                        num_groups=3, orders=orders)
    gauss = orders * (2 * c)**2 / 2
    self.assertTrue(np.all(bound > 0.5 * gauss))
    self.assertTrue(np.all(bound[:2] < 1.3 * gauss[:2]))

  def test_at_least_the_prior_pair(self):
    orders = [2, 3, 5, 9]
    sub = channel.substitution_rdp(clip_ratio=1.0, bits=7, num_groups=4,
                                      orders=orders)
    forward, reverse = channel.message_rdp(clip_ratio=1.0, bits=7,
                                              num_groups=4, orders=orders)
    self.assertTrue(np.all(sub >= np.minimum(forward, reverse)))


class ArgumentTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ('negative_c', dict(clip_ratio=-1.0), ValueError, 'clip_ratio'),
      ('bool_bits', dict(bits=True), TypeError, 'bits'),
      ('zero_bits', dict(bits=0), ValueError, 'bits'),
      ('fractional_order', dict(orders=[2.5]), ValueError, 'orders'),
      ('order_one', dict(orders=[1]), ValueError, 'orders'),
      ('empty_orders', dict(orders=[]), ValueError, 'orders'),
  )
  def test_bad_arguments(self, override, error, name):
    kwargs = dict(clip_ratio=1.0, bits=7, orders=[2, 3])
    kwargs.update(override)
    with self.assertRaisesRegex(error, name):
      channel.rec_channel_rdp(**kwargs)

  def test_float_integer_orders_accepted(self):
    f1, r1 = channel.rec_channel_rdp(clip_ratio=1.0, bits=4, orders=[2.0])
    f2, r2 = channel.rec_channel_rdp(clip_ratio=1.0, bits=4, orders=[2])
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_array_equal(r1, r2)


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
