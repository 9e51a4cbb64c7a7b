"""Tests for README.md: its snippets run, its paths exist, the install works.

The README's ```python blocks run in order, then those of docs/GUIDE.md
(which continue from the README's), in one namespace.
"""

import ast
import os
import re
import subprocess
import sys
import tempfile
import tomllib

from packaging import requirements as requirements_lib
from packaging import specifiers
from packaging import version as version_lib
import tensorflow as tf

from tests import support

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A block whose first line is this comment is shown, not run.
_NOT_RUN = '# not run'
# The documents whose snippets run, in order, and what each must show.
_SNIPPETS = (('README.md', ('build_unweighted_fed_avg', '.epsilon(',
                            'dp_rec_aggregator_for_epsilon',
                            'no_client_metrics')),
             (os.path.join('docs', 'GUIDE.md'), ('learning.start_history',)))
# The documents whose links must exist (the README's paths too).
_LINKED = ('README.md', os.path.join('docs', 'GUIDE.md'),
           os.path.join('docs', 'ARCHITECTURE.md'))
_FILE_SUFFIXES = ('.py', '.md', '.txt', '.toml', '.ipynb', '.json', '.csv',
                  '.png', '.cfg')
# The releases the code depends on (pyproject.toml pins them).
_PINNED = ('tensorflow-federated', 'tensorflow', 'dp-accounting')


def python_blocks(text):
  """The ```python blocks of a Markdown text, in order."""
  return re.findall(r'^```python\n(.*?)^```', text, flags=re.M | re.S)


def _read(relative):
  with open(os.path.join(_ROOT, relative)) as f:
    return f.read()


def _slug(heading):
  """GitHub's anchor for a Markdown heading."""
  text = re.sub(r'[^\w\- ]', '', heading.strip().lower())
  return text.replace(' ', '-')


def _anchors(path):
  with open(path) as f:
    return {_slug(m) for m in re.findall(r'^#+ (.*)$', f.read(), flags=re.M)}


def named_paths(text):
  """The relative links and the repository paths in backticks of `text`."""
  links = re.findall(r'\]\(([^)\s]+)\)', text)
  links = [l for l in links if not re.match(r'^[a-z]+:', l)]
  quoted = []
  for token in re.findall(r'`([^`\s]+)`', text):
    if token.startswith(('-', '$', '~', '<', '/', '.')) or '*' in token:
      continue
    if '/' in token.rstrip('/') or token.endswith(_FILE_SUFFIXES):
      quoted.append(token)
  return links, quoted


class SnippetsTest(tf.test.TestCase):

  def test_snippets_run_in_order(self):
    namespace = {'__name__': '__readme__'}
    for document, needed in _SNIPPETS:
      blocks = python_blocks(_read(document))
      runnable = [b for b in blocks if not b.startswith(_NOT_RUN)]
      for name in needed:
        self.assertTrue(any(name in b for b in runnable), (document, name))
      for i, block in enumerate(runnable):
        try:
          exec(compile(block, f'{document} python block {i}', 'exec'),  # pylint: disable=exec-used
               namespace)
        except Exception as e:
          raise AssertionError(
              f'{document} python block {i} failed:\n{block}') from e


class FrontPageTest(tf.test.TestCase):
  """The README is a front page: short, current, and every path exists."""

  def test_starts_with_make_run_and_make_test(self):
    text = _read('README.md')
    first_block = re.search(r'^```sh\n(.*?)^```', text, flags=re.M | re.S)
    commands = [l.split('#')[0].strip()
                for l in first_block.group(1).splitlines()]
    self.assertEqual(commands[:2], ['make run', 'make test'])
    self.assertLess(text.index('make test'), text.index('pip install'))

  def test_is_a_front_page(self):
    text = _read('README.md')
    self.assertLessEqual(len(text.splitlines()), 210)
    # No commit hashes (hex words with a digit and a letter), no wall times.
    hashes = [w for w in re.findall(r'\b[0-9a-f]{7,40}\b', text)
              if re.search(r'\d', w) and re.search(r'[a-f]', w)]
    self.assertEmpty(hashes)
    self.assertEmpty(re.findall(
        r'\b\d+(?:\.\d+)? ?(?:s|min|minutes|seconds|h|hours)\b', text))
    # Nothing outside the repository; the paper is cited.
    self.assertNotIn('../', text)
    self.assertIn('arXiv:2111.05454', text)

  def test_every_path_the_readme_names_exists(self):
    links, quoted = named_paths(_read('README.md'))
    self.assertNotEmpty(links)
    self.assertIn('tests/readme_test.py', quoted)
    for path in quoted:
      # Paths in backticks are relative to the repository's root.
      self.assertTrue(os.path.exists(os.path.join(_ROOT, path)), path)

  def test_every_link_exists(self):
    for document in _LINKED:
      links, _ = named_paths(_read(document))
      base = os.path.dirname(os.path.join(_ROOT, document))
      for link in links:
        path, _, anchor = link.partition('#')
        target = os.path.normpath(os.path.join(base, path)) if path else (
            os.path.join(_ROOT, document))
        self.assertTrue(os.path.exists(target), (document, link))
        self.assertTrue(target.startswith(_ROOT), (document, link))
        if anchor:
          self.assertIn(anchor, _anchors(target), (document, link))

  def test_what_the_readme_dropped_is_one_click_away(self):
    links, _ = named_paths(_read('README.md'))
    linked = {os.path.normpath(l.partition('#')[0]) for l in links}
    for document in ('docs/GUIDE.md', 'docs/ARCHITECTURE.md',
                     'docs/PRIVACY.md', 'docs/EXPERIMENTS.md',
                     'docs/REPRODUCTION.md',
                     'docs/tutorials/dp_rec_tutorial.ipynb'):
      self.assertIn(os.path.normpath(document), linked)

  def test_the_path_finder_finds_paths(self):
    links, quoted = named_paths(
        'See [a](docs/A.md#x), [web](https://x.org), `tests/b_test.py`, '
        '`pyproject.toml`, `tff_dprec.plan`, `--flag=a/b` and `$HOME/x`.')
    self.assertEqual(links, ['docs/A.md#x'])
    self.assertEqual(quoted, ['tests/b_test.py', 'pyproject.toml'])


def _requirement_pins():
  """{name: exact or wildcard version} from requirements.txt and Makefile."""
  pins = {}
  for line in _read('requirements.txt').splitlines():
    line = line.split('#')[0].strip()
    if line:
      requirement = requirements_lib.Requirement(line)
      pins[requirement.name] = requirement.specifier
  # TFF itself is installed by the Makefile, with --no-deps.
  for found in re.findall(r'--no-deps (\S+==\S+)', _read('Makefile')):
    requirement = requirements_lib.Requirement(found)
    pins[requirement.name] = requirement.specifier
  return pins


def _normalized(distribution):
  return re.sub(r'[-_.]+', '-', distribution).lower()


def _library_imports():
  """The third-party top-level modules tff_dprec imports, in functions too."""
  found = set()
  for folder, _, files in os.walk(os.path.join(_ROOT, 'tff_dprec')):
    for name in files:
      if name.endswith('.py'):
        with open(os.path.join(folder, name)) as f:
          tree = ast.parse(f.read())
        for node in ast.walk(tree):
          if isinstance(node, ast.Import):
            found.update(a.name.split('.')[0] for a in node.names)
          elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module.split('.')[0])
  return found - set(sys.stdlib_module_names) - {'tff_dprec'}


class PinsTest(tf.test.TestCase):
  """pyproject.toml pins what requirements.txt and the Makefile install."""

  def test_pyproject_pins_the_releases_the_code_depends_on(self):
    project = tomllib.loads(_read('pyproject.toml'))['project']
    dependencies = {r.name: r.specifier for r in map(
        requirements_lib.Requirement, project['dependencies'])}
    pins = _requirement_pins()
    for name in _PINNED:
      specifier = dependencies[name]
      self.assertEqual([s.operator for s in specifier], ['=='], name)
      self.assertTrue(str(specifier).endswith('.*'), name)
      # The exact or wildcard version the environment is built with.
      (pinned,) = list(pins[name])
      self.assertEqual(pinned.operator, '==', name)
      built = pinned.version.replace('.*', '')
      self.assertTrue(specifier.contains(built), (name, built))
    # Nothing else is pinned by version in pyproject.toml.
    self.assertCountEqual(
        [n for n, s in dependencies.items() if len(s)], _PINNED)

  def test_pyproject_lists_what_the_library_imports(self):
    project = tomllib.loads(_read('pyproject.toml'))['project']
    listed = {_normalized(requirements_lib.Requirement(r).name)
              for r in project['dependencies']}
    from importlib import metadata  # pylint: disable=g-import-not-at-top
    providers = metadata.packages_distributions()
    imported = _library_imports()
    self.assertContainsSubset({'absl', 'numpy', 'tensorflow'}, imported)
    for module in sorted(imported):
      provided_by = {_normalized(d) for d in providers.get(module, ())}
      self.assertTrue(provided_by & listed, (module, sorted(provided_by)))

  def test_the_environment_meets_the_pins(self):
    project = tomllib.loads(_read('pyproject.toml'))['project']
    self.assertIn(version_lib.Version('.'.join(map(str, sys.version_info[:3]))),
                  specifiers.SpecifierSet(project['requires-python']))
    from importlib import metadata  # pylint: disable=g-import-not-at-top
    for line in project['dependencies']:
      requirement = requirements_lib.Requirement(line)
      self.assertIn(metadata.version(requirement.name),
                    requirement.specifier, requirement.name)


class InstallTest(tf.test.TestCase):
  """`pip install --no-deps` of the checkout, as the README says."""

  def test_installs_into_a_folder_and_imports_from_there(self):
    with tempfile.TemporaryDirectory() as tmp:
      target = support.install_package(tmp)
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
