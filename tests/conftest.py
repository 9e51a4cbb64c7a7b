"""Pytest setup: quiet TF logs, session caches (calibrations, compiled
computations), and reaping of TFF's worker_binary at session end."""

import os
import shutil
import tempfile

# Before TensorFlow: the commands' quiet native logging (a level the user
# set is kept), whatever pytest's own flags (its `--verbose` is pytest's).
from experiments.infra import quiet  # pylint: disable=g-import-not-at-top
quiet.setup(argv=['pytest'])

# After quiet.setup on purpose: it must run before TensorFlow is loaded.
from absl import flags  # noqa: E402  # pylint: disable=g-import-not-at-top

# pylint: disable-next=g-import-not-at-top
from tff_dprec import worker_reaper  # noqa: E402

# tf.test.TestCase.create_tempdir reads absl flags, which pytest never parses.
flags.FLAGS.mark_as_parsed()
worker_reaper.install()
# Folders this process made for the session (removed at its end).
_SESSION_FOLDERS = []


def pytest_configure(config):
  """One calibration cache and one compiled-computation cache per test
  session, shared by the xdist workers and the CLI subprocesses (they
  inherit the environment); never the user's."""
  if not hasattr(config, 'workerinput'):
    for name, prefix in (('TFF_DPREC_CALIBRATION_CACHE', 'calibrations'),
                         ('TFF_DPREC_COMPILE_CACHE', 'compiled')):
      os.environ[name] = tempfile.mkdtemp(prefix=f'tff_dprec_{prefix}_')
      _SESSION_FOLDERS.append(os.environ[name])


def pytest_sessionfinish(session, exitstatus):
  del session, exitstatus
  worker_reaper.reap()
  for folder in _SESSION_FOLDERS:  # The controller's only.
    shutil.rmtree(folder, ignore_errors=True)
