"""The StackOverflow tag-prediction task (SO-LR), real or embedded data.

TFF's logistic-regression tag prediction on `tff.simulation.datasets.
stackoverflow`: the real data where TFF's files are in the data directory,
else the embedded synthetic data in the same format
(`stackoverflow_data`), whose training clients are made on demand
(`stackoverflow_population`) unless `population='stored'`.
"""

import collections
import json
import os

import tensorflow_federated as tff
# `create_tag_prediction_task_from_datasets` is not exported by TFF 0.87 (the
# public `create_tag_prediction_task` downloads the vocabularies), so it is
# imported from its module, here only.
from tensorflow_federated.python.simulation.baselines.stackoverflow import (
    tag_prediction_tasks)

from experiments.data import stackoverflow_arrays
from experiments.data import stackoverflow_data
from experiments.data import stackoverflow_population
from experiments.data import task_types

# Sizes of the task (vocabulary and tags kept).
TRAIN_MAX_ELEMENTS = 1000  # SO-LR ClientSpec max_elements, as in TFF's task.
EMBEDDED_WORD_VOCAB = 1000
EMBEDDED_TAG_VOCAB = 50
REAL_WORD_VOCAB = 10000
REAL_TAG_VOCAB = 500


def build(settings: task_types.BuildSettings) -> task_types.TaskData:
  """The SO-LR task: real data where TFF's files are, else embedded data.

  Raises:
    ValueError: For a population with the real data.
    task_types.MissingDataError: For real data without its vocabulary counts.
  """
  data_dir, batch = settings.data_dir, settings.batch_size
  sqlite = os.path.join(data_dir, stackoverflow_data.SQLITE_NAME)
  if os.path.exists(sqlite) and not stackoverflow_data.is_embedded(data_dir):
    if settings.population is not None:
      raise ValueError(
          f'population={settings.population!r} applies to the embedded '
          'stackoverflow_lr data only; here the data are real.')
    word_vocab_size, tag_vocab_size = REAL_WORD_VOCAB, REAL_TAG_VOCAB
    data = dict(data_source='real',
                data_note=f'Real StackOverflow data from {sqlite}.')
  else:
    stackoverflow_data.generate(data_dir, settings.embedded_config)
    word_vocab_size, tag_vocab_size = EMBEDDED_WORD_VOCAB, EMBEDDED_TAG_VOCAB
    data = dict(data_source='embedded', data_note=_EMBEDDED_NOTE.format(
        data_dir=data_dir))
  baseline = _baseline(data_dir, batch,
                       *vocab(data_dir, word_vocab_size, tag_vocab_size))
  if data['data_source'] == 'real':
    return task_types.TaskData(baseline, **data)
  return _embedded(baseline, data, settings)


_EMBEDDED_NOTE = (
    'Embedded synthetic StackOverflow data (generated in TFF\'s format). To '
    'use the real dataset, place TFF\'s stackoverflow.sqlite and the '
    'extracted stackoverflow.word_count and stackoverflow.tag_count in '
    '--data_dir (now {data_dir}; the counts may sit in its datasets/ '
    'subfolder, as TFF caches them).')


def _baseline(data_dir, batch, word_vocab, tag_vocab):
  """TFF's tag-prediction task on the data in `data_dir`."""
  train, heldout, test = tff.simulation.datasets.stackoverflow.load_data(
      cache_dir=data_dir)
  return tag_prediction_tasks.create_tag_prediction_task_from_datasets(
      train_client_spec=tff.simulation.baselines.ClientSpec(
          num_epochs=1, batch_size=batch, max_elements=TRAIN_MAX_ELEMENTS),
      eval_client_spec=tff.simulation.baselines.ClientSpec(
          num_epochs=1, batch_size=256, shuffle_buffer_size=1),
      word_vocab=word_vocab, tag_vocab=tag_vocab, train_data=train,
      test_data=test, validation_data=heldout)


def _embedded(baseline, data, settings) -> task_types.TaskData:
  """The embedded task: its arrays, and its training clients stored or made
  on demand (the paper's 342,477 unless `settings.population` says)."""
  words_and_tags = vocab(settings.data_dir, EMBEDDED_WORD_VOCAB,
                         EMBEDDED_TAG_VOCAB)
  arrays = stackoverflow_arrays.load(settings.data_dir, *words_and_tags)
  clients, client_ids, source = arrays['train'], None, 'stored'
  note = data['data_note']
  if settings.population != task_types.STORED:
    clients = stackoverflow_population.Population(
        stackoverflow_population.PAPER_POPULATION
        if settings.population is None else settings.population,
        *words_and_tags, embedded_config=settings.embedded_config)
    client_ids, source = clients.client_ids, 'on demand'
    note += (f' Training clients: {clients.size}, each made on demand '
             'from the same generator (validation and test: the stored '
             'held-out clients).')
  return task_types.TaskData(
      baseline, data['data_source'], note, arrays=arrays,
      client_data=stackoverflow_arrays.ClientTensors(
          clients, settings.batch_size, TRAIN_MAX_ELEMENTS),
      client_ids=client_ids, population_source=source)


def vocab(data_dir, word_vocab_size: int, tag_vocab_size: int):
  """(words, tags): the most frequent of each, most frequent first."""
  return (list(_read_word_counts(data_dir))[:word_vocab_size],
          list(_read_tag_counts(data_dir))[:tag_vocab_size])


def _read_word_counts(data_dir):
  path = _find(data_dir, stackoverflow_data.WORD_COUNT_NAME)
  counts = collections.OrderedDict()
  with open(path) as f:
    for line in f:
      word, count = line.split()
      counts[word] = int(count)
  return counts


def _read_tag_counts(data_dir):
  with open(_find(data_dir, stackoverflow_data.TAG_COUNT_NAME)) as f:
    counts = json.load(f)
  return collections.OrderedDict(
      sorted(counts.items(), key=lambda item: item[1], reverse=True))


def _find(data_dir, name):
  for path in (os.path.join(data_dir, 'datasets', name),
               os.path.join(data_dir, name)):
    if os.path.exists(path):
      return path
  raise task_types.MissingDataError(
      f'{name} not found in {data_dir} or {data_dir}/datasets: place TFF\'s '
      f'extracted {name} there to use the real StackOverflow data.')
