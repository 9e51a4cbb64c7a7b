"""tff_dprec: differentially private relative entropy coding for TFF."""

from tff_dprec import accounting
from tff_dprec import aggregators
from tff_dprec import rec
