"""The accountings by name, which mechanism takes which, and the defaults.

DP-REC's accountings (docs/PRIVACY.md), each with its accountant class:

* `MIN_PLD_RDP` (`'min_pld_rdp'`, the default):
  `pld_accountant.DpRecPldAccountant`, the smaller of the certified PLD and
  RDP epsilons.
* `RDP` (`'rdp'`): `rdp_accountant.DpRecRdpAccountant`, the RDP epsilon.
* `PAPER` (`'paper'`), the paper's Theorem 1:
  `paper_accountant.DpRecPaperAccountant`.

DP-FedAvg takes `'min_pld_rdp'` (the smaller of dp_accounting's PLD and
RDP epsilons) and `'rdp'`; DDGauss has an RDP accountant only.

`'pld'` is the earlier name of `'min_pld_rdp'` (it never returned the PLD
epsilon alone). `resolve` still takes it, with a one-line
`RenamedAccountingWarning`, and so do the experiments' records and flags.
The default delta of a federation of N clients is N^-1.1, the DP-REC
paper's (Figure 5), which the experiments use throughout.
"""

import warnings

from tff_dprec import validation

MIN_PLD_RDP = 'min_pld_rdp'
RDP = 'rdp'
PAPER = 'paper'
# What `accounting=` accepts, per mechanism.
ACCOUNTINGS = (MIN_PLD_RDP, RDP, PAPER)  # DP-REC's.
DP_FEDAVG_ACCOUNTINGS = (MIN_PLD_RDP, RDP)
DDGAUSS_ACCOUNTINGS = (RDP,)
DEFAULT_ACCOUNTING = MIN_PLD_RDP  # DP-REC's and DP-FedAvg's.
# Earlier names -> today's, for the same accounting.
RENAMED = {'pld': MIN_PLD_RDP}
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


class RenamedAccountingWarning(UserWarning):
  """An accounting was given by its earlier name (`RENAMED`)."""


def renamed(accounting):
  """Today's name of `accounting`: itself, unless it is in `RENAMED`."""
  if isinstance(accounting, str) and accounting in RENAMED:
    return RENAMED[accounting]
  return accounting


def renamed_notice(accounting, name: str = 'accounting') -> str:
  """The one-line notice for an earlier name, e.g. "accounting='pld' ..."."""
  return (f'{name}={accounting!r} is now {RENAMED[accounting]!r}, the same '
          'accounting under a name that says what it returns (the smaller '
          'of the PLD and RDP epsilons).')


def resolve(accounting, choices=ACCOUNTINGS, name: str = 'accounting'):
  """`accounting` checked against `choices`, an earlier name mapped.

  Args:
    accounting: A name in `choices`, or an earlier name in `RENAMED` (which
      warns once per call site with `RenamedAccountingWarning`).
    choices: The accountings the caller takes.
    name: The argument's name, for the error and the notice.

  Returns:
    Today's name.

  Raises:
    ValueError: If `accounting` is neither in `choices` nor renamed to one.
  """
  if renamed(accounting) != accounting and renamed(accounting) in choices:
    warnings.warn(renamed_notice(accounting, name), RenamedAccountingWarning,
                  stacklevel=3)
    accounting = renamed(accounting)
  validation.check_choice(accounting, name, choices)
  return accounting
