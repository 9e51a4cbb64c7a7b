"""Tests for experiments.studies.accounting_bench: phases and the report.

No timings are asserted (the benchmark prints them); a fake clock checks
how time is split between nested phases.
"""

import os
import subprocess
import sys
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized

from experiments.studies import accounting_bench
from tff_dprec import accounting
from tests import support

_ROOT = support.REPO


class PhaseTimerTest(absltest.TestCase):

  def test_nested_phases_get_their_own_time(self):
    ticks = iter([0.0, 1.0, 4.0, 10.0])  # outer in, inner in/out, outer out
    timer = accounting_bench._PhaseTimer()  # pylint: disable=protected-access
    inner = timer.wrap(lambda: 'inner', 'b')
    outer = timer.wrap(lambda: inner(), 'a')  # pylint: disable=unnecessary-lambda
    with mock.patch.object(accounting_bench.time, 'perf_counter',
                           lambda: next(ticks)):
      outer()
    self.assertEqual(timer.seconds, {'a': 7.0, 'b': 3.0})

  def test_installs_on_the_accounting_functions(self):
    from tff_dprec.accounting import profile  # pylint: disable=g-import-not-at-top
    original = profile.convex_upper
    timer = accounting_bench._PhaseTimer()  # pylint: disable=protected-access
    try:
      timer.install()
      self.assertIs(profile.convex_upper.__wrapped__, original)
    finally:
      timer.uninstall()
    self.assertIs(profile.convex_upper, original)


class ReportTest(absltest.TestCase):

  def _measured(self, scale):
    calibration = dict(
        total=8.0 * scale, clip_ratio=1.7, evaluations=10,
        pld_evaluations=5,
        phases={p: scale for p in accounting_bench.PHASE_ORDER})
    return {**{name: calibration for name in accounting_bench.CALIBRATIONS},
            'plan': 10.0 * scale, 'planner_lines': 5.0 * scale,
            'rounds': dict(rounds=1000, per_round=0.01 * scale, last=3.0)}

  def test_every_phase_and_the_speed_ups(self):
    lines = accounting_bench.report(self._measured(1.0),
                                    self._measured(4.0))
    text = '\n'.join(lines)
    for phase in accounting_bench.PHASE_ORDER:
      self.assertIn(phase, text)
    self.assertEqual(text.count('speed-up    4.0x'), 5)  # 2 totals + 3.
    self.assertIn('Epsilon per round, 1000-round run', text)

  def test_without_a_baseline(self):
    text = '\n'.join(accounting_bench.report(self._measured(1.0)))
    self.assertNotIn('baseline', text)
    self.assertIn("Main job's planner lines", text)


class ChildTest(parameterized.TestCase):
  """A child process's flags (`_run_child` runs this file with them)."""

  def test_run_child_makes_the_measurement_asked(self):
    with mock.patch.object(accounting_bench, 'child_calibration',
                           lambda name: {'calibration': name}), \
        mock.patch.object(accounting_bench, 'child_rounds',
                          lambda sample: {'rounds': sample}), \
        mock.patch.object(accounting_bench, 'child_planner_lines',
                          lambda: {'planner_lines': True}):
      self.assertEqual(accounting_bench.run_child('calibration', 'main job'),
                       {'calibration': 'main job'})
      self.assertEqual(accounting_bench.run_child('rounds', sample=7),
                       {'rounds': 7})
      self.assertEqual(accounting_bench.run_child('planner_lines'),
                       {'planner_lines': True})

  def test_rounds_are_all_measured_where_the_composition_is_kept(self):
    # The sample applies to code that composes each round from scratch
    # only: a kept composition's cost per round depends on its steps.
    asked = []

    class Curve:

      def __init__(self, **kwargs):
        del kwargs

      def epsilon(self, r):
        asked.append(r)
        return r / 8

    with mock.patch.object(accounting_bench, 'ROUNDS', 6), \
        mock.patch.object(accounting, 'DpRecEpsilonCurve', Curve):
      measured = accounting_bench.child_rounds(sample=5)
    self.assertEqual(asked, [1, 2, 3, 4, 5, 6])
    self.assertEqual((measured['rounds'], measured['last']), (6, 0.75))

  @parameterized.named_parameters(
      ('no_child', [], 'error: flag --child=None: Flag --child must have a '
       'value other than None.'),
      ('unknown_child', ['--child=foo'], 'error: flag --child=foo: value '
       'should be one of <calibration|planner_lines|rounds>'),
      ('unknown_setting', ['--child=calibration', '--name=nope'],
       'error: flag --name=nope: value should be one of '
       '<main job|Fashion-MNIST>'),
      ('no_setting', ['--child=calibration'], 'error: flags '
       'child=calibration, name=None: --child=calibration needs --name'),
      ('bad_sample', ['--child=rounds', '--sample=0'],
       'error: flag --sample=0: 0 is not a positive integer'),
      ('unexpected', ['--child=rounds', 'extra'],
       "error: Unexpected arguments: ['extra']"))
  def test_bad_flags_are_refused_in_one_line(self, args, line):
    # Refused before any measurement: nothing is timed.
    result = subprocess.run(
        [sys.executable, accounting_bench.__file__, *args],
        env=dict(os.environ, PYTHONPATH=_ROOT), cwd=_ROOT,
        capture_output=True, text=True, timeout=120)
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertEqual(result.stderr, line + '\n')
    self.assertEqual(result.stdout, '')


if __name__ == '__main__':
  absltest.main()
