"""tff_dprec: differentially private relative entropy coding for TFF.

Submodules load on first access: `accounting` needs only dp_accounting, so the
accountant and its CLI start without TensorFlow; `rec`, `aggregators` and
`history` load TensorFlow and TFF.
"""

import importlib

__all__ = ['accounting', 'aggregators', 'history', 'rec']


def __getattr__(name):
  if name in __all__:
    return importlib.import_module(f'tff_dprec.{name}')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
