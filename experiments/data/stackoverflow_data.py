"""Embedded StackOverflow data in TFF's exact on-disk format.

No dataset can be downloaded here, so `generate` writes, deterministically from
a seed, the three files TFF's StackOverflow loaders read:

*   `<dir>/stackoverflow.sqlite`: tables `examples(split_name, client_id,
    serialized_example_proto)` and `client_metadata(client_id, split_name,
    num_examples)`, splits `train`, `heldout`, `test`; each example a
    `tf.train.Example` with bytes features `tokens`, `title`, `tags`
    ('|'-joined), `type`, `creation_date` and int64 feature `score`
    (`tff.simulation.datasets.stackoverflow.load_data(cache_dir=<dir>)` reads
    it as is).
*   `<dir>/datasets/stackoverflow.word_count`: lines `word count`, most
    frequent first, counts of distinct training users using the word.
*   `<dir>/datasets/stackoverflow.tag_count`: JSON `{tag: count}`.

The generative model: a Zipfian background vocabulary; latent topics, each with
its own Zipfian word distribution over a random subset of the vocabulary and a
few preferred tags; each client has Dirichlet topic proportions (non-i.i.d.)
and a heavy-tailed (log-normal) number of examples, scaled down from the real
set's mean ~400 / std ~1300 per client by `scale`. Tags are thus predictable
from words, as in the real data.
"""

import collections
import dataclasses
import json
import math
import os
import sqlite3
from typing import Optional

import numpy as np
import tensorflow as tf

SQLITE_NAME = 'stackoverflow.sqlite'
WORD_COUNT_NAME = 'stackoverflow.word_count'
TAG_COUNT_NAME = 'stackoverflow.tag_count'
_STAMP_NAME = 'embedded_stackoverflow.json'

DEFAULT_CONFIG = collections.OrderedDict(
    seed=0,
    train_clients=4000,
    heldout_clients=200,
    test_clients=400,
    num_words=1500,
    num_tags=80,
    num_topics=25,
    # Real data: mean ~400, std ~1300 examples per client; scaled by 1/10.
    mean_examples=40.0,
    std_examples=130.0,
    max_examples=1000,
    topic_concentration=0.3,
    topic_word_fraction=0.6,
)


def generate(data_dir: str, config: Optional[dict] = None) -> dict:
  """Writes the embedded StackOverflow files into `data_dir` (idempotent).

  Regenerates only when the files are missing or were generated with another
  configuration.

  Args:
    data_dir: Target directory (created if needed).
    config: Overrides of `DEFAULT_CONFIG`.

  Returns:
    The configuration used, with summary statistics.
  """
  cfg = resolved_config(config)
  stamp_path = os.path.join(data_dir, _STAMP_NAME)
  sqlite_path = os.path.join(data_dir, SQLITE_NAME)
  if os.path.exists(stamp_path) and os.path.exists(sqlite_path):
    with open(stamp_path) as f:
      stamp = json.load(f)
    if stamp.get('config') == cfg:
      return stamp
  os.makedirs(os.path.join(data_dir, 'datasets'), exist_ok=True)
  stats = _write(data_dir, cfg)
  stamp = dict(config=cfg, stats=stats)
  with open(stamp_path, 'w') as f:
    json.dump(stamp, f, indent=1)
  return stamp


def is_embedded(data_dir: str) -> bool:
  """Whether `data_dir` holds data written by `generate`."""
  return os.path.exists(os.path.join(data_dir, _STAMP_NAME))


@dataclasses.dataclass(frozen=True)
class Topics:
  """The generative model's fixed part, a function of the config's seed."""
  background: np.ndarray  # [num_words] word probabilities
  topic_words: np.ndarray  # [num_topics, num_words]
  topic_tags: np.ndarray  # [num_topics, num_tags]
  # Log-normal parameters of the number of examples per client.
  mu: float
  sigma2: float


def draw_topics(cfg, rng: np.random.Generator) -> Topics:
  """Draws the topics from `rng` (the first draws of `cfg['seed']`'s stream)."""
  num_words, num_tags = cfg['num_words'], cfg['num_tags']
  background = _zipf(num_words, 1.1)
  topic_words, topic_tags = [], []
  for _ in range(cfg['num_topics']):
    support = rng.choice(num_words, size=max(20, num_words // 10),
                         replace=False)
    p = np.zeros(num_words)
    p[support] = _zipf(len(support), 1.0)[rng.permutation(len(support))]
    topic_words.append(p)
    preferred = rng.choice(num_tags, size=3, replace=False)
    q = np.full(num_tags, 0.02 / num_tags)
    q[preferred] += np.array([0.6, 0.25, 0.13])
    topic_tags.append(q / q.sum())
  sigma2 = math.log(1.0 + (cfg['std_examples'] / cfg['mean_examples'])**2)
  mu = math.log(cfg['mean_examples']) - sigma2 / 2.0
  return Topics(background, np.array(topic_words), np.array(topic_tags), mu,
                sigma2)


def resolved_config(config: Optional[dict] = None) -> dict:
  """`DEFAULT_CONFIG` with `config`'s overrides (unknown keys refused)."""
  cfg = collections.OrderedDict(DEFAULT_CONFIG)
  for key, value in (config or {}).items():
    if key not in cfg:
      raise ValueError(f'Unknown embedded-data setting {key!r}; known: '
                       f'{sorted(cfg)}.')
    cfg[key] = value
  return cfg


def word_name(index: int) -> str:
  return f'w{index:05d}'


def tag_name(index: int) -> str:
  return f'tag{index:03d}'


def _client_rows(cfg, rng, topics, names, key, n):
  """One client's `n` example rows, and the words and tags it used.

  `names` is (word names, tag names); `key` is (split, client id). Draws from
  `rng` in a fixed order (the topic mixture, then example by example), so the
  data is the same for the same seed.
  """
  words, tags = names
  mixture = rng.dirichlet(
      np.full(cfg['num_topics'], cfg['topic_concentration']))
  rows = []
  used_words, used_tags = set(), set()
  for j in range(n):
    topic = rng.choice(cfg['num_topics'], p=mixture)
    length = int(rng.integers(5, 40))
    from_topic = rng.random(length) < cfg['topic_word_fraction']
    ids = np.where(
        from_topic,
        rng.choice(len(words), size=length, p=topics.topic_words[topic]),
        rng.choice(len(words), size=length, p=topics.background))
    num_example_tags = int(rng.integers(1, 4))
    tag_ids = rng.choice(len(tags), size=num_example_tags, replace=False,
                         p=topics.topic_tags[topic])
    title_ids = ids[:min(6, length)]
    example_words = [words[i] for i in ids]
    example_tags = [tags[i] for i in tag_ids]
    used_words.update(example_words)
    used_tags.update(example_tags)
    rows.append((*key, _example(' '.join(example_words),
                                ' '.join(words[i] for i in title_ids),
                                '|'.join(example_tags), j, rng)))
  return rows, used_words, used_tags


def _write(data_dir, cfg):
  rng = np.random.default_rng(cfg['seed'])
  words = [word_name(i) for i in range(cfg['num_words'])]
  tags = [tag_name(i) for i in range(cfg['num_tags'])]
  topics = draw_topics(cfg, rng)
  mu, sigma2 = topics.mu, topics.sigma2

  connection = sqlite3.connect(os.path.join(data_dir, SQLITE_NAME + '.tmp'))
  connection.execute('DROP TABLE IF EXISTS examples')
  connection.execute('DROP TABLE IF EXISTS client_metadata')
  connection.execute('CREATE TABLE examples (split_name TEXT NOT NULL, '
                     'client_id TEXT NOT NULL, '
                     'serialized_example_proto BLOB NOT NULL)')
  connection.execute('CREATE TABLE client_metadata (client_id TEXT NOT NULL, '
                     'split_name TEXT NOT NULL, num_examples INTEGER NOT NULL)')
  word_users = collections.Counter()
  tag_users = collections.Counter()
  counts = []
  client_number = 0
  for split in ('train', 'heldout', 'test'):
    for _ in range(cfg[f'{split}_clients']):
      client_id = f'{client_number:08d}'
      client_number += 1
      n = int(min(cfg['max_examples'],
                  max(1, round(rng.lognormal(mu, math.sqrt(sigma2))))))
      rows, used_words, used_tags = _client_rows(
          cfg, rng, topics, (words, tags), (split, client_id), n)
      connection.executemany('INSERT INTO examples VALUES (?, ?, ?)', rows)
      connection.execute('INSERT INTO client_metadata VALUES (?, ?, ?)',
                         (client_id, split, n))
      if split == 'train':
        word_users.update(used_words)
        tag_users.update(used_tags)
        counts.append(n)
  connection.commit()
  connection.close()
  os.replace(os.path.join(data_dir, SQLITE_NAME + '.tmp'),
             os.path.join(data_dir, SQLITE_NAME))
  with open(os.path.join(data_dir, 'datasets', WORD_COUNT_NAME), 'w') as f:
    for word, count in sorted(word_users.items(), key=lambda x: (-x[1], x[0])):
      f.write(f'{word} {count}\n')
  with open(os.path.join(data_dir, 'datasets', TAG_COUNT_NAME), 'w') as f:
    json.dump(dict(sorted(tag_users.items(), key=lambda x: (-x[1], x[0]))), f)
  counts = np.array(counts)
  return dict(train_examples=int(counts.sum()),
              mean_examples_per_client=float(counts.mean()),
              std_examples_per_client=float(counts.std()))


def _zipf(n, exponent):
  p = 1.0 / np.arange(1, n + 1)**exponent
  return p / p.sum()


def _example(tokens, title, tags, index, rng):
  feature = {
      'tokens': _bytes(tokens),
      'title': _bytes(title),
      'tags': _bytes(tags),
      'type': _bytes('question' if index % 3 == 0 else 'answer'),
      'creation_date': _bytes(f'2018-0{1 + index % 9}-1{index % 10} 00:00:00'
                              ' UTC'),
      'score': tf.train.Feature(
          int64_list=tf.train.Int64List(value=[int(rng.integers(-2, 20))])),
  }
  return tf.train.Example(features=tf.train.Features(
      feature=feature)).SerializeToString()


def _bytes(text):
  return tf.train.Feature(bytes_list=tf.train.BytesList(
      value=[text.encode('utf-8')]))
