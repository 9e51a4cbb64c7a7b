"""The tree passes its linter (ruff, configured in ruff.toml) with no
findings."""

import os
import subprocess
import sys

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LintTest(absltest.TestCase):

  def test_no_findings(self):
    result = subprocess.run(
        [sys.executable, '-m', 'ruff', 'check', '--no-cache', '.'],
        cwd=_ROOT, capture_output=True, text=True, timeout=120, check=False)
    self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
    self.assertIn('All checks passed', result.stdout)

  def test_the_configuration_is_the_one_read(self):
    # A finding in a file of the tree's own style is reported: the check
    # above is not vacuous.
    path = self.create_tempfile(
        'bad.py', content='import os\n' + 'x = 1  #' + 'y' * 80 + '\n')
    result = subprocess.run(
        [sys.executable, '-m', 'ruff', 'check', '--no-cache', '--config',
         os.path.join(_ROOT, 'ruff.toml'), path.full_path],
        capture_output=True, text=True, timeout=120, check=False)
    self.assertNotEqual(result.returncode, 0)
    self.assertIn('F401', result.stdout)
    self.assertIn('E501', result.stdout)


if __name__ == '__main__':
  absltest.main()
