"""Argument checks shared by the library: TypeError for a wrong type,
ValueError for a bad value, each message naming the argument and the value.

Bools are rejected where numbers are expected; numpy scalars are accepted
(as `TFF/aggregators/distributed_dp.py`'s `_check_*` helpers do).
"""

import math

import numpy as np


def check_number(value, name):
  """A finite real number (not a bool)."""
  if isinstance(value, bool) or not isinstance(
      value, (int, float, np.integer, np.floating)):
    raise TypeError(f'{name} must be a number, found {value!r}.')
  if not math.isfinite(value):
    raise ValueError(f'{name} must be finite, found {value!r}.')


def check_positive_number(value, name):
  check_number(value, name)
  if value <= 0:
    raise ValueError(f'{name} must be positive, found {value!r}.')


def check_nonnegative_number(value, name):
  check_number(value, name)
  if value < 0:
    raise ValueError(f'{name} must be non-negative, found {value!r}.')


def check_bool(value, name):
  if not isinstance(value, (bool, np.bool_)):
    raise TypeError(f'{name} must be a bool, found {value!r}.')


def check_int(value, name):
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise TypeError(f'{name} must be an int, found {value!r}.')


def check_positive_int(value, name):
  check_int(value, name)
  if value <= 0:
    raise ValueError(f'{name} must be positive, found {value!r}.')


def check_nonnegative_int(value, name):
  check_int(value, name)
  if value < 0:
    raise ValueError(f'{name} must be non-negative, found {value!r}.')


def check_int_in_range(value, name, low, high):
  check_int(value, name)
  if not low <= value <= high:
    raise ValueError(f'{name} must be in [{low}, {high}], found {value!r}.')


def check_probability(value, name):
  """A number in the open interval (0, 1)."""
  check_number(value, name)
  if not 0.0 < value < 1.0:
    raise ValueError(f'{name} must be in (0, 1), found {value!r}.')


def check_choice(value, name, choices):
  if value not in choices:
    raise ValueError(f'{name} must be one of {sorted(choices)!r}, found '
                     f'{value!r}.')
