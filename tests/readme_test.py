"""Tests for README.md: its Python snippets run, its install command works."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import tensorflow as tf

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A block whose first line is this comment is shown, not run.
_NOT_RUN = '# not run'


def python_blocks(text):
  """The ```python blocks of a Markdown text, in order."""
  return re.findall(r'^```python\n(.*?)^```', text, flags=re.M | re.S)


class SnippetsTest(tf.test.TestCase):

  def test_snippets_run_in_order(self):
    with open(os.path.join(_ROOT, 'README.md')) as f:
      blocks = python_blocks(f.read())
    runnable = [b for b in blocks if not b.startswith(_NOT_RUN)]
    # The aggregator, the accountant and the history downlink, at least.
    for needed in ('build_unweighted_fed_avg', '.epsilon(',
                   'learning.start_history'):
      self.assertTrue(any(needed in b for b in runnable), needed)
    namespace = {'__name__': '__readme__'}
    for i, block in enumerate(runnable):
      try:
        exec(compile(block, f'README.md python block {i}', 'exec'),  # pylint: disable=exec-used
             namespace)
      except Exception as e:
        raise AssertionError(
            f'README python block {i} failed:\n{block}') from e


class InstallTest(tf.test.TestCase):
  """`pip install --no-deps` of the checkout, as the README says."""

  def test_installs_into_a_folder_and_imports_from_there(self):
    with tempfile.TemporaryDirectory() as tmp:
      # A copy of what the package is built from, so that the build leaves
      # nothing in the checkout.
      source = os.path.join(tmp, 'source')
      os.makedirs(source)
      for name in ('pyproject.toml', 'README.md'):
        shutil.copy(os.path.join(_ROOT, name), source)
      shutil.copytree(os.path.join(_ROOT, 'tff_dprec'),
                      os.path.join(source, 'tff_dprec'),
                      ignore=shutil.ignore_patterns('__pycache__'))
      target = os.path.join(tmp, 'site')
      result = subprocess.run(
          [sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps',
           '--no-build-isolation', '--no-index', '--target', target, source],
          capture_output=True, text=True, timeout=240)
      self.assertEqual(result.returncode, 0, result.stderr[-3000:])
      check = '\n'.join([
          'import numpy as np',
          'import tensorflow_federated as tff',
          'import tff_dprec',
          'from tff_dprec import learning',
          'import tff_dprec.accounting.__main__',
          'print(tff_dprec.__file__)',
          'aggregator = learning.dp_rec_aggregator(0.1, 1.0)',
          'print(aggregator.layout(tff.TensorType(np.float32, [3]))'
          '.message_bits)',
      ])
      env = dict(os.environ, PYTHONPATH=target)
      result = subprocess.run(
          [sys.executable, '-c', check], cwd=tmp, env=env,
          capture_output=True, text=True, timeout=240)
      self.assertEqual(result.returncode, 0, result.stderr[-3000:])
      installed_file, message_bits = result.stdout.split()[-2:]
      self.assertTrue(installed_file.startswith(target), installed_file)
      self.assertEqual(int(message_bits), 64 + 7)


if __name__ == '__main__':
  tf.test.main()
