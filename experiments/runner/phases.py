"""Wall time by phase of the current run (printed at its end)."""

import collections
import contextlib
import time

_PHASES = collections.Counter()


@contextlib.contextmanager
def timed(phase: str):
  """Adds the time spent inside to `phase`."""
  start = time.perf_counter()
  try:
    yield
  finally:
    _PHASES[phase] += time.perf_counter() - start


def clear() -> None:
  _PHASES.clear()


def seconds() -> dict:
  """{phase: seconds} so far."""
  return dict(_PHASES)


def line(seconds_by_phase=None, title: str = 'Time by phase (s)') -> str:
  """'Time by phase (s): a 1.0, b 0.5', the longest first: this process's
  phases, or `seconds_by_phase` ({phase: seconds})."""
  values = _PHASES if seconds_by_phase is None else seconds_by_phase
  return f'{title}: ' + ', '.join(
      f'{k} {v:.1f}' for k, v in sorted(values.items(), key=lambda kv: -kv[1]))
