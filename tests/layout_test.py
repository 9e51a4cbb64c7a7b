"""The layout: imports point down (no cycles), modules stay small."""

import ast
import os
import unittest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGES = ('tff_dprec', 'experiments')
_MAX_LINES = 700
_MAX_EXPERIMENTS_TOP = 11


def _modules():
  """{dotted name: path} of every module in the packages."""
  out = {}
  for package in _PACKAGES:
    for folder, _, files in os.walk(os.path.join(_ROOT, package)):
      for name in files:
        if name.endswith('.py'):
          path = os.path.join(folder, name)
          dotted = os.path.relpath(path, _ROOT)[:-3].replace(os.sep, '.')
          if dotted.endswith('.__init__'):
            dotted = dotted[:-len('.__init__')]
          out[dotted] = path
  return out


def import_graph():
  """{module: modules of the packages it imports}, function-level included."""
  modules = _modules()
  graph = {}
  for name, path in modules.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    edges = set()
    for node in ast.walk(tree):
      targets = []
      if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        targets = [node.module] + [f'{node.module}.{a.name}'
                                   for a in node.names]
      for target in targets:
        # The longest prefix that is one of our modules.
        parts = target.split('.')
        for k in range(len(parts), 0, -1):
          candidate = '.'.join(parts[:k])
          if candidate in modules:
            if candidate != name:
              edges.add(candidate)
            break
    graph[name] = edges
  return graph


def find_cycle(graph):
  """One import cycle as a list of modules, or None."""
  state, stack = {}, []

  def visit(node):
    state[node] = 'open'
    stack.append(node)
    for nxt in sorted(graph.get(node, ())):
      # A package's __init__ importing its own submodules is not a cycle of
      # layers: skip edges from a package to its children and back.
      if nxt.startswith(node + '.') or node.startswith(nxt + '.'):
        continue
      if state.get(nxt) == 'open':
        return stack[stack.index(nxt):] + [nxt]
      if nxt not in state:
        found = visit(nxt)
        if found:
          return found
    state[node] = 'done'
    stack.pop()
    return None

  for node in sorted(graph):
    if node not in state:
      found = visit(node)
      if found:
        return found
  return None


class LayoutTest(unittest.TestCase):

  def test_no_import_cycle(self):
    self.assertIsNone(find_cycle(import_graph()))

  def test_cycle_finder_finds_one(self):
    self.assertEqual(find_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}),
                     ['a', 'b', 'c', 'a'])
    self.assertIsNone(find_cycle({'a': {'b'}, 'b': {'c'}, 'c': set()}))

  def test_library_never_imports_the_experiments(self):
    for name, edges in import_graph().items():
      if name.startswith('tff_dprec'):
        self.assertFalse([e for e in edges if e.startswith('experiments')],
                         name)

  def test_experiments_layers_point_down(self):
    # data and infra sit under the runner, which sits under the studies and
    # the entry points (docs: ../shared/DESIGN.md's layout).
    above = {'experiments.data': ('experiments.runner', 'experiments.studies',
                                  'experiments.run'),
             'experiments.infra': ('experiments.runner', 'experiments.studies',
                                   'experiments.run'),
             'experiments.runner': ('experiments.studies', 'experiments.run')}
    for name, edges in import_graph().items():
      for layer, forbidden in above.items():
        if name == layer or name.startswith(layer + '.'):
          self.assertFalse(
              [e for e in edges if e.split('.')[:2] in
               [f.split('.') for f in forbidden] or e in forbidden], name)

  def test_modules_are_small(self):
    for name, path in _modules().items():
      with open(path) as f:
        lines = sum(1 for _ in f)
      self.assertLessEqual(lines, _MAX_LINES, name)

  def test_experiments_top_level(self):
    top = [n for n in os.listdir(os.path.join(_ROOT, 'experiments'))
           if n.endswith('.py')]
    self.assertLessEqual(len(top), _MAX_EXPERIMENTS_TOP, sorted(top))


if __name__ == '__main__':
  unittest.main()
