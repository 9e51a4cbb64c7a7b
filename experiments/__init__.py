"""Experiments for tff_dprec, laid out by role (imports point down).

* `run.py`: `python -m experiments.run` (flags -> RunConfig -> training).
* `runner/`: RunConfig, the aggregator registry, the training loop,
  checkpoints, ledger, records and reports.
* `data/`: tasks and their data.
* `studies/`: reproduce (the paper's Table 1), epsilon sweep, tuning, audit,
  privacy tables, benchmarks; `python -m experiments.<study>` runs each.
* `infra/`: TFF workers, their reaper, the downlink simulation, files
  written whole or not at all, quiet native logging.

Importing this package (every `python -m experiments.<command>` does, before
TensorFlow) turns TensorFlow's C++ and gRPC logging off unless the user set
their levels or passed `--verbose` (`infra/quiet.py`).
"""

from experiments.infra import quiet as _quiet

_quiet.setup()
