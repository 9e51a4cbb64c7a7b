"""Executes docs/tutorials/dp_rec_tutorial.ipynb and checks what it claims.

The notebook runs as a user runs it: from a `pip install` of the package, in
a kernel whose working folder is outside the checkout and whose PYTHONPATH
holds the install only (the checkout's `experiments` is not importable).
`python -m tests.tutorial_test --write` executes it so and stores its outputs
in the file (the outputs the repository keeps come from that).
"""

import json
import os
import re
import sys
import tempfile
import time

from absl.testing import absltest
import nbclient
import nbformat
import tensorflow as tf

from tests import support
from tff_dprec import worker_reaper

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(_ROOT, 'docs', 'tutorials', 'dp_rec_tutorial.ipynb')
# Per cell; with at most this many cells the whole run is bounded too (the
# kernel is shut down, and TFF's worker with it, when a cell times out).
CELL_TIMEOUT_SECONDS = 600
MAX_CELLS = 40
# Run after the notebook's own cells: what the notebook claims, as JSON.
_CLAIMS_CELL = """
import importlib.util
import json
import os
import sys

import psutil
kernel = psutil.Process()
cpu_seconds = sum(
    sum(p.cpu_times()[:2]) for p in [kernel] + kernel.children(recursive=True))
print('CLAIMS ' + json.dumps(dict(
    cpu_seconds=cpu_seconds,
    target_epsilon=TARGET_EPSILON, epsilon=dp_rec_epsilon,
    clients_per_round=CLIENTS_PER_ROUND, rounds=ROUNDS,
    message_bits=layout.message_bits, num_groups=layout.num_groups,
    bits=BITS, upload_bits=dp_rec_upload_bits,
    planned_clip_ratio=plan.dp_rec.parameter,
    clip_ratio=dp_rec.sum_factory.clip_ratio,
    dp_rec_accuracy=dp_rec_accuracy, dp_fedavg_accuracy=dp_fedavg_accuracy,
    dp_rec_bits=dp_rec_bits, dp_fedavg_bits=dp_fedavg_bits,
    experiments_importable=importlib.util.find_spec('experiments') is not None,
    tff_dprec_file=sys.modules['tff_dprec'].__file__, cwd=os.getcwd())))
"""


def execute(notebook, folder) -> float:
  """Executes `notebook` in place, from an install; returns its seconds.

  Installs the package into `folder/site` and starts a fresh kernel (this
  Python, which has the pinned stack) in `folder/work`, with PYTHONPATH
  the install alone: nothing of the checkout is importable.
  """
  if len(notebook.cells) > MAX_CELLS:
    raise ValueError(f'{len(notebook.cells)} cells, at most {MAX_CELLS}.')
  site = support.install_package(folder)
  work = os.path.join(folder, 'work')
  os.makedirs(work)
  client = nbclient.NotebookClient(
      notebook, timeout=CELL_TIMEOUT_SECONDS, startup_timeout=120,
      kernel_name='python3', record_timing=False,
      resources={'metadata': {'path': work}})
  start = time.monotonic()
  client.execute(env=dict(os.environ, PYTHONPATH=site))
  return time.monotonic() - start


def write_outputs() -> float:
  """Executes the tutorial and stores it with its outputs."""
  notebook = nbformat.read(NOTEBOOK, as_version=4)
  with tempfile.TemporaryDirectory() as folder:
    seconds = execute(notebook, folder)
  nbformat.write(notebook, NOTEBOOK)
  return seconds


def _stdout(cell) -> str:
  return ''.join(o.get('text', '') for o in cell.get('outputs', [])
                 if o.get('output_type') == 'stream' and
                 o.get('name') == 'stdout')


class StoredOutputsTest(tf.test.TestCase):
  """The outputs kept in the file come from one execution, in order."""

  def test_every_code_cell_ran_once_in_order(self):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == 'code']
    self.assertNotEmpty(code)
    self.assertEqual([c.execution_count for c in code],
                     list(range(1, len(code) + 1)))
    for cell in code:
      errors = [o for o in cell.outputs if o.output_type == 'error']
      self.assertEmpty(errors, cell.source)

  def test_the_plot_and_the_epsilon_are_stored(self):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    images = [o for c in notebook.cells if c.cell_type == 'code'
              for o in c.outputs if 'image/png' in o.get('data', {})]
    self.assertLen(images, 1)
    text = '\n'.join(_stdout(c) for c in notebook.cells
                     if c.cell_type == 'code')
    self.assertIn('DP-REC: epsilon', text)
    self.assertIn('bits per round; measured:', text)

  def test_imports_nothing_from_the_checkout(self):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for cell in notebook.cells:
      if cell.cell_type == 'code':
        self.assertNotIn('sys.path', cell.source)
        self.assertNotIn('experiments', cell.source)

  def test_links_exist(self):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    text = '\n'.join(c.source for c in notebook.cells
                     if c.cell_type == 'markdown')
    links = [l for l in re.findall(r'\]\(([^)\s]+)\)', text)
             if not re.match(r'^[a-z]+:', l)]
    self.assertNotEmpty(links)
    for link in links:
      target = os.path.normpath(os.path.join(os.path.dirname(NOTEBOOK),
                                             link.partition('#')[0]))
      self.assertTrue(os.path.exists(target), link)


class ExecutionTest(absltest.TestCase):
  """A fresh execution from an install: the claims hold for this run.

  One test method, each claim a subtest: the notebook's execution (half a
  minute) then runs once even when pytest-xdist spreads a class's tests
  over its workers.
  """

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(_CLAIMS_CELL))
    with tempfile.TemporaryDirectory() as folder:
      cls.site = os.path.join(folder, 'site')
      cls.seconds = execute(notebook, folder)
    cls.code_cells = [c for c in notebook.cells if c.cell_type == 'code']
    lines = _stdout(notebook.cells[-1]).splitlines()
    claims = [l for l in lines if l.startswith('CLAIMS ')]
    cls.claims = json.loads(claims[-1][len('CLAIMS '):])
    # The time of a run, for the record (a benchmark, not an assertion):
    # wall time depends on the machine's load, the kernel's CPU time (with
    # TFF's worker) much less.
    print(f'\ntutorial executed in {cls.seconds:.1f} s, '
          f'{cls.claims["cpu_seconds"]:.1f} s of CPU', file=sys.stderr)

  def _every_cell_ran_once_in_order(self):
    self.assertEqual([c.execution_count for c in self.code_cells],
                     list(range(1, len(self.code_cells) + 1)))
    text = '\n'.join(_stdout(c) for c in self.code_cells)
    self.assertIn('DP-REC: epsilon', text)
    self.assertIn('bits per round; measured:', text)

  def _the_package_came_from_the_install(self):
    claims = self.claims
    self.assertFalse(claims['experiments_importable'])
    self.assertTrue(claims['tff_dprec_file'].startswith(self.site + os.sep),
                    claims['tff_dprec_file'])
    self.assertFalse(claims['cwd'].startswith(_ROOT), claims['cwd'])

  def _epsilon_is_at_most_the_target(self):
    claims = self.claims
    self.assertGreater(claims['epsilon'], 0.0)
    self.assertLessEqual(claims['epsilon'], claims['target_epsilon'])

  def _the_aggregator_uses_the_planned_clip_ratio(self):
    self.assertAlmostEqual(self.claims['clip_ratio'],
                           self.claims['planned_clip_ratio'], places=9)

  def _upload_bits_per_round_are_clients_times_message_bits(self):
    claims = self.claims
    self.assertEqual(claims['message_bits'],
                     64 + claims['num_groups'] * claims['bits'])
    self.assertEqual(claims['upload_bits'],
                     [claims['clients_per_round'] * claims['message_bits']]
                     * claims['rounds'])
    self.assertEqual(claims['dp_rec_bits'][-1], sum(claims['upload_bits']))

  def _dp_rec_uploads_a_small_fraction_of_dp_fedavg(self):
    # 40 x 74 bits a round against about 40 x 650 x 32: a factor near 280.
    claims = self.claims
    self.assertLess(claims['dp_rec_bits'][-1] * 100,
                    claims['dp_fedavg_bits'][-1])

  def _dp_rec_stays_below_dp_fedavg_at_this_size(self):
    # What the notebook says of its plot. At B = 40 DP-REC's average is about
    # ten times noisier: DP-FedAvg ends near 70%, DP-REC near 20% (10% is
    # chance); their order is practically never reversed.
    self.assertGreater(self.claims['dp_fedavg_accuracy'][-1],
                       self.claims['dp_rec_accuracy'][-1])

  def _one_accuracy_per_round_and_the_initial_model(self):
    claims = self.claims
    for key in ('dp_rec_accuracy', 'dp_fedavg_accuracy'):
      self.assertLen(claims[key], claims['rounds'] + 1)
      for accuracy in claims[key]:
        self.assertBetween(accuracy, 0.0, 1.0)

  def test_the_claims_hold(self):
    for check in (
        self._every_cell_ran_once_in_order,
        self._the_package_came_from_the_install,
        self._epsilon_is_at_most_the_target,
        self._the_aggregator_uses_the_planned_clip_ratio,
        self._upload_bits_per_round_are_clients_times_message_bits,
        self._dp_rec_uploads_a_small_fraction_of_dp_fedavg,
        self._dp_rec_stays_below_dp_fedavg_at_this_size,
        self._one_accuracy_per_round_and_the_initial_model,
    ):
      with self.subTest(check.__name__.lstrip('_')):
        check()


if __name__ == '__main__':
  # This process imports TFF (tests.support): quiet its exit, as conftest.py
  # does under pytest.
  worker_reaper.install()
  if sys.argv[1:] == ['--write']:
    print(f'executed and stored in {write_outputs():.1f} s')
  else:
    tf.test.main()
