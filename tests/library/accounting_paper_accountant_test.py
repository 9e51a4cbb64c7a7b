"""Tests for tff_dprec.accounting.paper_accountant: the paper's Theorem 1."""

import math
import warnings

from absl.testing import parameterized
import numpy as np

import dp_accounting

from tff_dprec import accounting
from tff_dprec.accounting import dp_rec_accountant
from tff_dprec.accounting import rdp_bounds


def _paper_delta(population):
  return accounting.default_delta(population)


class PaperAccountantTest(parameterized.TestCase):
  """Appendix C of the DP-REC paper: clip ratios and their epsilons."""

  @parameterized.named_parameters(
      ('mnist_eps3', 0.545, 100, 10, 1000, 3.0),
      ('mnist_eps6', 0.87, 100, 10, 1000, 6.0),
      ('emnist_eps1', 0.77, 3500, 100, 4000, 1.0),
      ('emnist_eps3', 1.41, 3500, 100, 4000, 3.0),
      ('emnist_eps6', 1.745, 3500, 100, 4000, 6.0),
      ('shakespeare_eps3', 1.435, 660, 66, 200, 3.0),
  )
  def test_reproduces_paper(self, c, population, per_round, rounds, expected):
    eps = accounting.dp_rec_epsilon(
        clip_ratio=c, population=population, clients_per_round=per_round,
        rounds=rounds, delta=_paper_delta(population), total_bits=70,
        accounting='paper')
    self.assertAlmostEqual(eps, expected, delta=0.05)

  def test_stackoverflow_42_bits_is_unreachable(self):
    population = 342477
    with self.assertRaisesRegex(accounting.OverheadExceedsDeltaError,
                                r'at least 43 index bits'):
      accounting.dp_rec_epsilon(
          clip_ratio=1.227, population=population, clients_per_round=60,
          rounds=1500, delta=_paper_delta(population), total_bits=42,
          accounting='paper')

  def test_stackoverflow_48_bits(self):
    population = 342477
    eps = accounting.dp_rec_epsilon(
        clip_ratio=1.227, population=population, clients_per_round=60,
        rounds=1500, delta=_paper_delta(population), total_bits=48,
        accounting='paper')
    self.assertAlmostEqual(eps, 0.94, delta=0.02)

  def test_grouped_messages_warn(self):
    kwargs = dict(clip_ratio=1.0, population=1000, clients_per_round=10,
                  rounds=10, delta=1e-5, accounting='paper')
    with self.assertWarns(accounting.UnprovenPaperBoundWarning) as caught:
      grouped = accounting.dp_rec_epsilon(bits=8, num_groups=8, **kwargs)
    # The line that called `compose`: here dp_rec_epsilon's.
    self.assertEqual(caught.filename, dp_rec_accountant.__file__)
    with warnings.catch_warnings():
      warnings.simplefilter('error', accounting.UnprovenPaperBoundWarning)
      single = accounting.dp_rec_epsilon(total_bits=64, **kwargs)
    self.assertEqual(grouped, single)

  def test_grouped_compose_warns_at_its_caller(self):
    accountant = accounting.DpRecPaperAccountant()
    grouped = accounting.DpRecEvent(clip_ratio=1.0, bits=4, num_groups=2)
    nested = dp_accounting.ComposedDpEvent(
        [dp_accounting.SelfComposedDpEvent(grouped, 3)])
    for event in (grouped, nested):
      with self.assertWarns(accounting.UnprovenPaperBoundWarning) as caught:
        accountant.compose(event)
      self.assertEqual(caught.filename, __file__)  # This file's line.
      self.assertIn('num_groups=2', str(caught.warning))
    with warnings.catch_warnings():
      warnings.simplefilter('error', accounting.UnprovenPaperBoundWarning)
      accountant.compose(
          accounting.DpRecEvent(clip_ratio=1.0, bits=8, num_groups=1))

  def test_numerical_reverse_divergence_is_tighter_but_close(self):
    kwargs = dict(clip_ratio=1.41, population=3500, clients_per_round=100,
                  rounds=4000, delta=_paper_delta(3500), total_bits=70,
                  accounting='paper')
    paper = accounting.dp_rec_epsilon(**kwargs)
    numerical = accounting.dp_rec_epsilon(
        reverse_divergence='numerical', **kwargs)
    self.assertLess(numerical, paper)
    self.assertGreater(numerical, 0.9 * paper)

  def test_local_epsilon_closed_form(self):
    c, delta, bits, rounds = 0.3, 1e-5, 64, 3
    expected = min(
        rounds * (lam + 1) * c * c -
        math.log(delta - 12 * 2.0**-bits * rounds * math.exp(c * c)) / lam
        for lam in np.asarray(rdp_bounds.PAPER_ORDERS) - 1)
    eps = accounting.dp_rec_local_epsilon(clip_ratio=c, delta=delta,
                                          total_bits=bits, rounds=rounds,
                                          accounting='paper')
    self.assertAlmostEqual(eps, expected, places=9)

  def test_overhead_sums_per_event(self):
    accountant = accounting.make_dp_rec_accountant(accounting='paper')
    accountant.compose(accounting.DpRecEvent(1.0, 20, 1), 3)
    accountant.compose(accounting.DpRecEvent(0.5, 30, 1))
    expected = 12 * (3 * math.e * 2.0**-20 + math.exp(0.25) * 2.0**-30)
    self.assertAlmostEqual(accountant.overhead, expected, places=15)


if __name__ == '__main__':
  import absl.testing.absltest  # pylint: disable=g-import-not-at-top
  absl.testing.absltest.main()
