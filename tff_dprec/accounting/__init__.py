"""Privacy accounting for DP-REC and its baselines, on dp_accounting.

What a user needs is exported here: the events, the accountants, the
epsilons, the calibrations and the errors. The modules:

* `events`: `DpRecEvent` (a known participant's release),
  `DpRecRoundEvent` (a round of draws; `dp_rec_round_event` builds it).
* One accountant per accounting (`accountings` names them), over
  `base_accountant`: `pld_accountant.DpRecPldAccountant` (`'min_pld_rdp'`, the
  default: the smaller of the certified PLD and RDP epsilons),
  `rdp_accountant.DpRecRdpAccountant` (`'rdp'`: the RDP epsilon),
  `paper_accountant.DpRecPaperAccountant` (`'paper'`: the paper's
  Theorem 1, unproven).
* `dp_rec_accountant`: `make_dp_rec_accountant(accounting=...)` (the
  accountant by name), `dp_rec_epsilon`, `dp_rec_local_epsilon`.
* `epsilon_curve`: `DpRecEpsilonCurve`, `dp_rec_epsilon_curve` (a run's
  epsilon after each of many round counts, from one accountant composing
  round by round).
* `channel` (Renyi bounds of the DP-REC release), `rdp_bounds` (one
  draw's, Zhu-Wang), `profile`, `message_profile` and `loss_pmf`
  (privacy profiles, PLDs).
* `baselines`: DP-FedAvg (PLD by default) and DDGauss (RDP).
* `calibration` and `lattice_search`: the parameter searches.
* `python -m tff_dprec.accounting`: the CLI.

Derivations, and what is assumed: docs/PRIVACY.md.
"""

from tff_dprec.accounting.accountings import default_delta
from tff_dprec.accounting.accountings import RenamedAccountingWarning
from tff_dprec.accounting.baselines import ddgauss_epsilon
from tff_dprec.accounting.baselines import dp_fedavg_epsilon
from tff_dprec.accounting.calibration import calibrate_clip_ratio
from tff_dprec.accounting.calibration import calibrate_ddgauss_noise
from tff_dprec.accounting.calibration import calibrate_dp_fedavg_noise
from tff_dprec.accounting.calibration import TargetUnreachableError
from tff_dprec.accounting.dp_rec_accountant import dp_rec_epsilon
from tff_dprec.accounting.dp_rec_accountant import dp_rec_local_epsilon
from tff_dprec.accounting.dp_rec_accountant import make_dp_rec_accountant
from tff_dprec.accounting.epsilon_curve import dp_rec_epsilon_curve
from tff_dprec.accounting.epsilon_curve import DpRecEpsilonCurve
from tff_dprec.accounting.events import dp_rec_round_event
from tff_dprec.accounting.events import DpRecEvent
from tff_dprec.accounting.events import DpRecRoundEvent
from tff_dprec.accounting.paper_accountant import DpRecPaperAccountant
from tff_dprec.accounting.paper_accountant import OverheadExceedsDeltaError
from tff_dprec.accounting.paper_accountant import UnprovenPaperBoundWarning
from tff_dprec.accounting.pld_accountant import DpRecPldAccountant
from tff_dprec.accounting.rdp_accountant import DpRecRdpAccountant

__all__ = [
    'calibrate_clip_ratio',
    'calibrate_ddgauss_noise',
    'calibrate_dp_fedavg_noise',
    'ddgauss_epsilon',
    'default_delta',
    'dp_fedavg_epsilon',
    'dp_rec_epsilon',
    'dp_rec_epsilon_curve',
    'dp_rec_local_epsilon',
    'dp_rec_round_event',
    'DpRecEpsilonCurve',
    'DpRecEvent',
    'DpRecRoundEvent',
    'DpRecPaperAccountant',
    'DpRecPldAccountant',
    'DpRecRdpAccountant',
    'make_dp_rec_accountant',
    'OverheadExceedsDeltaError',
    'RenamedAccountingWarning',
    'TargetUnreachableError',
    'UnprovenPaperBoundWarning',
]
