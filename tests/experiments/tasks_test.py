"""Tests of experiments.data.tasks: `create_task`'s errors."""

from absl.testing import absltest
from absl.testing import parameterized

from experiments.data import task_types
from experiments.data import tasks


class MissingDataTest(parameterized.TestCase):

  @parameterized.parameters(('mnist', 'mnist.npz'),
                            ('emnist', 'emnist_all.sqlite'),
                            ('shakespeare', 'shakespeare.sqlite'))
  def test_clear_error(self, task, filename):
    with self.assertRaisesRegex(task_types.MissingDataError, filename):
      tasks.create_task(task, '/nonexistent/dir')


if __name__ == '__main__':
  absltest.main()
