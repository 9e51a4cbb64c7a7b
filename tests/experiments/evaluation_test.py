"""Tests of experiments.data.evaluation."""

import tensorflow as tf
import tensorflow_federated as tff

from experiments.data import evaluation
from experiments.data import tasks


class EvaluationTest(tf.test.TestCase):

  def test_the_reused_model_evaluates_as_a_fresh_one(self):
    # `evaluate` keeps one model and traced forward pass per task. After TFF
    # has built and run a process (graphs traced from other models), and for
    # weights that differ, it must still equal a fresh model's evaluation.
    task = tasks.create_task('digits', self.create_tempdir().full_path)

    def fresh(weights):
      model = task.baseline.model_fn()
      weights.assign_weights_to(model)
      metric = tf.keras.metrics.SparseCategoricalAccuracy()
      loss_sum, count = 0.0, 0
      for x, y in task.baseline.datasets.get_centralized_test_data():
        output = model.forward_pass((x, y), training=False)
        loss_sum += float(output.loss) * int(output.num_examples)
        count += int(output.num_examples)
        metric.update_state(y, output.predictions)
      return {'accuracy': float(metric.result()),
              'loss': loss_sum / count, 'num_examples': count}

    initial = tff.learning.models.ModelWeights.from_model(
        task.baseline.model_fn())
    before = evaluation.evaluate(task, initial)
    process = tff.learning.algorithms.build_weighted_fed_avg(
        task.baseline.model_fn,
        client_optimizer_fn=tff.learning.optimizers.build_sgdm(0.5))
    state = process.initialize()
    data = task.baseline.datasets
    clients = [data.train_data.create_tf_dataset_for_client(c).apply(
        data.train_preprocess_fn) for c in data.train_data.client_ids[:4]]
    state = process.next(state, clients).state
    trained = process.get_model_weights(state)
    after = evaluation.evaluate(task, trained)
    self.assertNotEqual(after['loss'], before['loss'])
    for got, weights in ((after, trained),
                         (evaluation.evaluate(task, initial), initial)):
      want = fresh(weights)
      self.assertEqual(got['num_examples'], want['num_examples'])
      self.assertAllClose(got, want, rtol=1e-6, atol=0)
    self.assertEqual(evaluation.evaluate(task, initial), before)


if __name__ == '__main__':
  tf.test.main()
