"""Tests of experiments.data.tasks: `create_task`'s errors."""

import types
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized

from experiments.data import task_registry
from experiments.data import task_types
from experiments.data import tasks
from experiments.runner import training
from experiments.studies import utility


class MissingDataTest(parameterized.TestCase):

  @parameterized.parameters(('mnist', 'mnist.npz'),
                            ('emnist', 'emnist_all.sqlite'),
                            ('shakespeare', 'shakespeare.sqlite'))
  def test_clear_error(self, task, filename):
    with self.assertRaisesRegex(task_types.MissingDataError, filename):
      tasks.create_task(task, '/nonexistent/dir')


class ReproductionSettingTest(parameterized.TestCase):

  @parameterized.parameters('stackoverflow_lr', 'digits')
  def test_the_reproduction_trains_a_task_at_its_pinned_setting(self, task):
    config = types.SimpleNamespace(
        output_dir=self.create_tempdir().full_path, training_seeds=3,
        quick=False, data_dir='data')
    record = dict(clients_per_round=40)
    with mock.patch.object(training, 'run',
                           return_value=[record]) as run:
      utility._train(config, task, 'part', ['dp_rec'])  # pylint: disable=protected-access
    run_config = run.call_args[0][0]
    pinned = task_registry.get(task).reproduction
    self.assertEqual(bool(pinned), task == 'stackoverflow_lr')
    for field, value in pinned.items():
      self.assertEqual(getattr(run_config, field), value, field)
    self.assertEqual((run_config.task, run_config.num_seeds), (task, 3))


if __name__ == '__main__':
  absltest.main()
