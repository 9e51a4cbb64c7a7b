"""Privacy accounting for DP-REC and its baselines, on dp_accounting.

* `channel`: Renyi divergences of the DP-REC release (`rec_channel_rdp`).
* `profile`: privacy profiles (hockey-stick bounds) and pessimistic PLDs.
* `message_profile`: profiles of one DP-REC message, PLD of one draw.
* `dp_rec`: `DpRecEvent`, `DpRecAccountant` (`accounting='pld'`, the
  default, `'rdp'` (alias `'sound'`) or `'paper'`), `dp_rec_epsilon`,
  `dp_rec_local_epsilon`.
* `baselines`: DP-FedAvg (PLD by default) and DDGauss (RDP).
* `calibration`: the parameter searches.
* `python -m tff_dprec.accounting`: the CLI.

Derivations, and what is assumed: docs/PRIVACY.md.
"""

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
from tff_dprec.accounting.dp_rec import ACCOUNTINGS
from tff_dprec.accounting.dp_rec import canonical
from tff_dprec.accounting.dp_rec import DEFAULT_ORDERS
from tff_dprec.accounting.dp_rec import dp_rec_epsilon
from tff_dprec.accounting.dp_rec import dp_rec_local_epsilon
from tff_dprec.accounting.dp_rec import dp_rec_round_event
from tff_dprec.accounting.dp_rec import DpRecAccountant
from tff_dprec.accounting.dp_rec import DpRecEvent
from tff_dprec.accounting.dp_rec import OverheadExceedsDeltaError
from tff_dprec.accounting.dp_rec import PAPER
from tff_dprec.accounting.dp_rec import PLD
from tff_dprec.accounting.dp_rec import RDP
from tff_dprec.accounting.dp_rec import PAPER_ORDERS
from tff_dprec.accounting.dp_rec import REVERSE_FORWARD_BOUND
from tff_dprec.accounting.dp_rec import REVERSE_NUMERICAL
from tff_dprec.accounting.dp_rec import SOUND
from tff_dprec.accounting.dp_rec import SOUND_ORDERS
from tff_dprec.accounting.dp_rec import UnprovenPaperBound
