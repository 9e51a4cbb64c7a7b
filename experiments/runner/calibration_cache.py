"""A verified on-disk cache of calibrations (clip ratios, noise multipliers).

A calibration runs the accountant 10 to 30 times; every run, test and CLI
process that builds the same aggregator repeats it. This cache keys each
result by the calibration's name, its arguments and a hash of the
accountants' source (tff_dprec/accounting/*.py and the dp_accounting
version), stores it as one small JSON file per key (written atomically, so
concurrent processes are safe), and on a hit re-evaluates epsilon at the
cached value once per process (a value read again under the same key is
not evaluated again): a value whose epsilon exceeds the target is never
returned (it is recomputed). The cache only saves time; every value it
returns was checked against the target by the current accountant.

A resumed run pins the values it started with (`pinned`): another machine's
calibration can differ from them in the last bits (FFTs round differently)
or, after the accountant's search changed, by a little more,
and the run continues at its own values, each checked against the target by
the current accountant with a margin (`PIN_EPSILON_MARGIN`).

Location: $TFF_DPREC_CALIBRATION_CACHE, else ~/.cache/tff_dprec/calibrations;
TFF_DPREC_CALIBRATION_CACHE=off disables it.
"""

import contextlib
import functools
import glob
import hashlib
import json
import math
import os
import tempfile
from typing import Callable, Iterable

from tff_dprec.accounting import accountings

ENV = 'TFF_DPREC_CALIBRATION_CACHE'
_DEFAULT = os.path.join('~', '.cache', 'tff_dprec', 'calibrations')
# How closely two certified calibrations of the same target agree: another
# machine's FFTs round differently (seen: up to 24 ulp), and another release
# of the accountant may stop its search at another point of the same
# certified bound (seen: c 1.5e-6 and z 1e-6 apart, relative, when the
# accountant's search changed). Far below any setting a user would call
# different. Privacy is not relaxed by it: a pinned value is used only when
# this process's accountant puts it within the target with a margin
# (`_pin`).
CALIBRATION_RTOL = 1e-5
# A pinned value is used only where this process's accountant puts its
# epsilon at most target * (1 - PIN_EPSILON_MARGIN). The PLD accountant's
# epsilon moves by about 1e-7 (relative) between machines, whose FFTs round
# differently, so a pin meeting the target by less (an older search's
# answer was seen 2e-8 below it) may miss it on the machine that made it,
# or in exact arithmetic. 1e-6 is ten times that round-off, and below the
# margin today's PLD calibrations leave by construction: their answer is a
# lattice point one relative step of 1e-6 (in c, or in 1/z) inside the
# largest one meeting the target (`lattice_search`), which puts its epsilon
# (of slope about 2 to 6 in c at the experiments' settings) 3e-6 to 3e-5
# below the target. A pin in the last bits of such an answer passes; one
# closer to the target is refused, and the run goes on at this machine's
# value (a started run's ledger then refuses it; a finished record is not
# reused). The other searches (DDGauss's, the 'rdp' and 'paper'
# accountings') stop anywhere within a relative tol of the boundary and
# may leave less: their pins are then refused too, the safe way. A margin
# rather than "a lattice point known to meet the target": a pin from
# another machine or release need not lie on this machine's lattice.
PIN_EPSILON_MARGIN = 1e-6
_PINS = []
# (key, value as JSON) of the cached values this process has checked.
_CHECKED = set()


def same_calibration(a, b) -> bool:
  """Equal, or floats within `CALIBRATION_RTOL` of each other (an
  accounting and its earlier name, such as 'pld', are equal)."""
  if isinstance(a, float) and isinstance(b, float):
    return math.isclose(a, b, rel_tol=CALIBRATION_RTOL, abs_tol=0.0)
  if isinstance(a, str) and isinstance(b, str):
    return accountings.renamed(a) == accountings.renamed(b)
  return type(a) is type(b) and a == b


@contextlib.contextmanager
def pinned(values: Iterable[float]):
  """Within: a calibration returns a value of `values` in place of its own
  result when the two agree to `CALIBRATION_RTOL` and the current accountant
  puts the pinned value's epsilon at most target * (1 -
  `PIN_EPSILON_MARGIN`)."""
  _PINS.append(tuple(v for v in values if isinstance(v, float)))
  try:
    yield
  finally:
    _PINS.pop()


def _pin(value, epsilon_fn, target_epsilon):
  """The pinned value in place of `value`, if one agrees with it and meets
  the target with the margin; else `value`."""
  bound = target_epsilon * (1 - PIN_EPSILON_MARGIN)
  for pin in (_PINS[-1] if _PINS else ()):
    if pin != value and same_calibration(pin, value) and (
        epsilon_fn(pin) <= bound):
      return pin
  return value


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
    key = _key([name, accountant_fingerprint(), float(target_epsilon),
                kwargs])
    found, cached = _read(os.path.join(folder, key + '.json'))
    if (found and isinstance(cached, (int, float)) and
        _checked(key, float(cached),
                 lambda v: epsilon_fn(v) <= target_epsilon)):
      return _pin(float(cached), epsilon_fn, target_epsilon)
  value = calibrate_fn(target_epsilon=target_epsilon, **kwargs)
  if key is not None:
    _write(folder, key, value)
  return _pin(value, epsilon_fn, target_epsilon)


def checked_values() -> list:
  """The (key, value as JSON) pairs this process has checked against their
  targets (`trust_checked` hands them to a process it starts)."""
  return sorted(_CHECKED)


def trust_checked(pairs) -> None:
  """Takes `pairs` (`checked_values` of the process that started this one,
  on this machine, moments ago) as checked here.

  A cached value is then not evaluated again when it is, to the character,
  the value checked under that key; the key holds the accountants'
  fingerprint, so a value checked by another accountant's code is checked
  again. Anything else is checked as before.
  """
  for key, value in pairs:
    if isinstance(key, str) and isinstance(value, str):
      _CHECKED.add((key, value))


def _key(parts):
  return hashlib.sha256(json.dumps(parts, sort_keys=True,
                                   default=repr).encode()).hexdigest()


def _checked(key, value, check_fn):
  """check_fn(value), asked once per process for each key and value."""
  seen = (key, json.dumps(value))
  if seen not in _CHECKED:
    if not check_fn(value):
      return False
    _CHECKED.add(seen)
  return True


def _read(path):
  """(found, the stored value); (False, None) for a missing or bad file."""
  try:
    with open(path) as f:
      return True, json.load(f)['value']
  except (OSError, ValueError, KeyError, TypeError):
    return False, None


def _write(folder, key, value):
  try:
    os.makedirs(folder, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=folder, suffix='.tmp')
    with os.fdopen(handle, 'w') as f:
      json.dump({'value': value}, f)
    os.replace(temp, os.path.join(folder, key + '.json'))
  except OSError:
    pass  # A cache that cannot be written only costs time.
