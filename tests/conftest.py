"""Pytest setup: quiet TF logs and reap TFF's worker_binary at session end."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from experiments import worker_reaper  # pylint: disable=g-import-not-at-top

worker_reaper.install()


def pytest_sessionfinish(session, exitstatus):
  del session, exitstatus
  worker_reaper.reap()
