"""DP-REC aggregation factories for TFF."""

from tff_dprec.aggregators.dp_rec import DPRecSumFactory
from tff_dprec.aggregators.dp_rec_in_law import DPRecInLawSumFactory
