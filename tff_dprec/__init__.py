"""tff_dprec: differentially private relative entropy coding for TFF.

What users call (`__all__`); submodules load on first access:
`accounting` and `plan` need only dp_accounting, so the accountant, the
planner and their CLIs start without TensorFlow; `aggregators`, `learning`,
`simulation`, `process_check` and `history` load TFF.

* `learning`: `dp_rec_aggregator(...)` for `tff.learning` (a
  `DpRecMeanFactory` that gives the layout, event and epsilon of a model),
  `dp_rec_aggregator_for_epsilon(...)` (calibrated to a target epsilon),
  `rec_compression_aggregator(...)` (compression only, not private),
  `build_dp_rec_fed_avg(...)`, `check_process(...)`, `no_client_metrics`,
  history setup.
* `aggregators`: the TFF aggregation factories, `DpRecMeanFactory` and the
  `DpRecSumFactory` inside it, and `RecCompressionSumFactory` (not
  private).
* `simulation`: SIMULATION ONLY, `dp_rec_in_law_aggregator(...)` (a
  `DpRecInLawMeanFactory`: DP-REC's decoded updates drawn in law, clients
  send floats; a tool for studies, never a protocol).
* `process_check`: what a built TFF process sends from the clients to the
  server, by type (`learning.check_process`).
* `accounting`: the privacy accountants and calibration.
* `history`: server-to-client history compression and client replay.
* `plan`: will DP-REC pay in a federation? Each mechanism's calibration,
  noise and traffic, and DP-REC's break-even clients per round, as a typed
  `Plan`; `plan.markdown` formats it, `python -m tff_dprec.plan` prints it
  (no TensorFlow).
* `worker_reaper`: `install()` ties the `worker_binary` that TFF's local
  execution starts to this process, so that scripts and kernels end.

The wire's internals are importable but not part of `__all__`: `rec` (the
REC codec, plain TF), `message` (`MessageLayout` and the encoding of whole
updates, plain TF) and `sizes` (wire sizes).
"""

import importlib

__all__ = ['accounting', 'aggregators', 'history', 'learning', 'plan',
           'process_check', 'simulation', 'worker_reaper']

# Loaded on first access too, but not advertised: the wire's internals.
_INTERNALS = ('message', 'rec', 'sizes')


def __getattr__(name):
  if name in __all__ or name in _INTERNALS:
    return importlib.import_module(f'tff_dprec.{name}')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
