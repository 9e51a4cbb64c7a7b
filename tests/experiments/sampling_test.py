"""Tests of experiments.runner.sampling: each aggregator's client sampling."""

import collections

import numpy as np
import tensorflow as tf

from experiments.runner import registry
from experiments.runner import sampling


class ClientSamplingTest(tf.test.TestCase):
  """Each aggregator's sampler is the scheme its accountant assumes."""

  def test_each_aggregator_names_its_scheme(self):
    self.assertEqual(registry.get('dp_rec').sampling, registry.WITH_REPLACEMENT)
    self.assertEqual(registry.get('dp_fedavg').sampling, registry.POISSON)
    self.assertEqual(registry.get('ddgauss16').sampling, registry.FIXED_SIZE)

  def test_poisson_includes_each_client_with_probability_b_over_n(self):
    rng = np.random.default_rng(3)
    ids = [f'c{i}' for i in range(50)]
    rounds, b = 4000, 5
    counts = collections.Counter()
    sizes = []
    for _ in range(rounds):
      sample = sampling.sample_clients(rng, ids, b, registry.POISSON)
      self.assertLen(set(sample), len(sample))  # No client twice.
      sizes.append(len(sample))
      counts.update(sample)
    q = b / len(ids)
    # Round sizes: Binomial(50, 0.1), mean 5, variance 4.5.
    self.assertAllClose(np.mean(sizes), b,
                        atol=4 * np.sqrt(len(ids) * q * (1 - q) / rounds))
    self.assertAllClose(np.var(sizes), len(ids) * q * (1 - q), rtol=0.1)
    # Empty rounds happen (0.9^50 = 0.5%: about 21 of 4000).
    self.assertBetween(sizes.count(0), 1, 60)
    # Each client: Binomial(4000, 0.1) inclusions, sd 19.
    for i in ids:
      self.assertAllClose(counts[i], rounds * q,
                          atol=5 * np.sqrt(rounds * q * (1 - q)))

  def test_fixed_size_and_with_replacement(self):
    rng = np.random.default_rng(4)
    ids = [f'c{i}' for i in range(6)]
    for _ in range(50):
      fixed = sampling.sample_clients(rng, ids, 6, registry.FIXED_SIZE)
      self.assertCountEqual(fixed, ids)
    repeats = [len(set(sampling.sample_clients(
        rng, ids, 6, registry.WITH_REPLACEMENT))) < 6 for _ in range(50)]
    self.assertGreater(sum(repeats), 40)  # P(no repeat) = 6!/6^6 = 0.015.

  def test_unknown_scheme(self):
    with self.assertRaisesRegex(ValueError, "sampling must be.*'bogus'"):
      sampling.sample_clients(np.random.default_rng(0), ['a'], 1, 'bogus')


if __name__ == '__main__':
  tf.test.main()
