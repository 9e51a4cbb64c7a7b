"""The top-level BUILD is true: every module in a target, every intra-project
import reachable through the importing target's deps (or in the same
target), every listed file present, every dep defined."""

import ast
import glob
import os
import subprocess

import tensorflow as tf

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGES = ('tff_dprec', 'experiments', 'tests')


def read_build(path=os.path.join(_REPO, 'BUILD')) -> dict:
  """{target name: {'kind', 'srcs', 'deps'}} of a BUILD file (Starlark
  evaluated as Python with stand-ins for Bazel's functions)."""
  targets = {}

  def rule(kind):
    def define(name, srcs=(), deps=(), **_):
      if name in targets:
        raise ValueError(f'BUILD defines {name!r} twice.')
      targets[name] = dict(kind=kind, srcs=list(srcs), deps=list(deps))
    return define

  def glob_(patterns, **_):
    return sorted({os.path.relpath(p, _REPO) for pattern in patterns
                   for p in glob.glob(os.path.join(_REPO, pattern),
                                      recursive=True)})

  scope = dict(load=lambda *a, **k: None, package=lambda **k: None,
               licenses=lambda *a: None, requirement=lambda n: f'@pip:{n}',
               glob=glob_,
               py_library=rule('py_library'), py_binary=rule('py_binary'),
               py_test=rule('py_test'))
  with open(path) as f:
    exec(compile(f.read(), path, 'exec'), scope)  # pylint: disable=exec-used
  return targets


def project_modules() -> list[str]:
  """The project's Python files that git tracks or would add, as paths."""
  listed = subprocess.run(
      ['git', 'ls-files', '--cached', '--others', '--exclude-standard',
       '--', *(f'{p}/*.py' for p in _PACKAGES)],
      cwd=_REPO, capture_output=True, text=True, check=True).stdout.split()
  return sorted(p for p in listed if os.path.exists(os.path.join(_REPO, p)))


def module_name(path: str) -> str:
  name = path[:-len('.py')].replace('/', '.')
  return name[:-len('.__init__')] if name.endswith('.__init__') else name


def imported_modules(path: str, known: set) -> set:
  """The project modules `path` imports (the longest known prefix)."""
  with open(os.path.join(_REPO, path)) as f:
    tree = ast.parse(f.read(), path)
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      # `from package import module` needs the module; `from module import
      # name`, the module.
      for alias in node.names:
        full = f'{node.module}.{alias.name}'
        names.add(full if full in known else node.module)
  found = set()
  for name in names:
    parts = name.split('.')
    for i in range(len(parts), 0, -1):
      if '.'.join(parts[:i]) in known:
        found.add('.'.join(parts[:i]))
        break
  return found


def _reachable(targets: dict, name: str) -> set:
  """`name` and every target its deps reach (Bazel's transitive deps)."""
  seen, todo = set(), [name]
  while todo:
    current = todo.pop()
    if current in seen or current not in targets:
      continue
    seen.add(current)
    todo.extend(d[1:] for d in targets[current]['deps'] if d.startswith(':'))
  return seen


def problems(targets: dict, modules: list) -> list[str]:
  """What makes the BUILD untrue, one line each."""
  owner, covered = {}, set()
  out = []
  for name, target in targets.items():
    for src in target['srcs']:
      if not os.path.exists(os.path.join(_REPO, src)):
        out.append(f':{name} lists {src}, which does not exist')
      covered.add(src)
      if target['kind'] == 'py_binary':
        continue  # A binary's main may also be its library's module.
      if src in owner:
        out.append(f'{src} is in both :{owner[src]} and :{name}')
      owner[src] = name
    for dep in target['deps']:
      if dep.startswith(':') and dep[1:] not in targets:
        out.append(f':{name} depends on {dep}, which is not defined')
  out += [f'{m} is in no target' for m in modules if m not in covered]
  by_module = {module_name(m): m for m in modules}
  reach = {name: _reachable(targets, name) for name in targets}
  for name, target in targets.items():
    for path in target['srcs']:
      if path not in modules:
        continue
      for imported in sorted(imported_modules(path, set(by_module))):
        needed = owner.get(by_module[imported])
        if needed and needed not in reach[name]:
          out.append(f':{name} ({path}) imports {imported} from :{needed}, '
                     'missing from its deps')
  return out


class BuildTest(tf.test.TestCase):

  def test_build_is_true(self):
    self.assertEqual(problems(read_build(), project_modules()), [])

  def test_finds_a_module_in_no_target_and_a_missing_dep(self):
    folder = self.create_tempdir().full_path
    path = os.path.join(folder, 'BUILD')
    with open(path, 'w') as f:
      f.write('py_library(name = "validation",'
              ' srcs = ["tff_dprec/validation.py"])\n'
              'py_library(name = "rec", srcs = ["tff_dprec/rec.py"],'
              ' deps = [":nowhere"])\n')
    found = problems(read_build(path), ['tff_dprec/validation.py',
                                        'tff_dprec/rec.py',
                                        'tff_dprec/message.py'])
    self.assertEqual(found, [
        ':rec depends on :nowhere, which is not defined',
        'tff_dprec/message.py is in no target',
        ':rec (tff_dprec/rec.py) imports tff_dprec.validation from '
        ':validation, missing from its deps'])


if __name__ == '__main__':
  tf.test.main()
