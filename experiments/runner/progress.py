"""A run's progress: a live bar on a terminal, lines in a log.

On a terminal (`sys.stderr` is a tty) each run draws a tqdm bar with its
loss, metric, epsilon and upload. Otherwise (a log file, a pipe) it writes
a plain line every `LINE_EVERY_ROUNDS` rounds or `LINE_EVERY_SECONDS`
seconds, whichever comes first, and at the last round: no carriage-return
redraws for a log to fill with.
"""

import math
import sys
import time

LINE_EVERY_ROUNDS = 10
LINE_EVERY_SECONDS = 30.0


class RunProgress:
  """The progress display of one run (`progress=False`: none)."""

  def __init__(self, run_, progress, stream=None):
    self._run = run_
    self._stream = sys.stderr if stream is None else stream
    self._bar = None
    self._enabled = bool(run_.config.progress)
    self._last_line = time.monotonic()
    if self._enabled and _is_terminal(self._stream):
      from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top
      self._bar = tqdm.tqdm(
          desc=self._name, leave=True, initial=progress.completed,
          total=run_.config.rounds, file=self._stream)

  @property
  def _name(self) -> str:
    return f'{self._run.task.name}/{self._run.name}'

  def update(self, progress, row) -> None:
    """Records a finished round (`row`: the round's metrics)."""
    if not self._enabled:
      return
    fields = _fields(self._run, progress, row)
    if self._bar is not None:
      self._bar.set_postfix(fields)
      self._bar.update(1)
      return
    now = time.monotonic()
    done = progress.completed
    if (done % LINE_EVERY_ROUNDS == 0 or done == self._run.config.rounds or
        now - self._last_line >= LINE_EVERY_SECONDS):
      self._last_line = now
      text = ' '.join(f'{k}={v}' for k, v in fields.items())
      print(f'[{self._name}] round {done}/{self._run.config.rounds} {text}',
            file=self._stream, flush=True)

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()


def _fields(run_, progress, row) -> dict:
  """The loss, metric, epsilon and upload bits shown for a round."""
  fields = {}
  if not math.isnan(row['train_loss']):
    fields['loss'] = f"{row['train_loss']:.4f}"
  if progress.last_metric is not None:
    fields[run_.task.metric_label] = f'{progress.last_metric:.4f}'
  if progress.epsilon is not None:
    fields['eps'] = f'{progress.epsilon:.3f}'
  fields['up_bits'] = row['upload_bits']
  return fields


def _is_terminal(stream) -> bool:
  try:
    return stream.isatty()
  except (AttributeError, ValueError):
    return False
