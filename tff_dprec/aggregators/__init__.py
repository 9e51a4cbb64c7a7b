"""DP-REC aggregation factories for TFF.

* `DpRecMeanFactory`: the unweighted mean of client updates summed with
  DP-REC, the `model_aggregator` of
  `tff.learning.algorithms.build_unweighted_fed_avg` (build it with
  `tff_dprec.learning.dp_rec_aggregator`); its `layout`, `dp_event` and
  `epsilon` take your model.
* `DpRecSumFactory`: the private sum inside it (its `l2_clip` is required).
* `RecCompressionSumFactory`: NOT PRIVATE, the same messages from unclipped
  updates (compression-only REC, the paper's Appendix D.3 ablation).

The simulation in law (`DpRecInLawSumFactory`, `DpRecInLawMeanFactory`,
whose clients send floats) is not a protocol: `tff_dprec.simulation`
exports it. The factories' `create` refuses a weight type
(`creation_guard`); what is built around them is checked by
`tff_dprec.learning.check_process`.
"""

from tff_dprec.aggregators.dp_rec import DpRecSumFactory
from tff_dprec.aggregators.dp_rec_mean import DpRecMeanFactory
from tff_dprec.aggregators.rec_compression import RecCompressionSumFactory

__all__ = [
    'DpRecMeanFactory',
    'DpRecSumFactory',
    'RecCompressionSumFactory',
]
