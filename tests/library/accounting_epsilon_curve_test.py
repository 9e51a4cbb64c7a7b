"""Tests for tff_dprec.accounting.epsilon_curve: a run's epsilon per round."""

from unittest import mock
import warnings

from absl.testing import absltest
from absl.testing import parameterized
import dp_accounting

from tests import support
from tff_dprec import accounting
from tff_dprec.accounting import dp_rec_accountant


class EpsilonCurveTest(parameterized.TestCase):

  @parameterized.named_parameters(
      # An SO-LR-like federation (tiny q) and a small one (q = 0.1).
      ('pld_tiny_q', dict(clip_ratio=1.3, bits=7, num_groups=1,
                          population=342477, clients_per_round=40),
       (1, 2, 3, 7, 20)),
      ('pld_groups', dict(clip_ratio=0.9, bits=6, num_groups=10,
                          population=100, clients_per_round=10),
       (1, 5, 30, 150)),
      ('rdp', dict(clip_ratio=0.9, bits=6, num_groups=3, population=1000,
                   clients_per_round=20, accounting='rdp'), (1, 4, 50)),
      ('paper', dict(clip_ratio=0.5, total_bits=70, population=100,
                     clients_per_round=10, accounting='paper'), (1, 9)),
  )
  def test_equals_dp_rec_epsilon_round_by_round(self, kwargs, rounds):
    kwargs = dict(kwargs, delta=kwargs['population']**-1.1)
    curve = accounting.DpRecEpsilonCurve(**kwargs)
    for r in rounds:  # In order, then again out of order.
      self.assertEqual(curve.epsilon(r),
                       accounting.dp_rec_epsilon(rounds=r, **kwargs))
    self.assertEqual(accounting.dp_rec_epsilon_curve(rounds=rounds[::-1],
                                                **kwargs),
                     [accounting.dp_rec_epsilon(rounds=r, **kwargs)
                      for r in rounds[::-1]])

  def test_zero_rounds_and_zero_clip(self):
    kwargs = dict(bits=7, num_groups=1, population=1000,
                  clients_per_round=10, delta=1e-5)
    self.assertEqual(accounting.DpRecEpsilonCurve(
        clip_ratio=1.0, **kwargs).epsilon(0), 0.0)
    self.assertEqual(accounting.dp_rec_epsilon_curve(
        clip_ratio=0.0, rounds=[1, 10], **kwargs), [0.0, 0.0])

  def test_follows_the_accountant_dp_rec_epsilon_uses(self):
    # Tests that swap DP-REC's PLD accountant for its RDP one (support)
    # get the RDP values from the curve too.
    kwargs = dict(clip_ratio=1.0, bits=5, num_groups=1, population=5000,
                  clients_per_round=20, delta=1e-5)
    with support.dp_rec_rdp_for_pld():
      curve = accounting.DpRecEpsilonCurve(**kwargs)
      self.assertEqual(curve.epsilon(3), accounting.dp_rec_epsilon(
          rounds=3, accounting='rdp', **kwargs))

  @parameterized.parameters(('min_pld_rdp', 1), ('rdp', 1), ('paper', 4))
  def test_composes_each_round_into_one_accountant(self, mode, accountants):
    # The exact accountings compose each new round into the accountant
    # they keep; the paper's (composition in steps not exact) starts again.
    kwargs = dict(clip_ratio=0.5, population=100, clients_per_round=10,
                  delta=1e-4, accounting=mode)
    kwargs.update(dict(total_bits=70) if mode == 'paper' else
                  dict(bits=6, num_groups=1))
    made = []
    real = dp_rec_accountant.make_dp_rec_accountant

    def make(**make_kwargs):
      made.append(real(**make_kwargs))
      return made[-1]

    with mock.patch.object(dp_rec_accountant, 'make_dp_rec_accountant',
                           make):
      curve = accounting.DpRecEpsilonCurve(**kwargs)
      values = curve.epsilons([1, 2, 3, 2, 3])
    self.assertLen(made, accountants)
    event = accounting.dp_rec_round_event(
        **{k: v for k, v in kwargs.items()
           if k not in ('delta', 'accounting')})
    # Three rounds composed in all (not 1 + 2 + 3).
    self.assertEqual(made[-1].ledger,
                     dp_accounting.SelfComposedDpEvent(event, 3))
    self.assertEqual(values[3:], values[1:3])  # Kept values.
    self.assertEqual(values, sorted(values[:3]) + values[1:3])

  def test_fewer_rounds_than_composed_start_again(self):
    kwargs = dict(clip_ratio=0.5, population=100, clients_per_round=10,
                  delta=1e-4, bits=6, num_groups=1)
    curve = accounting.DpRecEpsilonCurve(**kwargs)
    self.assertEqual(curve.epsilons([5, 2, 7]), [
        accounting.dp_rec_epsilon(rounds=r, **kwargs) for r in (5, 2, 7)])

  @parameterized.named_parameters(
      ('clip', dict(clip_ratio=-1.0), ValueError, 'clip_ratio'),
      ('delta', dict(delta=0.0), ValueError, 'delta'),
      ('population', dict(population=1), ValueError, 'population'),
      ('groups', dict(num_groups=None), ValueError, 'num_groups'),
      ('accounting', dict(accounting='sound'), ValueError, 'accounting'),
  )
  def test_bad_arguments(self, change, error, message):
    kwargs = dict(clip_ratio=1.0, bits=7, num_groups=1, population=1000,
                  clients_per_round=10, delta=1e-5)
    with self.assertRaisesRegex(error, message):
      accounting.DpRecEpsilonCurve(**{**kwargs, **change})
    curve = accounting.DpRecEpsilonCurve(**kwargs)
    with self.assertRaisesRegex(ValueError, 'rounds'):
      curve.epsilon(-1)


if __name__ == '__main__':
  warnings.simplefilter('ignore', accounting.UnprovenPaperBoundWarning)
  absltest.main()
