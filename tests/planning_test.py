"""Tests for experiments.runner.planning: the planner through the cache."""

import os
import types
from unittest import mock

from absl.testing import absltest
import numpy as np
import tensorflow_federated as tff

from experiments.data import task_registry
from experiments.runner import calibration_cache
from experiments.runner import config as config_lib
from experiments.runner import planning
from experiments.runner import registry
from tff_dprec import accounting
from tff_dprec.plan import markdown as plan_markdown
from tests import support

_AGGREGATORS = ('dp_rec', 'dp_fedavg', 'ddgauss16')
_CALIBRATIONS = ('calibrate_clip_ratio', 'calibrate_dp_fedavg_noise',
                 'calibrate_ddgauss_noise')
_EPSILONS = ('dp_rec_epsilon', 'dp_fedavg_epsilon', 'ddgauss_epsilon')


class PlanningTest(absltest.TestCase):
  """A small federation (N=2000, B=10, T=5, epsilon 2, d=100), as a run."""

  def setUp(self):
    super().setUp()
    folder = self.create_tempdir().full_path
    for patcher in (
        mock.patch.dict(os.environ, {calibration_cache.ENV: folder}),
        # A fresh process: nothing checked yet.
        mock.patch.object(calibration_cache, '_CHECKED', set()),
        # What is under test (what is calibrated, cached, checked and
        # equal) does not depend on the accountant's values.
        support.dp_rec_rdp_for_pld()):
      patcher.start()
      self.addCleanup(patcher.stop)
    self.task = types.SimpleNamespace(
        name='small', population=2000,
        defaults=task_registry.get('stackoverflow_lr').defaults)
    self.config = config_lib.RunConfig(
        task='stackoverflow_lr', aggregators=_AGGREGATORS, rounds=5,
        clients_per_round=10, target_epsilon=2.0).resolved(self.task)

  def _calibrate_aggregators(self):
    """The run's aggregators, as `run_setup.calibrate` builds them."""
    c = self.config
    return {name: registry.build(
        name, value_type=tff.TensorType(np.float32, [100]),
        population=self.task.population,
        clients_per_round=c.clients_per_round, rounds=c.rounds,
        target_epsilon=c.target_epsilon, delta=c.delta, bits=c.bits,
        grouping=c.grouping, noise_stddev=c.noise_stddev,
        l2_clip=c.l2_clip, record_messages=False, accounting=c.accounting)
            for name in _AGGREGATORS}

  def _plan_counting(self, dp_rec_plan, names):
    """(plan_for_run's result, {name: calls}) for `accounting`'s `names`."""
    patchers = [mock.patch.object(accounting, n, wraps=getattr(accounting, n))
                for n in names]
    mocks = [p.start() for p in patchers]
    try:
      result = planning.plan_for_run(self.task, self.config, dp_rec_plan)
    finally:
      for p in patchers:
        p.stop()
    return result, {n: m.call_count for n, m in zip(names, mocks)}

  def test_a_second_planning_calibrates_nothing_and_agrees(self):
    dp_rec_plan = self._calibrate_aggregators()['dp_rec']
    first, calls = self._plan_counting(dp_rec_plan, _CALIBRATIONS)
    # DP-FedAvg under RDP and the break-even's clients per round are the
    # planner's own; DP-REC, DP-FedAvg and DDGauss at B are the run's.
    self.assertEqual(calls['calibrate_dp_fedavg_noise'], 1)
    self.assertEqual(calls['calibrate_ddgauss_noise'], 0)
    self.assertTrue(first.dp_rec.break_even_searched)
    self.assertIsNotNone(first.dp_rec.break_even)
    # The planner's own values, read back from the cache, are checked
    # against the target: DP-REC's c at B' (the break-even's outcome is
    # cached) and DP-FedAvg's z under RDP; the run's were checked before.
    checks = dict(dict.fromkeys(_CALIBRATIONS + _EPSILONS, 0),
                  dp_rec_epsilon=1, dp_fedavg_epsilon=1)
    second, calls = self._plan_counting(dp_rec_plan,
                                        _CALIBRATIONS + _EPSILONS)
    self.assertEqual(calls, checks)
    self.assertEqual(second, first)
    # Each once per process: a third planning evaluates nothing.
    third, calls = self._plan_counting(dp_rec_plan,
                                       _CALIBRATIONS + _EPSILONS)
    self.assertEqual(calls, dict.fromkeys(_CALIBRATIONS + _EPSILONS, 0))
    self.assertEqual(third, first)
    # What a run prints before training: this plan, each line prefixed.
    lines = []
    self.assertEqual(planning.print_plan(self.task, self.config, dp_rec_plan,
                                         lines.append), first)
    self.assertEqual(lines, [
        '[small] The planner (python -m tff_dprec.plan) at this setting, '
        'before training:'] + [f'[small] {line}'
                               for line in plan_markdown.format_plan(first)])
    self.assertTrue(any('DP-REC break-even:' in line for line in lines))
    # Another process with the same cache, as the main job run again: the
    # run's aggregators check their values, then the planner its own.
    calibration_cache._CHECKED.clear()
    self._calibrate_aggregators()
    fourth, calls = self._plan_counting(dp_rec_plan,
                                        _CALIBRATIONS + _EPSILONS)
    self.assertEqual(calls, checks)
    self.assertEqual(fourth, first)
    with mock.patch.dict(os.environ, {calibration_cache.ENV: 'off'}):
      self.assertEqual(planning.plan_for_run(self.task, self.config,
                                             dp_rec_plan), first)

  def test_a_cached_break_even_that_misses_is_searched_again(self):
    dp_rec_plan = self._calibrate_aggregators()['dp_rec']
    first = planning.plan_for_run(self.task, self.config, dp_rec_plan)
    found = first.dp_rec.break_even
    calibration_cache._CHECKED.clear()
    # A stored B' one client lower misses DP-FedAvg's noise (B' is the
    # smallest hit): the search runs again and finds B'.
    with mock.patch.object(calibration_cache, '_read',
                           side_effect=_lowering(found.clients_per_round)):
      again = planning.plan_for_run(self.task, self.config, dp_rec_plan)
    self.assertEqual(again, first)


def _lowering(clients):
  """`calibration_cache._read` with a stored break-even one client lower."""
  read = calibration_cache._read

  def fake(path):
    found, value = read(path)
    if found and isinstance(value, list) and value[0] == clients:
      return True, [clients - 1, value[1]]
    return found, value
  return fake


if __name__ == '__main__':
  absltest.main()
