"""Privacy accounting for DP-REC and its baselines, on dp_accounting.

* `channel`: Renyi divergences of the DP-REC release (`rec_channel_rdp`).
* `profile`: privacy profiles (hockey-stick bounds) and pessimistic PLDs.
* `message_profile`: profiles of one DP-REC message, PLD of one draw.
* `accountings`: the accountings' names (`ACCOUNTINGS`), the default
  accounting and the default delta N^-1.1 (`default_delta`).
* `events`: `DpRecEvent`, `dp_rec_round_event`.
* `rdp_bounds`: Renyi bounds of one draw (`sound_rdp`, Zhu-Wang).
* One accountant per accounting, over `base_accountant`:
  `pld_accountant.DpRecPldAccountant` (`'pld'`, the default),
  `rdp_accountant.DpRecRdpAccountant` (`'rdp'`, alias `'sound'`),
  `paper_accountant.DpRecPaperAccountant` (`'paper'`).
* `dp_rec_accountant`: `DpRecAccountant(accounting=...)` (the accountant
  by name), `dp_rec_epsilon`, `dp_rec_local_epsilon`.
* `baselines`: DP-FedAvg (PLD by default) and DDGauss (RDP).
* `calibration`: the parameter searches.
* `python -m tff_dprec.accounting`: the CLI.

Derivations, and what is assumed: docs/PRIVACY.md.
"""

from tff_dprec.accounting.accountings import ACCOUNTINGS
from tff_dprec.accounting.accountings import canonical
from tff_dprec.accounting.accountings import DDGAUSS_ACCOUNTINGS
from tff_dprec.accounting.accountings import DEFAULT_ACCOUNTING
from tff_dprec.accounting.accountings import default_delta
from tff_dprec.accounting.accountings import DP_FEDAVG_ACCOUNTINGS
from tff_dprec.accounting.accountings import PAPER
from tff_dprec.accounting.accountings import PLD
from tff_dprec.accounting.accountings import RDP
from tff_dprec.accounting.accountings import SOUND
from tff_dprec.accounting.base_accountant import DpRecAccountantBase
from tff_dprec.accounting.baselines import CONVERSION_CLASSIC
from tff_dprec.accounting.baselines import CONVERSION_TIGHT
from tff_dprec.accounting.baselines import DDGAUSS_ORDERS
from tff_dprec.accounting.baselines import ddgauss_epsilon
from tff_dprec.accounting.baselines import ddgauss_params
from tff_dprec.accounting.baselines import DDGaussParams
from tff_dprec.accounting.baselines import dp_fedavg_epsilon
from tff_dprec.accounting.calibration import calibrate_clip_ratio
from tff_dprec.accounting.calibration import calibrate_ddgauss_noise
from tff_dprec.accounting.calibration import calibrate_dp_fedavg_noise
from tff_dprec.accounting.calibration import round_down
from tff_dprec.accounting.calibration import round_up
from tff_dprec.accounting.calibration import TargetUnreachableError
from tff_dprec.accounting.channel import message_rdp
from tff_dprec.accounting.channel import rec_channel_rdp
from tff_dprec.accounting.channel import substitution_rdp
from tff_dprec.accounting.dp_rec_accountant import dp_rec_epsilon
from tff_dprec.accounting.dp_rec_accountant import dp_rec_local_epsilon
from tff_dprec.accounting.dp_rec_accountant import DpRecAccountant
from tff_dprec.accounting.events import dp_rec_round_event
from tff_dprec.accounting.events import DpRecEvent
from tff_dprec.accounting.paper_accountant import DpRecPaperAccountant
from tff_dprec.accounting.paper_accountant import OverheadExceedsDeltaError
from tff_dprec.accounting.paper_accountant import REVERSE_FORWARD_BOUND
from tff_dprec.accounting.paper_accountant import REVERSE_NUMERICAL
from tff_dprec.accounting.paper_accountant import UnprovenPaperBound
from tff_dprec.accounting.pld_accountant import DpRecPldAccountant
from tff_dprec.accounting.rdp_accountant import DpRecRdpAccountant
from tff_dprec.accounting.rdp_bounds import DEFAULT_ORDERS
from tff_dprec.accounting.rdp_bounds import PAPER_ORDERS
from tff_dprec.accounting.rdp_bounds import SOUND_ORDERS
