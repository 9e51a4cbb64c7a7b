"""Which clients a round trains, and the seed of their examples' order.

Both are functions of the run's recorded seed (and the round), so a run
can be replayed: `experiments.runner.training` draws each round with them,
and the throughput bench replays the same rounds.
"""

import numpy as np

from experiments.runner import registry


def sample_clients(rng: np.random.Generator, client_ids, clients_per_round: int,
                   sampling: str) -> np.ndarray:
  """One round's clients, drawn as `sampling` (a `registry.SAMPLINGS` scheme).

  Poisson sampling includes each of the N clients independently with
  probability B/N: the round has B clients on average, possibly none (the
  aggregators then release noise alone, as their accounting assumes).
  """
  client_ids = np.asarray(client_ids)
  if sampling == registry.POISSON:
    rate = clients_per_round / len(client_ids)
    return client_ids[rng.random(len(client_ids)) < rate]
  if sampling not in (registry.WITH_REPLACEMENT, registry.FIXED_SIZE):
    raise ValueError(f'sampling must be one of {registry.SAMPLINGS}, found '
                     f'{sampling!r}.')
  return rng.choice(client_ids, size=clients_per_round,
                    replace=sampling == registry.WITH_REPLACEMENT)


def client_data_seed(seed: int, round_num: int) -> list:
  """Seeds the order of the round's client examples (a function of both)."""
  return [_CLIENT_DATA_STREAM, seed, round_num]


_CLIENT_DATA_STREAM = 0xDA7A
