"""A full disk at the writes of a checkpoint, a TensorBoard event, a record
and a table: one line naming the file and the cause, nothing written before
corrupted, and a rerun with space resumes to the uninterrupted result."""

import builtins
import contextlib
import errno
import json
import os
from unittest import mock

import tensorflow as tf
import tensorflow_federated as tff

from tests import support

_ARGS = ['--task=digits', '--aggregators=fedavg', '--rounds=3',
         '--clients_per_round=4', '--eval_every=10']


@contextlib.contextmanager
def _full_disk(target, nth):
  """The disk full at the `nth` write of a file named `target*`, or at the
  `nth` TensorBoard release (`target` 'tensorboard': TensorFlow's event
  writer raises its own error)."""
  calls = [0]

  def full():
    calls[0] += 1
    return calls[0] == nth

  if target == 'tensorboard':
    release = tff.program.TensorBoardReleaseManager.release

    async def failing(self, value, key=None):
      if full():
        raise tf.errors.ResourceExhaustedError(
            None, None, 'events.out.tfevents; No space left on device')
      return await release(self, value, key=key)

    with mock.patch.object(tff.program.TensorBoardReleaseManager, 'release',
                           failing):
      yield
    return
  real_open = builtins.open

  def open_(file, mode='r', *args, **kwargs):
    if any(m in mode for m in 'wax') and os.path.basename(
        str(file)).startswith(target) and full():
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), file)
    return real_open(file, mode, *args, **kwargs)

  with mock.patch.object(builtins, 'open', open_):
    yield


def _run(output_dir, data_dir, fault=None):
  """`experiments.run`, in this process (`support.run_in_process`)."""
  with _full_disk(*fault) if fault else contextlib.nullcontext():
    return support.run_in_process(
        _ARGS + [f'--output_dir={output_dir}', f'--data_dir={data_dir}'])


def _record(output_dir):
  with open(os.path.join(output_dir, 'digits', 'fedavg', 'seed0',
                         'record.json')) as f:
    return json.load(f)['record']


class FullDiskTest(tf.test.TestCase):

  def test_each_write_fails_in_one_line_and_a_rerun_resumes(self):
    data_dir = self.create_tempdir().full_path
    reference_dir = self.create_tempdir().full_path
    reference = _run(reference_dir, data_dir)
    self.assertEqual(reference.returncode, 0, reference.stderr[-3000:])
    output_dir = self.create_tempdir().full_path
    run_dir = os.path.join(output_dir, 'digits', 'fedavg', 'seed0')
    # In order, each failing where the one before stopped: round 2's
    # checkpoint, round 2's TensorBoard event, the run's record, the table.
    for fault, named, resumes in (
        (('state.npz', 2), os.path.join(run_dir, 'checkpoints', 'round_2'),
         False),
        (('tensorboard', 1), os.path.join(output_dir, 'digits',
                                          'tensorboard', 'fedavg', 'seed0'),
         True),
        (('record.json', 1), os.path.join(run_dir, 'record.json'), True),
        (('table.md', 1), os.path.join(output_dir, 'digits', 'table.md'),
         True)):
      result = _run(output_dir, data_dir, fault)
      self.assertEqual(result.returncode, 2, f'{fault}: {result.stderr}')
      errors = [l for l in result.stderr.splitlines()
                if l.startswith('error:')]
      self.assertLen(errors, 1, f'{fault}: {result.stderr[-3000:]}')
      self.assertIn(f'cannot write {named}: ', errors[0])
      self.assertIn('No space left on device', errors[0])
      self.assertIn('(errno 28)', errors[0])
      self.assertNotIn('Traceback', result.stderr)
      if resumes:
        self.assertIn('resuming after round', result.stdout + result.stderr,
                      fault)
    self.assertFalse(os.path.exists(os.path.join(output_dir, 'digits',
                                                 'table.md')))
    final = _run(output_dir, data_dir)
    self.assertEqual(final.returncode, 0, final.stderr[-3000:])
    self.assertIn('already finished', final.stdout + final.stderr)
    got, want = _record(output_dir), _record(reference_dir)
    for key in ('final_metric', 'final_metrics', 'rounds'):
      self.assertEqual(got[key], want[key], key)
    # Round 2 ran twice without its checkpoint (the checkpoint's and the
    # TensorBoard event's failures): lost, its traffic counted as sent.
    self.assertEqual(got['lost_rounds'], 2)
    self.assertEqual(got['upload_bits_total'],
                     want['upload_bits_total'] * 5 // 3)
    self.assertTrue(os.path.exists(os.path.join(output_dir, 'digits',
                                                'table.md')))
    leftovers = [n for _, dirs, names in os.walk(output_dir)
                 for n in dirs + names if '.partial' in n or '.tmp' in n]
    self.assertEmpty(leftovers)


if __name__ == '__main__':
  tf.test.main()
