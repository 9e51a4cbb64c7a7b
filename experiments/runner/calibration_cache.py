"""A verified on-disk cache of calibrations (clip ratios, noise multipliers).

A calibration runs the accountant 10 to 30 times; every run, test and CLI
process that plans the same aggregator repeats it. This cache keys each
result by the calibration's name, its arguments and a hash of the
accountants' source (tff_dprec/accounting/*.py and the dp_accounting
version), stores it as one small JSON file per key (written atomically, so
concurrent processes are safe), and on a hit re-evaluates epsilon at the
cached value once: a value whose epsilon exceeds the target is never
returned (it is recomputed). The cache only saves time; every value it
returns was checked against the target by the current accountant.

Location: $TFF_DPREC_CALIBRATION_CACHE, else ~/.cache/tff_dprec/calibrations;
TFF_DPREC_CALIBRATION_CACHE=off disables it.
"""

import functools
import glob
import hashlib
import json
import os
import tempfile
from typing import Callable

ENV = 'TFF_DPREC_CALIBRATION_CACHE'
_DEFAULT = os.path.join('~', '.cache', 'tff_dprec', 'calibrations')


def directory():
  """The cache folder, or None when disabled."""
  path = os.environ.get(ENV, _DEFAULT)
  if path.lower() in ('off', 'none', '0', ''):
    return None
  return os.path.expanduser(path)


@functools.lru_cache(maxsize=1)
def accountant_fingerprint() -> str:
  """Hash of the accountants' source and dp_accounting's version."""
  import dp_accounting  # pylint: disable=g-import-not-at-top
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  digest = hashlib.sha256()
  folder = os.path.dirname(accounting.__file__)
  for path in sorted(glob.glob(os.path.join(folder, '*.py'))):
    with open(path, 'rb') as f:
      digest.update(os.path.basename(path).encode() + b'\0' + f.read())
  version = getattr(dp_accounting, '__version__', 'unknown')
  digest.update(str(version).encode())
  return digest.hexdigest()


def calibrate(name: str, calibrate_fn: Callable[..., float],
              epsilon_fn: Callable[[float], float], target_epsilon: float,
              **kwargs) -> float:
  """`calibrate_fn(target_epsilon=..., **kwargs)`, cached and verified.

  Args:
    name: The calibration (part of the key), e.g. 'dp_rec_clip_ratio'.
    calibrate_fn: The calibration, called with target_epsilon and kwargs.
    epsilon_fn: epsilon at a value, for the check of a cached value.
    target_epsilon: The target the value must meet.
    **kwargs: The calibration's other arguments (part of the key; must be
      JSON-serialisable).
  """
  folder = directory()
  key = None
  if folder is not None:
    key = hashlib.sha256(json.dumps(
        [name, accountant_fingerprint(), float(target_epsilon), kwargs],
        sort_keys=True, default=repr).encode()).hexdigest()
    cached = _read(os.path.join(folder, key + '.json'))
    if cached is not None and epsilon_fn(cached) <= target_epsilon:
      return cached
  value = calibrate_fn(target_epsilon=target_epsilon, **kwargs)
  if key is not None:
    _write(folder, key, value)
  return value


def _read(path):
  try:
    with open(path) as f:
      value = json.load(f)['value']
  except (OSError, ValueError, KeyError, TypeError):
    return None
  return float(value) if isinstance(value, (int, float)) else None


def _write(folder, key, value):
  try:
    os.makedirs(folder, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=folder, suffix='.tmp')
    with os.fdopen(handle, 'w') as f:
      json.dump({'value': value}, f)
    os.replace(temp, os.path.join(folder, key + '.json'))
  except OSError:
    pass  # A cache that cannot be written only costs time.
