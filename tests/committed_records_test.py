"""The committed study records stay reusable on a fresh clone.

A finished run's record is reused only when this code's calibration of its
parameters agrees with the record's (`calibration_cache.CALIBRATION_RTOL`).
A change to the accountant that moves a calibration further would make a
fresh clone (no calibration cache) retrain hours of committed runs. This test
copies only the files git tracks under results/frontier, as a clone has
them, and reads a few points with the calibration cache off.
"""

import os
import shutil
import subprocess
import sys

from absl.testing import absltest

from tests import support

# Points whose committed records must be found: DP-FedAvg's calibrated z
# (every other point's record is found the same way, through its committed
# tuning result). DP-REC's committed records were calibrated by the
# accountant before the worst pair (docs/PRIVACY.md Section 11), whose c
# is larger: they must not be reused at the new c (the second row).
_POINTS = 'dp_rec: 40; dp_fedavg: 40'
_GRIDS = ''
_ROWS = ('| dp_fedavg | 40 |', '| dp_rec | 40 |')
_REUSED = {'| dp_fedavg | 40 |': '(3 seeds)',
           '| dp_rec | 40 |': '0 of 3 seeds finished'}


def _tracked_files(folder):
  """Paths under `folder` that git tracks, relative to the repository."""
  try:
    listed = subprocess.run(['git', 'ls-files', '-z', folder],
                            cwd=support.REPO, capture_output=True, check=True,
                            timeout=60)
  except (OSError, subprocess.CalledProcessError):
    return None
  return [p for p in listed.stdout.decode().split('\0') if p]


class CommittedRecordsTest(absltest.TestCase):

  def test_a_fresh_clone_reuses_the_committed_frontier_records(self):
    files = _tracked_files('results/frontier')
    if not files:
      self.skipTest('not a git checkout with committed frontier records')
    root = self.create_tempdir().full_path
    for path in files:
      os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
      shutil.copy(os.path.join(support.REPO, path), os.path.join(root, path))
    env = dict(os.environ, TFF_DPREC_CALIBRATION_CACHE='off')
    done = subprocess.run(
        [sys.executable, '-m', 'experiments.frontier', '--report_only',
         f'--output_dir={os.path.join(root, "results", "frontier")}',
         f'--points={_POINTS}', f'--grids={_GRIDS}'],
        cwd=support.REPO, capture_output=True, text=True, timeout=600,
        env=env)
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    rows = [line for line in done.stdout.splitlines()
            if line.startswith(_ROWS)]
    self.assertLen(rows, len(_ROWS), done.stdout[-3000:])
    for row in rows:
      expected = [v for k, v in _REUSED.items() if row.startswith(k)][0]
      self.assertIn(expected, row + done.stdout)


if __name__ == '__main__':
  absltest.main()
