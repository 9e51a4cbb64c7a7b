"""Tests for experiments.runner.progress: bars on a terminal, lines in a log."""

import io
import math
import types
from unittest import mock

import tensorflow as tf

from experiments.runner import progress


def _run(rounds=25, show=True):
  return types.SimpleNamespace(
      config=types.SimpleNamespace(progress=show, rounds=rounds),
      task=types.SimpleNamespace(name='digits', metric_label='accuracy'),
      name='dp_rec')


def _progress(completed, epsilon=0.5):
  return types.SimpleNamespace(completed=completed, last_metric=0.25,
                               epsilon=epsilon)


_ROW = dict(train_loss=math.nan, upload_bits=120)


class _Terminal(io.StringIO):

  def isatty(self):
    return True


class RunProgressTest(tf.test.TestCase):

  def test_a_log_gets_a_line_every_ten_rounds_and_at_the_end(self):
    log = io.StringIO()
    display = progress.RunProgress(_run(), _progress(0), stream=log)
    for r in range(1, 26):
      display.update(_progress(r), _ROW)
    display.close()
    lines = log.getvalue().splitlines()
    self.assertNotIn('\r', log.getvalue())
    self.assertEqual([l.split()[2] for l in lines],
                     ['10/25', '20/25', '25/25'])
    self.assertEqual(lines[0], '[digits/dp_rec] round 10/25 accuracy=0.2500 '
                     'eps=0.500 up_bits=120')

  def test_a_slow_run_gets_a_line_every_half_minute(self):
    log = io.StringIO()
    clock = iter([0.0, 5.0, 40.0, 45.0])
    with mock.patch.object(progress.time, 'monotonic', lambda: next(clock)):
      display = progress.RunProgress(_run(), _progress(0), stream=log)
      for r in (1, 2, 3):
        display.update(_progress(r), _ROW)
    self.assertEqual([l.split()[2] for l in log.getvalue().splitlines()],
                     ['2/25'])

  def test_a_terminal_gets_a_live_bar(self):
    terminal = _Terminal()
    display = progress.RunProgress(_run(rounds=3), _progress(0),
                                   stream=terminal)
    for r in (1, 2, 3):
      display.update(_progress(r), _ROW)
    display.close()
    self.assertIn('\r', terminal.getvalue())
    self.assertIn('3/3', terminal.getvalue())

  def test_no_progress_writes_nothing(self):
    for stream in (io.StringIO(), _Terminal()):
      display = progress.RunProgress(_run(show=False), _progress(0),
                                     stream=stream)
      display.update(_progress(10), _ROW)
      display.close()
      self.assertEqual(stream.getvalue(), '')


if __name__ == '__main__':
  tf.test.main()
