"""The on-demand SO-LR population: deterministic, same law as the stored one."""

import os
import types

import numpy as np
import tensorflow as tf

from experiments.data import stackoverflow_arrays
from experiments.data import stackoverflow_data
from experiments.data import stackoverflow_population
from experiments.data import tasks
from experiments.data import stackoverflow_task
from experiments.runner import checkpoints
from experiments.runner import config as config_lib
from experiments.runner import registry
from experiments.runner import run_params

_SMALL = dict(seed=3, train_clients=1500, heldout_clients=4, test_clients=4,
              num_words=400, num_tags=30, num_topics=6, mean_examples=10.0,
              std_examples=20.0, max_examples=200)


class PopulationTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = os.path.join(tf.compat.v1.test.get_temp_dir(), 'so_pop')
    stackoverflow_data.generate(cls.data_dir, _SMALL)
    cls.words, cls.tags = stackoverflow_task.vocab(cls.data_dir, 300, 20)
    cls.population = stackoverflow_population.Population(
        100_000, cls.words, cls.tags, embedded_config=_SMALL)

  def test_clients_are_deterministic_and_distinct(self):
    again = stackoverflow_population.Population(
        100_000, self.words, self.tags, embedded_config=_SMALL)
    for client in ('00000000', '00054321', '00099999'):
      for a, b in zip(self.population.client_examples(client),
                      again.client_examples(client)):
        np.testing.assert_array_equal(a, b)
    a = self.population.client_examples('00000001')
    b = self.population.client_examples('00000002')
    self.assertFalse(len(a[0]) == len(b[0]) and np.array_equal(a[0], b[0]))
    other = stackoverflow_population.Population(
        100_000, self.words, self.tags, embedded_config=dict(_SMALL, seed=4))
    c = other.client_examples('00000001')
    self.assertFalse(len(a[0]) == len(c[0]) and np.array_equal(a[0], c[0]))

  def test_arrays_are_well_formed(self):
    for client in ('00000005', '00000006'):
      words, offsets, tags = self.population.client_examples(client)
      self.assertEqual(words.dtype, np.int32)
      self.assertEqual(offsets[0], 0)
      self.assertEqual(offsets[-1], len(words))
      self.assertAllGreaterEqual(np.diff(offsets), 0)
      self.assertLen(offsets, len(tags) + 1)
      self.assertTrue(np.all((words >= 0) & (words < len(self.words))))
      self.assertEqual(tags.shape[1], len(self.tags))
      self.assertLessEqual(int(tags.sum(axis=1).max()), 3)

  def test_same_law_as_the_stored_clients(self):
    # Means over 1,500 clients of each: examples per client, words per
    # example, tags per example, and the frequency of each of the 5 most
    # frequent tags. Tolerance: 4 standard errors of the difference of two
    # independent means (per-client values, so clients are the units).
    stored = stackoverflow_arrays.SplitSource(stackoverflow_arrays.load(
        self.data_dir, self.words, self.tags)['train'])
    made = [self.population.client_examples(f'{i:08d}') for i in range(1500)]
    kept = [stored.client_examples(c) for c in stored.client_ids]

    def per_client(examples):
      return dict(
          examples=np.array([len(t) for _, _, t in examples], float),
          words=np.array([np.diff(o).mean() for _, o, _ in examples]),
          tags=np.array([t.sum(1).mean() for _, _, t in examples]),
          **{f'tag{k}': np.array([t[:, k].mean() for _, _, t in examples])
             for k in range(5)})

    a, b = per_client(made), per_client(kept)
    for name in a:
      se = np.sqrt(a[name].var(ddof=1) / len(a[name]) +
                   b[name].var(ddof=1) / len(b[name]))
      self.assertLess(abs(a[name].mean() - b[name].mean()), 4 * se,
                      msg=f'{name}: {a[name].mean()} vs {b[name].mean()}')

  def test_checkpoints_refuse_another_population(self):
    stored = tasks.create_task('stackoverflow_lr', self.data_dir,
                               embedded_config=_SMALL, population='stored')
    # As many clients as stored, but made on demand: another population.
    made = tasks.create_task('stackoverflow_lr', self.data_dir,
                             embedded_config=_SMALL,
                             population=_SMALL['train_clients'])
    self.assertEqual(stored.population, made.population)
    config = config_lib.RunConfig(task='stackoverflow_lr',
                                  aggregators=('fedavg',)).resolved(stored)
    plan = types.SimpleNamespace(name='fedavg', params={},
                                 sampling=registry.FIXED_SIZE)
    fingerprints = [
        checkpoints.RunCheckpointer(
            self.create_tempdir().full_path,
            run_params.fingerprint_config(task, config, plan, 1.0, False),
            print_fn=lambda _: None).fingerprint
        for task in (stored, made)]
    self.assertNotEqual(fingerprints[0], fingerprints[1])
    directory = self.create_tempdir().full_path
    first = checkpoints.RunCheckpointer(
        directory, run_params.fingerprint_config(stored, config, plan, 1.0,
                                                False), print_fn=lambda _: None)
    first.write_record({'final_metric': 0.5}, [])
    self.assertIsNotNone(first.read_record())
    # The other population's run does not reuse it (its checkpoints are set
    # aside and refused the same way, by fingerprint).
    self.assertIsNone(checkpoints.RunCheckpointer(
        directory, run_params.fingerprint_config(made, config, plan, 1.0,
                                                False),
        print_fn=lambda _: None).read_record())

  def test_checkpoints_refuse_other_embedded_data(self):
    task = tasks.create_task('stackoverflow_lr', self.data_dir,
                             embedded_config=_SMALL, population='stored')
    plan = types.SimpleNamespace(name='fedavg', params={},
                                 sampling=registry.FIXED_SIZE)
    fingerprints = []
    other = dict(_SMALL, seed=_SMALL['seed'] + 1)
    for embedded_config in (None, _SMALL, other):
      config = config_lib.RunConfig(
          task='stackoverflow_lr', aggregators=('fedavg',),
          embedded_config=embedded_config).resolved(task)
      fingerprints.append(run_params.fingerprint_config(
          task, config, plan, 1.0, False))
    self.assertNotIn('embedded_config', fingerprints[0])
    self.assertEqual(fingerprints[1]['embedded_config'], _SMALL)
    self.assertNotEqual(fingerprints[1], fingerprints[2])

  def test_ids_and_errors(self):
    ids = self.population.client_ids
    self.assertLen(ids, 100_000)
    self.assertEqual(ids[0], '00000000')
    self.assertEqual(ids[-1], '00099999')
    self.assertEqual(np.asarray(ids)[12345], '00012345')
    with self.assertRaisesRegex(ValueError, "'00100000' is not a client"):
      self.population.client_examples('00100000')
    with self.assertRaisesRegex(ValueError, "'abc' is not a client"):
      self.population.client_examples('abc')
    with self.assertRaisesRegex(ValueError, 'population=1 must be'):
      stackoverflow_population.Population(1, self.words, self.tags)

  def test_task_population_choice(self):
    made = tasks.create_task('stackoverflow_lr', self.data_dir,
                             embedded_config=_SMALL)
    self.assertEqual(made.population,
                     stackoverflow_population.PAPER_POPULATION)
    self.assertEqual(made.population_source, 'on demand')
    self.assertLen(made.round_input(['00300000', '00000001'], seed=0), 2)
    stored = tasks.create_task('stackoverflow_lr', self.data_dir,
                               embedded_config=_SMALL, population='stored')
    self.assertEqual(stored.population, _SMALL['train_clients'])
    self.assertEqual(stored.population_source, 'stored')
    sized = tasks.create_task('stackoverflow_lr', self.data_dir,
                              embedded_config=_SMALL, population=5000)
    self.assertEqual(sized.population, 5000)
    with self.assertRaisesRegex(ValueError, 'population=5000 applies to the '
                                'embedded stackoverflow_lr data only'):
      tasks.create_task('digits', self.create_tempdir().full_path,
                        population=5000)
    with self.assertRaisesRegex(ValueError, "population must be None, "
                                "'stored' or an int >= 2, found 'many'"):
      config_lib.RunConfig(task='stackoverflow_lr', aggregators=('fedavg',),
                           population='many')
    with self.assertRaisesRegex(ValueError, "population=10 applies to the "
                                "embedded stackoverflow_lr data only, not to "
                                "task='digits'"):
      config_lib.RunConfig(task='digits', aggregators=('fedavg',),
                           population=10)


if __name__ == '__main__':
  tf.test.main()
