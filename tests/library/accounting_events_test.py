"""Tests for tff_dprec.accounting.events: DP-REC's events and their checks."""

import pickle

from absl.testing import absltest
from absl.testing import parameterized
import dp_accounting
import numpy as np

from tff_dprec import accounting
from tff_dprec.accounting import events

_ROUND = dict(population=4000, clients_per_round=40, clip_ratio=1.0, bits=4,
              num_groups=2)


class DpRecEventTest(parameterized.TestCase):

  def test_holds_its_arguments(self):
    event = accounting.DpRecEvent(1.5, 8, 3)
    self.assertIsInstance(event, dp_accounting.DpEvent)
    self.assertEqual((event.clip_ratio, event.bits, event.num_groups),
                     (1.5, 8, 3))
    self.assertEqual(event.total_bits, 24)

  @parameterized.named_parameters(
      ('negative_c', dict(clip_ratio=-1.0), ValueError,
       r'clip_ratio.*-1\.0'),
      ('nan_c', dict(clip_ratio=float('nan')), ValueError, 'clip_ratio'),
      ('str_c', dict(clip_ratio='1'), TypeError, 'clip_ratio'),
      ('zero_bits', dict(bits=0), ValueError, r'bits.*0'),
      ('too_many_bits', dict(bits=4097), ValueError, r'bits.*4097'),
      ('bool_bits', dict(bits=True), TypeError, r'bits.*True'),
      ('float_bits', dict(bits=8.0), TypeError, r'bits.*8\.0'),
      ('zero_groups', dict(num_groups=0), ValueError, r'num_groups.*0'),
      ('float_groups', dict(num_groups=2.0), TypeError,
       r'num_groups.*2\.0'),
  )
  def test_bad_arguments(self, change, error, message):
    kwargs = dict(clip_ratio=1.0, bits=8, num_groups=1)
    with self.assertRaisesRegex(error, message):
      accounting.DpRecEvent(**{**kwargs, **change})

  def test_num_groups_is_required(self):
    # One group is the least conservative guess for a multi-tensor model.
    without_groups = dict(clip_ratio=1.0, bits=8)
    with self.assertRaisesRegex(TypeError, 'num_groups'):
      accounting.DpRecEvent(**without_groups)

  def test_numpy_scalars_are_accepted(self):
    event = accounting.DpRecEvent(np.float32(0.5), np.int64(8), np.int32(2))
    self.assertEqual(event, accounting.DpRecEvent(0.5, 8, 2))


class DpRecRoundEventTest(parameterized.TestCase):

  def test_holds_its_arguments(self):
    event = accounting.DpRecRoundEvent(**_ROUND)
    self.assertIsInstance(event, dp_accounting.DpEvent)
    self.assertEqual(event.draw_rate, 1 / 4000)
    self.assertEqual(event.message_event, accounting.DpRecEvent(1.0, 4, 2))
    self.assertEqual(event.total_bits, 8)

  def test_is_data(self):
    # Frozen, comparable, hashable and picklable, as dp_accounting's events.
    event = accounting.DpRecRoundEvent(**_ROUND)
    self.assertEqual(event, accounting.DpRecRoundEvent(**_ROUND))
    self.assertEqual(hash(event), hash(accounting.DpRecRoundEvent(**_ROUND)))
    self.assertEqual(pickle.loads(pickle.dumps(event)), event)
    with self.assertRaises(AttributeError):
      event.population = 5  # pylint: disable=assigning-non-slot

  @parameterized.named_parameters(
      ('population_zero', dict(population=0), ValueError, r'population.*0'),
      ('population_one', dict(population=1, clients_per_round=1), ValueError,
       r'population.*1'),
      ('population_float', dict(population=4000.0), TypeError,
       r'population.*4000\.0'),
      ('clients_zero', dict(clients_per_round=0), ValueError,
       r'clients_per_round.*0'),
      ('clients_above_population', dict(clients_per_round=4001), ValueError,
       r'clients_per_round.*4001'),
      ('clients_bool', dict(clients_per_round=True), TypeError,
       r'clients_per_round.*True'),
      ('negative_c', dict(clip_ratio=-0.5), ValueError,
       r'clip_ratio.*-0\.5'),
      ('infinite_c', dict(clip_ratio=float('inf')), ValueError,
       r'clip_ratio.*inf'),
      ('zero_bits', dict(bits=0), ValueError, r'bits.*0'),
      ('zero_groups', dict(num_groups=0), ValueError, r'num_groups.*0'),
  )
  def test_bad_arguments(self, change, error, message):
    with self.assertRaisesRegex(error, message):
      accounting.DpRecRoundEvent(**{**_ROUND, **change})


class DpRecRoundEventBuilderTest(parameterized.TestCase):

  def test_bits_and_groups(self):
    self.assertEqual(
        accounting.dp_rec_round_event(clip_ratio=1.0, population=4000,
                                      clients_per_round=40, bits=4,
                                      num_groups=2),
        accounting.DpRecRoundEvent(**_ROUND))

  def test_total_bits_is_one_group(self):
    event = accounting.dp_rec_round_event(clip_ratio=0.5, population=100,
                                          clients_per_round=10,
                                          total_bits=70)
    self.assertEqual(event, accounting.DpRecRoundEvent(100, 10, 0.5, 70, 1))

  @parameterized.named_parameters(
      ('no_bits', dict(bits=None), ValueError, r'bits.*None'),
      ('no_groups', dict(num_groups=None), ValueError, r'num_groups.*None'),
      ('both_sizes', dict(total_bits=8), ValueError, r'total_bits.*8'),
      ('total_bits_zero', dict(bits=None, num_groups=None, total_bits=0),
       ValueError, r'total_bits.*0'),
      ('population_one', dict(population=1, clients_per_round=1),
       ValueError, r'population.*1'),
      ('negative_c', dict(clip_ratio=-1.0), ValueError,
       r'clip_ratio.*-1\.0'),
  )
  def test_bad_arguments(self, change, error, message):
    kwargs = dict(clip_ratio=1.0, population=4000, clients_per_round=40,
                  bits=4, num_groups=2)
    with self.assertRaisesRegex(error, message):
      accounting.dp_rec_round_event(**{**kwargs, **change})


class RatesTest(parameterized.TestCase):

  def test_rates(self):
    self.assertEqual(events.sampling_rate(100, 10), 0.1)
    self.assertEqual(events.draw_rate(100, 10), 0.01)
    self.assertEqual(events.sampling_rate(1, 1), 1.0)

  @parameterized.named_parameters(
      ('population', (0, 1), ValueError, r'population.*0'),
      ('clients', (10, 0), ValueError, r'clients_per_round.*0'),
      ('clients_above', (10, 11), ValueError, r'clients_per_round.*11'),
      ('population_str', ('10', 1), TypeError, "population.*'10'"),
  )
  def test_bad_rates(self, args, error, message):
    with self.assertRaisesRegex(error, message):
      events.sampling_rate(*args)
    with self.assertRaisesRegex(error, message):
      events.draw_rate(*args)

  def test_a_draw_must_be_able_to_miss_the_target(self):
    with self.assertRaisesRegex(ValueError, r'population.*1'):
      events.draw_rate(1, 1)


class ResolveBitsTest(parameterized.TestCase):

  @parameterized.parameters(
      ('min_pld_rdp', 7, 3, None, (7, 3)), ('rdp', 7, 3, None, (7, 3)),
      ('paper', 7, 3, None, (7, 3)), ('paper', None, None, 70, (70, 1)))
  def test_resolves(self, mode, bits, groups, total_bits, expected):
    self.assertEqual(events.resolve_bits(mode, bits, groups, total_bits),
                     expected)

  @parameterized.named_parameters(
      ('accounting', ('exact', 7, 3, None), "accounting.*'exact'"),
      ('total_bits_not_paper', ('min_pld_rdp', None, None, 70),
       r'total_bits.*70'),
      ('both', ('paper', 7, 3, 70), r'total_bits.*70'),
      ('missing', ('min_pld_rdp', 7, None, None), r'num_groups.*None'),
      ('bits_zero', ('min_pld_rdp', 0, 3, None), 'bits'),
  )
  def test_bad_arguments(self, args, message):
    with self.assertRaisesRegex(ValueError, message):
      events.resolve_bits(*args)


if __name__ == '__main__':
  absltest.main()
