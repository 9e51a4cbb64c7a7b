"""Tests for tff_dprec.accounting.rdp_accountant: the Renyi accounting."""

from absl.testing import parameterized
import numpy as np

from tff_dprec import accounting
from tff_dprec.accounting import channel
from tff_dprec.accounting import rdp_bounds


def _paper_delta(population):
  return accounting.default_delta(population)


class RdpAccountantTest(parameterized.TestCase):

  def test_local_epsilon_from_channel(self):
    # One release, no amplification: eps from the message RDP directly (at
    # the clip ratio plus the float32 margin of 2^-20).
    c, bits, groups, delta = 1.0, 7, 4, 1e-5
    forward, reverse = channel.message_rdp(
        clip_ratio=c * (1 + 2.0**-20), bits=bits, num_groups=groups,
        orders=rdp_bounds.PROVEN_ORDERS)
    from dp_accounting.rdp import rdp_privacy_accountant  # pylint: disable=g-import-not-at-top
    expected = rdp_privacy_accountant.compute_epsilon(
        np.asarray(rdp_bounds.PROVEN_ORDERS, float),
        np.maximum(forward, reverse), delta)[0]
    eps = accounting.dp_rec_local_epsilon(clip_ratio=c, delta=delta,
                                          bits=bits, num_groups=groups)
    self.assertAlmostEqual(eps, expected, places=12)

  def test_round_uses_zhu_wang_per_draw(self):
    c, bits, groups, n, b = 1.0, 7, 3, 500, 5
    orders = np.asarray(rdp_bounds.PROVEN_ORDERS)
    per_draw = rdp_bounds.proven_rdp(1 / n, c, bits, groups, orders)
    accountant = accounting.make_dp_rec_accountant()
    accountant.compose(accounting.dp_rec_round_event(
        clip_ratio=c, bits=bits, num_groups=groups, population=n,
        clients_per_round=b), 7)
    np.testing.assert_allclose(accountant.rdp, 7 * b * per_draw)

  def test_subsampling_amplifies(self):
    common = dict(clip_ratio=0.5, delta=1e-5, bits=8, num_groups=4)
    local = accounting.dp_rec_local_epsilon(rounds=10, **common)
    central = accounting.dp_rec_epsilon(
        population=1000, clients_per_round=1, rounds=10, **common)
    self.assertLess(central, local)

  def test_stackoverflow_at_paper_clip_exceeds_paper_epsilon(self):
    # SO-LR at the paper's c = 1.227 (6 groups x 7 bits): the server sees
    # each message, so sampling compares the target's message with another
    # client's (substitution), not with the prior. The paper's epsilon 1
    # does not hold; it is about the subsampled Gaussian's at sensitivity 2c.
    population = 342477
    kwargs = dict(population=population, clients_per_round=60, rounds=1500,
                  delta=_paper_delta(population))
    eps = accounting.dp_rec_epsilon(clip_ratio=1.227, bits=7, num_groups=6,
                                    accounting='rdp', **kwargs)
    gauss_2c = accounting.dp_fedavg_epsilon(
        noise_multiplier=1 / (2 * 1.227), accounting='rdp',
        **{**kwargs, 'clients_per_round': 1, 'rounds': 60 * 1500})
    self.assertGreater(eps, 2.0)
    self.assertGreater(eps, 0.95 * gauss_2c)
    self.assertLess(eps, 1.3 * gauss_2c)

  @parameterized.parameters((0.5, 1000, 10, 100), (1.0, 3500, 100, 200))
  def test_many_bits_near_gaussian_substitution(self, c, n, b, t):
    # With K = 2^20 the decoded candidate is nearly a sample of N(v, s^2):
    # the release is at least about as revealing as the Gaussian mechanism
    # with sensitivity 2c (substitution), and the bound is not far above.
    kwargs = dict(population=n, rounds=t, delta=n**-1.1)
    eps = accounting.dp_rec_epsilon(clip_ratio=c, bits=20, num_groups=1,
                                    clients_per_round=b, accounting='rdp',
                                    **kwargs)
    gauss_2c = accounting.dp_fedavg_epsilon(
        noise_multiplier=1 / (2 * c), clients_per_round=1, accounting='rdp',
        **{
            **kwargs, 'rounds': b * t})
    self.assertGreater(eps, 0.99 * gauss_2c)
    self.assertLess(eps, 1.3 * gauss_2c)

  @parameterized.named_parameters(
      ('total_bits', dict(total_bits=64), 'paper mode'),
      ('missing_groups', dict(bits=8), 'num_groups'),
      ('missing_bits', dict(num_groups=8), 'bits'),
      ('both', dict(bits=8, num_groups=8, total_bits=64), 'total_bits'),
  )
  def test_bits_arguments(self, bits_kwargs, message):
    kwargs = dict(clip_ratio=1.0, population=100, clients_per_round=10,
                  rounds=10, delta=1e-5)
    with self.assertRaisesRegex(ValueError, message):
      accounting.dp_rec_epsilon(**kwargs, **bits_kwargs)

  def test_reverse_divergence_is_paper_only(self):
    with self.assertRaisesRegex(ValueError, 'reverse_divergence'):
      accounting.make_dp_rec_accountant(reverse_divergence='numerical')

  def test_non_integer_orders_rejected(self):
    with self.assertRaisesRegex(ValueError, 'integers'):
      accounting.make_dp_rec_accountant(orders=[1.5, 2.0])


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
