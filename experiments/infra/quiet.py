"""Quiet by default: no line of TensorFlow's C++, absl's or gRPC's logging.

On a CPU machine TensorFlow prints a few hundred lines a run from C++ (cuDNN,
cuFFT and cuBLAS factory "errors" at import, grappler's "Starting new
session" per computation, gRPC's fork notices): none says anything a user
acts on, and they bury the project's own lines. A fault that matters still
reaches the user, as an exception or as the project's one-line error.

`setup()` runs before TensorFlow is imported (`experiments/__init__.py` calls
it, so every `python -m experiments.<command>` is quiet). It never overrides
a level the user has set: a `TF_CPP_MIN_LOG_LEVEL` or `GRPC_VERBOSITY` in the
environment is kept, and `--verbose` on the command line sets nothing.
"""

import os
import re
import sys
from typing import Optional, Sequence

VERBOSE_FLAG = '--verbose'
# TensorFlow's C++ logging: 3 drops INFO, WARNING and ERROR (FATAL stays).
# gRPC's (TFF's workers and executors): NONE.
SETTINGS = {'TF_CPP_MIN_LOG_LEVEL': '3', 'GRPC_VERBOSITY': 'NONE'}
# A line TensorFlow's, absl's or gRPC's C++ logging wrote
# (`2026-11-27 16:23:42.237442: E tensorflow/...`, `I0000 00:00:...`, the
# CPU feature notice's second line, absl's pre-initialisation notice).
NATIVE_LOG_LINE = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] |[IWEF]\d{4} |'
    r'To enable the following instructions|'
    r'WARNING: All log messages before absl::InitializeLog)')


def verbose_requested(argv: Sequence[str]) -> bool:
  """Whether the command line asks for TensorFlow's logging."""
  return any(a == VERBOSE_FLAG or a in (f'{VERBOSE_FLAG}=true',
                                        f'{VERBOSE_FLAG}=1')
             for a in argv[1:])


def setup(argv: Optional[Sequence[str]] = None) -> dict:
  """Turns the native logging off unless asked for; returns what it set.

  Args:
    argv: The command line (default `sys.argv`).
  """
  argv = sys.argv if argv is None else argv
  if verbose_requested(argv):
    return {}
  changed = {}
  for name, value in SETTINGS.items():
    if name not in os.environ:
      os.environ[name] = value
      changed[name] = value
  return changed
