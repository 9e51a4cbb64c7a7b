"""Will DP-REC pay in a federation? Calibrations, noise, traffic, beforehand.

  python -m tff_dprec.plan --population=342477 --clients_per_round=40 \
      --rounds=50 --target_epsilon=1 --dimension=50050 [--json]

For a federation of N clients, B clients per round, T rounds, a target
(epsilon, delta) and a model of d parameters, `plan` calibrates DP-REC,
DP-FedAvg and DDGauss (16 bits), each with its default accountant, and
returns a `Plan` with one typed record per mechanism:

* the calibrated parameter: DP-REC's clip ratio c (PLD), DP-FedAvg's noise
  multiplier z (PLD; also under RDP, to compare with DDGauss's), DDGauss's
  z (its RDP accountant);
* the relative noise: the standard deviation of the noise in one coordinate
  of the averaged update, divided by the clip. DP-REC's decoded update is a
  sample of N(clipped update, sigma^2 I) and its clip is c sigma, so the
  mean of B messages has sigma / sqrt(B) per coordinate: 1 / (c sqrt(B)).
  DP-FedAvg and DDGauss add noise z C to the sum of B clipped updates:
  z / B. At equal clips and rounds, the smaller relative noise learns more
  (a prediction; `python -m experiments.frontier` measures it);
* upload and download bits per client-round. DP-REC uploads its message
  (64 + M b bits) and downloads the history of messages since the client's
  last round, or the model and server optimizer state when smaller (the
  rule of `history.HistoryServer`), in expectation under with-replacement
  sampling (`expected_history_download_bits`). The others upload d floats
  (DDGauss: 16 bits per padded coordinate) and download the model;
* DP-REC's bits (chosen from c, `auto_bits`), groups and local epsilon per
  participation (what the server itself learns from one message);
* DP-REC's break-even clients per round (`BreakEven`): the smallest B' <= N
  at which its relative noise, calibrated at B' to the same (epsilon,
  delta) over the same T, is at most DP-FedAvg's at B (`break_even`).

Exported here: `plan` (and `federation`, its checked setting), the
`Calibrations` a caller may route through a cache of its own, and the
result types. Its modules: `planner` (`plan`, `Calibrations`, the noise
and traffic formulas), `search` (`auto_bits`, `break_even`), `results`
(the typed records), `markdown` (`format_plan`: the plan as text) and
`__main__` (the command line, the only one that prints). Its errors are
TypeError and ValueError naming the argument; a target out of reach is a
record's `error`, not an exception.
"""

from tff_dprec.plan.planner import Calibrations
from tff_dprec.plan.planner import federation
from tff_dprec.plan.planner import plan
from tff_dprec.plan.results import BreakEven
from tff_dprec.plan.results import DdgaussPlan
from tff_dprec.plan.results import DpFedAvgPlan
from tff_dprec.plan.results import DpRecPlan
from tff_dprec.plan.results import Federation
from tff_dprec.plan.results import MechanismPlan
from tff_dprec.plan.results import Plan

__all__ = [
    'BreakEven',
    'Calibrations',
    'DdgaussPlan',
    'DpFedAvgPlan',
    'DpRecPlan',
    'federation',
    'Federation',
    'MechanismPlan',
    'plan',
    'Plan',
]
