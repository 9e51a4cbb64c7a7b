"""Tests for tff_dprec.accounting.baselines (DP-FedAvg, DDGauss)."""

import math

from absl.testing import parameterized
import dp_accounting
import numpy as np

from tff_dprec import accounting
from tff_dprec.accounting import baselines
from tff_dprec.accounting import rdp_bounds


def _paper_delta(population):
  return population**-1.1


class DpFedAvgTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ('mnist_eps3', 3.8, 100, 10, 1000, 3.0),
      ('emnist_eps1', 5.0, 3500, 100, 1500, 1.0),
      ('emnist_eps3', 1.85, 3500, 100, 1500, 3.0),
      ('emnist_eps6', 1.15, 3500, 100, 1500, 6.0),
      ('shakespeare_eps3', 2.15, 660, 66, 200, 3.0),
      ('stackoverflow_eps1', 0.957, 342477, 60, 1500, 1.0),
  )
  def test_classic_conversion_reproduces_paper(self, z, population, per_round,
                                               rounds, expected):
    eps = accounting.dp_fedavg_epsilon(
        noise_multiplier=z, population=population,
        clients_per_round=per_round, rounds=rounds,
        delta=_paper_delta(population), conversion='classic', accounting='rdp')
    self.assertAlmostEqual(eps, expected, delta=0.1)

  def test_mnist_eps6_noise_in_paper_is_inconsistent(self):
    # The paper pairs z = 2.15 with epsilon 6 on MNIST (q = 0.1, 1000 rounds).
    # The classic conversion gives 6.24 (any order grid only raises it), so
    # the paper's figure is not reproducible; z ~ 2.2 gives epsilon 6.
    eps = accounting.dp_fedavg_epsilon(
        noise_multiplier=2.15, population=100, clients_per_round=10,
        rounds=1000, delta=_paper_delta(100), conversion='classic',
        accounting='rdp')
    self.assertAlmostEqual(eps, 6.24, delta=0.02)
    z = accounting.calibrate_dp_fedavg_noise(
        target_epsilon=6.0, population=100, clients_per_round=10, rounds=1000,
        delta=_paper_delta(100), conversion='classic', accounting='rdp')
    self.assertAlmostEqual(z, 2.2, delta=0.05)

  def test_tight_conversion_is_tighter(self):
    kwargs = dict(noise_multiplier=1.0, population=1000, clients_per_round=10,
                  rounds=100, delta=1e-5)
    tight = accounting.dp_fedavg_epsilon(accounting='rdp', **kwargs)
    classic = accounting.dp_fedavg_epsilon(conversion='classic',
                                           accounting='rdp', **kwargs)
    self.assertLess(tight, classic)
    # The tight default matches dp_accounting's own RDP accountant.
    accountant = dp_accounting.rdp.RdpAccountant(
        orders=rdp_bounds.PAPER_ORDERS)
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(
            0.01, dp_accounting.GaussianDpEvent(1.0)), 100)
    self.assertAlmostEqual(tight, accountant.get_epsilon(1e-5), places=9)

  def test_noise_round_trip(self):
    kwargs = dict(population=3500, clients_per_round=100, rounds=1500,
                  delta=_paper_delta(3500))
    z = accounting.calibrate_dp_fedavg_noise(target_epsilon=3.0, **kwargs)
    self.assertLessEqual(
        accounting.dp_fedavg_epsilon(noise_multiplier=z, **kwargs), 3.0)
    self.assertGreater(
        accounting.dp_fedavg_epsilon(noise_multiplier=z * 0.999, **kwargs),
        3.0)

  @parameterized.parameters((0.01, 1.0, 100), (40 / 342477, 0.8, 50),
                            (0.1, 3.0, 1000), (0.5, 0.7, 3))
  def test_private_rdp_function_is_rdp_accountants(self, q, z, rounds):
    # baselines.subsampled_gaussian_rdp calls dp_accounting's private
    # _compute_rdp_poisson_subsampled_gaussian (0.4.3 exposes neither it nor
    # RdpAccountant's RDP vector): this fails if dp_accounting renames it or
    # changes what RdpAccountant composes for this event.
    orders = np.asarray(accounting.baselines.DEFAULT_ORDERS, np.float64)
    rdp = rounds * accounting.baselines.subsampled_gaussian_rdp(q, z, orders)
    accountant = dp_accounting.rdp.RdpAccountant(list(orders))
    accountant.compose(dp_accounting.PoissonSampledDpEvent(
        q, dp_accounting.GaussianDpEvent(z)), rounds)
    delta = 1e-6
    self.assertEqual(
        accounting.baselines.rdp_to_epsilon(orders, rdp, delta, 'tight'),
        accountant.get_epsilon(delta))

  def test_tiny_sampling_rate_and_huge_noise(self):
    # dp_accounting's RdpAccountant refuses its own RDP here (-2.6e-16 at
    # q = 4 / 342,477, z = 1e4, the calibration's first bracket end); the
    # accountant clamps it at 0, and agrees with RdpAccountant elsewhere.
    setting = dict(population=342_477, clients_per_round=4, rounds=3,
                   delta=342_477**-1.1, accounting='rdp')
    self.assertEqual(accounting.dp_fedavg_epsilon(noise_multiplier=1e4,
                                                 **setting), 0.0)
    for z in (0.5, 2.0):
      accountant = dp_accounting.rdp.RdpAccountant(
          list(accounting.baselines.DEFAULT_ORDERS))
      accountant.compose(dp_accounting.PoissonSampledDpEvent(
          4 / 342_477, dp_accounting.GaussianDpEvent(z)), 3)
      self.assertAlmostEqual(
          accounting.dp_fedavg_epsilon(noise_multiplier=z, **setting),
          accountant.get_epsilon(setting['delta']), places=12)

  @parameterized.parameters((0.9, 0.01, 1e-3), (0.6, 0.05, 1e-3),
                            (1.3, 0.2, 2e-3))
  def test_pld_is_dp_accountings_to_the_bit(self, z, q, discretization):
    # The one-round PLD is cached; asked for in any order of rounds, epsilon
    # is what dp_accounting's PLDAccountant gives, exactly.
    from dp_accounting.pld import pld_privacy_accountant  # pylint: disable=g-import-not-at-top
    from tff_dprec.accounting import baselines  # pylint: disable=g-import-not-at-top
    event = dp_accounting.PoissonSampledDpEvent(
        q, dp_accounting.GaussianDpEvent(z))
    for rounds in (3, 1, 7, 3):
      accountant = pld_privacy_accountant.PLDAccountant(
          value_discretization_interval=discretization)
      accountant.compose(event, rounds)
      for delta in (1e-5, 1e-8):
        self.assertEqual(
            baselines._composed_pld(  # pylint: disable=protected-access
                q, z, discretization, rounds).get_epsilon_for_delta(delta),
            accountant.get_epsilon(delta))

  def test_bad_conversion(self):
    with self.assertRaisesRegex(ValueError, 'conversion'):
      accounting.dp_fedavg_epsilon(
          noise_multiplier=1.0, population=100, clients_per_round=10,
          rounds=10, delta=1e-5, conversion='fast')


class DDGaussTest(parameterized.TestCase):

  _FEMNIST = dict(l2_clip=0.1, clients_per_round=100, population=3400,
                  rounds=1500, delta=3400**-1.1, dimension=1018174)

  @parameterized.parameters((16, 0.0, 'dft', 1001), (12, math.exp(-0.5), 'hd',
                                                      3000))
  def test_params_mirror_tff(self, bits, beta, rotation_type, dim):
    # Independent check against TFF's own (private) helpers.
    from tensorflow_federated.python.aggregators import discretization  # pylint: disable=g-import-not-at-top
    from tensorflow_federated.python.aggregators import distributed_dp  # pylint: disable=g-import-not-at-top
    p = baselines.ddgauss_params(noise_multiplier=1.0, l2_clip=1.0,
                                  bits=bits, clients_per_round=50,
                                  dimension=dim, beta=beta,
                                  rotation_type=rotation_type)
    padded = 1002 if rotation_type == 'dft' else 4096
    self.assertEqual(p.padded_dim, padded)
    self.assertAlmostEqual(p.local_stddev, 1.0 / math.sqrt(50))
    k = distributed_dp._clip_prob_to_num_stddevs(1e-4)  # pylint: disable=protected-access
    scale = float(distributed_dp._heuristic_scale_factor(  # pylint: disable=protected-access
        p.local_stddev, 1.0, bits, 50, padded, k))
    self.assertAlmostEqual(p.scale, scale, delta=1e-6 * scale)
    inflated = float(discretization.inflated_l2_norm_bound(
        l2_norm_bound=1.0, gamma=1.0 / scale, beta=beta, dim=padded))
    self.assertAlmostEqual(p.l2_sensitivity, (inflated + 1e-5) * scale,
                           delta=1e-5 * p.l2_sensitivity)

  def test_approaches_continuous_gaussian_with_many_bits(self):
    # With a fine grid (many bits) and enough noise, tau -> 0 and the rounding
    # inflation vanishes: the RDP is the Gaussian's with central noise z.
    # DDGauss uses a looser subsampling bound, so it is above but close.
    common = dict(population=1000, clients_per_round=10, rounds=100,
                  delta=1e-5)
    gauss = accounting.dp_fedavg_epsilon(noise_multiplier=2.0,
                                         accounting='rdp', **common)
    ddg = accounting.ddgauss_epsilon(noise_multiplier=2.0, l2_clip=1.0,
                                     bits=24, dimension=100, **common)
    self.assertGreaterEqual(ddg, gauss)
    self.assertLess(ddg, 1.3 * gauss)

  def test_rounding_inflation_grows_as_bits_shrink(self):
    eps = [
        accounting.ddgauss_epsilon(noise_multiplier=2.0, bits=b,
                                   **self._FEMNIST) for b in (20, 16, 12)
    ]
    self.assertLess(eps[0], eps[1])
    self.assertLess(eps[1], eps[2])

  def test_emnist_eps1_unreachable_at_16_bits(self):
    with self.assertRaisesRegex(accounting.TargetUnreachableError,
                                'cannot reach target_epsilon=1'):
      accounting.calibrate_ddgauss_noise(target_epsilon=1.0, bits=16,
                                         **self._FEMNIST)

  def test_calibration_round_trip(self):
    z = accounting.calibrate_ddgauss_noise(target_epsilon=3.0, bits=16,
                                           **self._FEMNIST)
    self.assertLessEqual(
        accounting.ddgauss_epsilon(noise_multiplier=z, bits=16,
                                   **self._FEMNIST), 3.0)
    self.assertGreater(
        accounting.ddgauss_epsilon(noise_multiplier=z * 0.99, bits=16,
                                   **self._FEMNIST), 3.0)

  def test_refuses_configurations_tff_refuses(self):
    with self.assertRaisesRegex(ValueError, 'bits=4 is too small'):
      baselines.ddgauss_params(noise_multiplier=1.0, l2_clip=1.0, bits=4,
                                clients_per_round=100, dimension=10)


class DpFedAvgPldTest(parameterized.TestCase):

  @parameterized.parameters(
      (0.01, 0.893, 10, 4000), (60 / 342477, 0.957, 1500, 342477),
      (0.1, 1.0, 30, 100), (0.01, 3.0, 10, 4000))
  def test_within_three_percent_and_never_below(self, q, z, t, n):
    from dp_accounting.pld import privacy_loss_distribution  # pylint: disable=g-import-not-at-top
    delta = n**-1.1
    b = round(q * n)
    eps = accounting.dp_fedavg_epsilon(noise_multiplier=z, population=n,
                                       clients_per_round=b, rounds=t,
                                       delta=delta)
    exact = privacy_loss_distribution.from_gaussian_mechanism(
        z, sampling_prob=b / n, value_discretization_interval=2e-5
    ).self_compose(t).get_epsilon_for_delta(delta)
    # The 2e-5 grid is itself pessimistic, within 1e-3 of exact here.
    self.assertGreaterEqual(eps, exact * (1 - 1e-3))
    self.assertLessEqual(eps, exact * 1.03)

  def test_huge_epsilon_skips_the_pld(self):
    # z = 0.01: RDP epsilon in the thousands; the PLD (minutes there) is
    # skipped and the RDP value, also a bound, returned.
    kwargs = dict(noise_multiplier=0.01, population=100, clients_per_round=20,
                  rounds=2, delta=1e-5)
    rdp = accounting.dp_fedavg_epsilon(accounting='rdp', **kwargs)
    self.assertGreater(rdp, accounting.baselines.PLD_MAX_RDP_EPSILON)
    self.assertEqual(accounting.dp_fedavg_epsilon(**kwargs), rdp)

  def test_rdp_accounting_and_conversions(self):
    kwargs = dict(noise_multiplier=0.9, population=4000, clients_per_round=40,
                  rounds=10, delta=1e-5)
    with self.assertRaisesRegex(ValueError, 'accounting'):
      accounting.dp_fedavg_epsilon(accounting='sound', **kwargs)
    self.assertLessEqual(accounting.dp_fedavg_epsilon(**kwargs),
                         accounting.dp_fedavg_epsilon(accounting='rdp',
                                                      **kwargs))
    with self.assertRaisesRegex(ValueError, 'conversion'):
      accounting.calibrate_dp_fedavg_noise(
          target_epsilon=1.0, population=4000, clients_per_round=40,
          rounds=10, delta=1e-5, conversion='classic')

  def test_main_job_round_one_under_half(self):
    kwargs = dict(population=4000, clients_per_round=40, delta=4000**-1.1)
    z = accounting.calibrate_dp_fedavg_noise(target_epsilon=1.0, rounds=10,
                                             **kwargs)
    self.assertLess(z, 0.7)  # RDP: 0.893.
    self.assertLess(accounting.dp_fedavg_epsilon(
        noise_multiplier=z, rounds=1, **kwargs), 0.5)
    self.assertLessEqual(accounting.dp_fedavg_epsilon(
        noise_multiplier=z, rounds=10, **kwargs), 1.0)
