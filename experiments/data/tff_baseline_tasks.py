"""TFF's own baseline tasks on their real data: FEMNIST and Shakespeare.

Each needs TFF's decompressed sqlite file in the data directory (no
download here).
"""

import os

import tensorflow_federated as tff

from experiments.data import task_types


def build_emnist(settings: task_types.BuildSettings) -> task_types.TaskData:
  """FEMNIST (62 classes), TFF's CNN, from emnist_all.sqlite."""
  data_dir, batch = settings.data_dir, settings.batch_size
  _require(os.path.join(data_dir, 'emnist_all.sqlite'), 'emnist',
           'place TFF\'s emnist_all.sqlite (decompressed from '
           'emnist_all.sqlite.lzma) in --data_dir.')
  baseline = tff.simulation.baselines.emnist.create_character_recognition_task(
      tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=batch),
      model_id='cnn', only_digits=False, cache_dir=data_dir)
  return task_types.TaskData(
      baseline, 'real', f'TFF FEMNIST from {data_dir}/emnist_all.sqlite.')


def build_shakespeare(
    settings: task_types.BuildSettings) -> task_types.TaskData:
  """Shakespeare next-character prediction from shakespeare.sqlite."""
  data_dir, batch = settings.data_dir, settings.batch_size
  _require(os.path.join(data_dir, 'shakespeare.sqlite'), 'shakespeare',
           'place TFF\'s shakespeare.sqlite (decompressed from '
           'shakespeare.sqlite.lzma) in --data_dir.')
  baseline = (
      tff.simulation.baselines.shakespeare.create_character_prediction_task(
          tff.simulation.baselines.ClientSpec(num_epochs=1, batch_size=batch),
          sequence_length=80, cache_dir=data_dir))
  return task_types.TaskData(
      baseline, 'real',
      f'TFF Shakespeare from {data_dir} (accuracy over all positions).')


def _require(path, what, how):
  """MissingDataError unless `path` exists."""
  if not os.path.exists(path):
    raise task_types.MissingDataError(
        f'The {what} task needs {os.path.basename(path)} at {path}; {how}')
