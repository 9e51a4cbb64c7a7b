"""Tests for experiments.runner.cli."""

import contextlib
import io
import logging as python_logging
import sys
from unittest import mock

from absl import flags
from absl import logging
import tensorflow as tf

from experiments.runner import cli


class CliTest(tf.test.TestCase):

  def test_quiet_logs_unless_verbosity_is_given(self):
    self.addCleanup(logging.set_verbosity, logging.get_verbosity())
    self.addCleanup(tf.get_logger().setLevel, tf.get_logger().level)
    logging.set_verbosity(logging.INFO)
    tf.get_logger().setLevel(python_logging.INFO)
    with mock.patch.object(sys, 'argv', ['prog']):
      cli.quiet_logs()
    self.assertEqual(logging.get_verbosity(), logging.ERROR)
    self.assertEqual(tf.get_logger().level, python_logging.ERROR)
    logging.set_verbosity(logging.INFO)
    with mock.patch.object(sys, 'argv', ['prog', '--verbose']):
      cli.quiet_logs()  # --verbose: untouched.
    self.assertEqual(logging.get_verbosity(), logging.INFO)
    flags.FLAGS['verbosity'].present = 1
    self.addCleanup(setattr, flags.FLAGS['verbosity'], 'present', 0)
    with mock.patch.object(sys, 'argv', ['prog']):
      cli.quiet_logs()
    self.assertEqual(logging.get_verbosity(), logging.INFO)

  def test_fail_prints_one_line_and_exits_2(self):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
      cli.fail(ValueError('--rounds must be positive, found 0.'))
    self.assertEqual(e.exception.code, 2)
    self.assertEqual(err.getvalue(),
                     'error: --rounds must be positive, found 0.\n')


if __name__ == '__main__':
  tf.test.main()
