"""Tests for experiments.runner.planning: the library's planner, memoised."""

import json
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
from tff_dprec import plan as plan_lib
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

  def _plan_counting(self, dp_rec_aggregator, names):
    """(plan_for_run's result, {name: calls}) for the accountant's `names`."""
    patchers = [mock.patch.object(accounting, n, wraps=getattr(accounting, n))
                for n in names]
    mocks = [p.start() for p in patchers]
    try:
      result = planning.plan_for_run(self.task, self.config,
                                     dp_rec_aggregator)
    finally:
      for p in patchers:
        p.stop()
    return result, {n: m.call_count for n, m in zip(names, mocks)}

  def test_the_library_planner_memoised_and_printed(self):
    dp_rec_aggregator = self._calibrate_aggregators()['dp_rec']
    # The library's planner, with its own calibrations.
    with mock.patch.dict(os.environ, {calibration_cache.ENV: 'off'}):
      direct = plan_lib.plan(**planning.planner_arguments(
          self.task, self.config, dp_rec_aggregator))
    first, calls = self._plan_counting(dp_rec_aggregator, _CALIBRATIONS)
    self.assertEqual(first, direct)
    self.assertGreater(calls['calibrate_clip_ratio'], 0)
    self.assertTrue(first.dp_rec.break_even_searched)
    self.assertIsNotNone(first.dp_rec.break_even)
    # Planned again (this process or another, the same cache): read back
    # whole, nothing calibrated or evaluated, equal in every field.
    second, calls = self._plan_counting(dp_rec_aggregator,
                                        _CALIBRATIONS + _EPSILONS)
    self.assertEqual(calls, dict.fromkeys(_CALIBRATIONS + _EPSILONS, 0))
    self.assertEqual(second, first)
    # What a run prints before training: this plan, each line prefixed.
    lines = []
    self.assertEqual(planning.print_plan(self.task, self.config,
                                         dp_rec_aggregator, lines.append),
                     first)
    self.assertEqual(lines, [
        '[small] The planner (python -m tff_dprec.plan) at this setting, '
        'before training:'] + [f'[small] {line}'
                               for line in plan_markdown.format_plan(first)])
    self.assertTrue(any('DP-REC break-even:' in line for line in lines))

  def test_another_planner_or_setting_is_planned_again(self):
    dp_rec_aggregator = self._calibrate_aggregators()['dp_rec']
    first = planning.plan_for_run(self.task, self.config, dp_rec_aggregator)
    # The planner's source changed: its memo is not used.
    with mock.patch.object(planning, '_planner_fingerprint',
                           return_value='another planner'):
      _, calls = self._plan_counting(dp_rec_aggregator, _CALIBRATIONS)
    self.assertGreater(calls['calibrate_clip_ratio'], 0)
    # Another target: planned afresh, and not the first plan.
    other = config_lib.RunConfig(**{**self.config.asdict(),
                                    'target_epsilon': 4.0})
    again = planning.plan_for_run(self.task, other, dp_rec_aggregator)
    self.assertEqual(again.federation.target_epsilon, 4.0)
    self.assertNotEqual(again, first)

  def test_an_unreadable_memo_is_planned_again(self):
    dp_rec_aggregator = self._calibrate_aggregators()['dp_rec']
    first = planning.plan_for_run(self.task, self.config, dp_rec_aggregator)
    folder = os.path.join(os.environ[calibration_cache.ENV], 'plans')
    (name,) = os.listdir(folder)
    with open(os.path.join(folder, name), 'w') as f:
      f.write('{"dp_rec": ')
    self.assertEqual(planning.plan_for_run(self.task, self.config,
                                           dp_rec_aggregator), first)
    # ...and the memo is whole again.
    with open(os.path.join(folder, name)) as f:
      self.assertEqual(planning.plan_from_json(json.load(f)), first)


if __name__ == '__main__':
  absltest.main()
