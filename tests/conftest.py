"""Pytest setup: quiet TF logs, a session calibration cache, and reaping of
TFF's worker_binary at session end."""

import os
import tempfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import flags  # pylint: disable=g-import-not-at-top

from experiments.infra import worker_reaper  # pylint: disable=g-import-not-at-top

# tf.test.TestCase.create_tempdir reads absl flags, which pytest never parses.
flags.FLAGS.mark_as_parsed()
worker_reaper.install()


def pytest_configure(config):
  """One calibration cache per test session, shared by the xdist workers and
  the CLI subprocesses (they inherit the environment); never the user's."""
  if not hasattr(config, 'workerinput'):
    os.environ['TFF_DPREC_CALIBRATION_CACHE'] = tempfile.mkdtemp(
        prefix='tff_dprec_calibrations_')


def pytest_sessionfinish(session, exitstatus):
  del session, exitstatus
  worker_reaper.reap()
