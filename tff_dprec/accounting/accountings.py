"""The accountings by name, which mechanism takes which, and the defaults.

DP-REC's accountings (docs/PRIVACY.md), each with its accountant class:

* `PLD` (`'pld'`, the default): `pld_accountant.DpRecPldAccountant`, the
  smaller of the certified PLD and RDP epsilons.
* `RDP` (`'rdp'`): `rdp_accountant.DpRecRdpAccountant`, the RDP epsilon.
* `PAPER` (`'paper'`), the paper's Theorem 1:
  `paper_accountant.DpRecPaperAccountant`.

DP-FedAvg takes `'pld'` and `'rdp'`; DDGauss has an RDP accountant only.
The default delta of a federation of N clients is N^-1.1, the DP-REC
paper's (Figure 5), which the experiments use throughout.
"""

from tff_dprec import validation

PLD = 'pld'
RDP = 'rdp'
PAPER = 'paper'
# What `accounting=` accepts, per mechanism.
ACCOUNTINGS = (PLD, RDP, PAPER)  # DP-REC's.
DP_FEDAVG_ACCOUNTINGS = (PLD, RDP)
DDGAUSS_ACCOUNTINGS = (RDP,)
DEFAULT_ACCOUNTING = PLD  # DP-REC's and DP-FedAvg's.
# delta = N^-DEFAULT_DELTA_EXPONENT.
DEFAULT_DELTA_EXPONENT = 1.1


def default_delta(population: int) -> float:
  """delta = N^-1.1 for a federation of N = `population` clients.

  Raises:
    TypeError: If population is not an int.
    ValueError: If population is not positive.
  """
  validation.check_positive_int(population, 'population')
  return population**-DEFAULT_DELTA_EXPONENT
