"""Tests of experiments.infra.distributed: runs on TFF workers on loopback."""

import tensorflow as tf
import tensorflow_federated as tff

from experiments.runner import training
from tests import support


class DistributedTest(tf.test.TestCase):
  """Two loopback TFF workers give the local results."""

  def test_workers_equal_local(self):
    data_dir = self.create_tempdir().full_path
    common = dict(
        task_name='digits', aggregators=['dp_rec', 'fedavg'],
        data_dir=data_dir, rounds=4, clients_per_round=6, target_epsilon=8.0,
        eval_every=2, progress=False, insecure_test_seed=5,
        print_fn=lambda *a: None)
    local = {r['aggregator']: r for r in training.run_experiment(
        output_dir=self.create_tempdir().full_path, **common)}
    logs = []
    remote = {r['aggregator']: r for r in training.run_experiment(
        output_dir=self.create_tempdir().full_path, workers=2,
        **dict(common, print_fn=logs.append))}
    self.assertTrue(any('2 TFF workers' in line for line in logs))
    # DP-REC with recorded messages decodes after the merge, in seed order:
    # bit for bit the local result, whatever the split of clients.
    for key in support.COMPARED_RECORD_KEYS:
      self.assertEqual(remote['dp_rec'][key], local['dp_rec'][key], key)
    self.assertEqual(remote['dp_rec']['replay_mismatches'], 0)
    # FedAvg's float mean is merged in another order: the same up to
    # rounding, which 4 rounds of training do not amplify beyond this.
    self.assertAlmostEqual(remote['fedavg']['final_metric'],
                           local['fedavg']['final_metric'], delta=0.02)
    # The workers are gone and the local context is back.
    self.assertEqual(
        tff.tensorflow.computation(lambda: tf.constant(3))(), 3)

  def test_ddgauss_refused_on_workers(self):
    with self.assertRaisesRegex(ValueError, 'DDGauss'):
      training.run_experiment(
          task_name='digits', aggregators=['ddgauss16'], data_dir='/tmp',
          output_dir=self.create_tempdir().full_path, workers=2)


if __name__ == '__main__':
  tf.test.main()
