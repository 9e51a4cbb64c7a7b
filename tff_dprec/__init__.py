"""tff_dprec: differentially private relative entropy coding for TFF.

Submodules load on first access: `accounting` and `plan` need only
dp_accounting, so the accountant, the planner and their CLIs start without
TensorFlow; `rec` and `message` load
TensorFlow; `aggregators`, `learning`, `process_check` and `history` load
TFF.

* `learning`: `dp_rec_aggregator(...)` for `tff.learning` (a
  `DpRecMeanFactory` that gives the layout, event and epsilon of a model),
  `build_dp_rec_fed_avg(...)`, `check_process(...)`, `no_client_metrics`,
  history setup.
* `process_check`: what a built TFF process sends from the clients to the
  server, by type (`learning.check_process`).
* `aggregators`: the TFF aggregation factories, `DpRecMeanFactory` and the
  `DpRecSumFactory` inside it (and `DpRecInLawSumFactory`, simulation only).
* `message`: `MessageLayout` and the encoding of whole updates (plain TF).
* `rec`: the REC codec (plain TF).
* `accounting`: the privacy accountants and calibration.
* `history`: server-to-client history compression and client replay.
* `plan`: will DP-REC pay in a federation? Each mechanism's calibration,
  noise and traffic, and DP-REC's break-even clients per round, as a typed
  `Plan`; `plan.markdown` formats it, `python -m tff_dprec.plan` prints it
  (no TensorFlow).
* `worker_reaper`: `install()` ties the `worker_binary` that TFF's local
  execution starts to this process, so that scripts and kernels end.
"""

import importlib

__all__ = ['accounting', 'aggregators', 'history', 'learning', 'message',
           'plan', 'process_check', 'rec', 'sizes', 'worker_reaper']


def __getattr__(name):
  if name in __all__:
    return importlib.import_module(f'tff_dprec.{name}')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
