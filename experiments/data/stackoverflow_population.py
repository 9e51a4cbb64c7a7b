"""The embedded StackOverflow population at the paper's size, made on demand.

SO-LR's training split has 342,477 clients (TFF's `stackoverflow.load_data`;
Reddi et al. 2021, Table 5; the DP-REC paper's SO-LR setting). Writing that
many clients into SQLite would take hours here (4,000 take about 70 s), so a
`Population` makes each client's data when it is sampled, deterministically
from (data seed, client index), with the generative model of
`stackoverflow_data` and its topics: the same topics, the same per-client
laws (log-normal number of examples, Dirichlet topic mixture), the same
per-example laws (topic per example, length 5 to 39, each word from the
topic's or the background's Zipfian law, 1 to 3 distinct tags from the
topic's tag law, the title being the first 6 words). Only the random streams
differ: one per client instead of one sequential stream, and
draws vectorised per client (the tags without replacement through Gumbel
top-k, which has the law of sequential draws; Efraimidis and Spirakis 2006).

The vocabulary, validation and test sets stay those of the stored files
(`stackoverflow_data.generate`): held-out clients of the same distribution.
A client's examples come out as the arrays fast path's CSR rows
(`stackoverflow_arrays`): the words of `tokens + ' ' + title` that are in the
vocabulary, and the multi-hot vector of in-vocabulary tags, as TFF's
`build_to_ids_fn` would make of the same example.
"""

import numpy as np

from experiments.data import stackoverflow_data

PAPER_POPULATION = 342_477
_STREAM = 0x50C1E  # Separates the clients' streams from the stored data's.
_MIN_LENGTH, _MAX_LENGTH = 5, 40  # rng.integers(5, 40), as stored.
_TITLE_WORDS = 6


class Population:
  """`size` training clients, each made on demand (`client_examples`)."""

  def __init__(self, size: int, word_vocab, tag_vocab,
               embedded_config=None):
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or (
        size < 2):
      raise ValueError(f'population={size!r} must be an int of at least 2.')
    self._cfg = stackoverflow_data.resolved_config(embedded_config)
    self.size = int(size)
    self.num_words = len(word_vocab)
    self.num_tags = len(tag_vocab)
    self._topics = stackoverflow_data.draw_topics(
        self._cfg, np.random.default_rng(self._cfg['seed']))
    # Generator word / tag index -> vocabulary id (-1: out of vocabulary).
    self._word_id = _vocab_ids(word_vocab, self._cfg['num_words'],
                               stackoverflow_data.word_name)
    self._tag_id = _vocab_ids(tag_vocab, self._cfg['num_tags'],
                              stackoverflow_data.tag_name)
    self._topic_cdf = np.cumsum(self._topics.topic_words, axis=1)
    self._background_cdf = np.cumsum(self._topics.background)
    self._log_topic_tags = np.log(self._topics.topic_tags)
    self.client_ids = _ClientIds(self.size)

  def client_examples(self, client_id) -> tuple:
    """(word_ids int32, word_offsets int64 [n + 1], tags uint8 [n, tags])."""
    index = self.client_ids.index(client_id)
    cfg, topics = self._cfg, self._topics
    rng = np.random.default_rng([cfg['seed'], _STREAM, index])
    n = int(min(cfg['max_examples'], max(1, round(rng.lognormal(
        topics.mu, np.sqrt(topics.sigma2))))))
    mixture = rng.dirichlet(np.full(cfg['num_topics'],
                                    cfg['topic_concentration']))
    example_topic = rng.choice(cfg['num_topics'], size=n, p=mixture)
    lengths = rng.integers(_MIN_LENGTH, _MAX_LENGTH, size=n)
    token_topic = np.repeat(example_topic, lengths)
    from_topic = rng.random(len(token_topic)) < cfg['topic_word_fraction']
    u = rng.random(len(token_topic))
    words = np.searchsorted(self._background_cdf, u, side='right')
    for topic in np.unique(token_topic[from_topic]):
      mask = from_topic & (token_topic == topic)
      words[mask] = np.searchsorted(self._topic_cdf[topic], u[mask],
                                    side='right')
    words = np.minimum(words, cfg['num_words'] - 1)  # cdf[-1] may be < 1.
    # Each example's text: its words, then its title (its first 6 words).
    starts = np.cumsum(lengths) - lengths
    titles = np.minimum(lengths, _TITLE_WORDS)
    example = np.concatenate([np.repeat(np.arange(n), lengths),
                              np.repeat(np.arange(n), titles)])
    within = np.arange(titles.sum()) - np.repeat(np.cumsum(titles) - titles,
                                                 titles)
    text = np.concatenate([words, words[np.repeat(starts, titles) + within]])
    order = np.argsort(example, kind='stable')
    ids, example = self._word_id[text[order]], example[order]
    keep = ids >= 0
    counts = np.bincount(example[keep], minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    # 1 to 3 distinct tags per example, without replacement (Gumbel top-k).
    num_example_tags = rng.integers(1, 4, size=n)
    keys = self._log_topic_tags[example_topic] + rng.gumbel(
        size=(n, cfg['num_tags']))
    ranked = np.argsort(-keys, axis=1)
    tags = np.zeros((n, self.num_tags), np.uint8)
    for k in range(3):
      rows = np.nonzero(num_example_tags > k)[0]
      tag = self._tag_id[ranked[rows, k]]
      tags[rows[tag >= 0], tag[tag >= 0]] = 1
    return ids[keep].astype(np.int32), offsets, tags


class _ClientIds:
  """The ids '00000000', '00000001', ... of a population, never listed."""

  def __init__(self, size: int):
    self._size = size
    self._array = None

  def __len__(self) -> int:
    return self._size

  def __getitem__(self, i):
    if isinstance(i, slice):
      return [self[j] for j in range(*i.indices(self._size))]
    if not -self._size <= i < self._size:
      raise IndexError(f'client index {i} out of range for {self._size}.')
    return f'{i % self._size:08d}'

  def __iter__(self):
    return (f'{i:08d}' for i in range(self._size))

  def array(self) -> np.ndarray:
    """All the ids as a NumPy string array (for sampling; made once)."""
    if self._array is None:
      self._array = np.char.zfill(np.arange(self._size).astype(str), 8)
    return self._array

  def __array__(self, dtype=None, copy=None):
    del copy
    array = self.array()
    return array if dtype is None else array.astype(dtype)

  def index(self, client_id) -> int:
    text = str(client_id)
    if len(text) != 8 or not text.isdigit() or int(text) >= self._size:
      raise ValueError(f'client_ids: {client_id!r} is not a client of this '
                       f'population of {self._size}.')
    return int(text)


def _vocab_ids(vocab, size, name) -> np.ndarray:
  ids = np.full(size, -1, np.int64)
  position = {v: i for i, v in enumerate(vocab)}
  for k in range(size):
    ids[k] = position.get(name(k), -1)
  return ids
