"""Pytest setup: quiet TF logs and reap TFF's worker_binary at session end."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import flags  # pylint: disable=g-import-not-at-top

from experiments.infra import worker_reaper  # pylint: disable=g-import-not-at-top

# tf.test.TestCase.create_tempdir reads absl flags, which pytest never parses.
flags.FLAGS.mark_as_parsed()
worker_reaper.install()


def pytest_sessionfinish(session, exitstatus):
  del session, exitstatus
  worker_reaper.reap()
