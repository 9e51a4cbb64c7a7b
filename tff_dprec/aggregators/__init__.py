"""DP-REC aggregation factories for TFF.

* `DpRecMeanFactory`: the unweighted mean of client updates summed with
  DP-REC, the `model_aggregator` of
  `tff.learning.algorithms.build_unweighted_fed_avg` (build it with
  `tff_dprec.learning.dp_rec_aggregator`); its `layout`, `dp_event` and
  `epsilon` take your model.
* `DpRecSumFactory`: the private sum inside it.
* `DpRecInLawSumFactory`: SIMULATION ONLY, DP-REC's decoded sum drawn
  exactly in law; its clients send floats (a tool for studies, never a
  protocol to deploy).

Their `create` refuses a weight type (`creation_guard`); what is built
around them is checked by `tff_dprec.learning.check_process`.
"""

from tff_dprec.aggregators.dp_rec import DpRecSumFactory
from tff_dprec.aggregators.dp_rec_in_law import DpRecInLawSumFactory
from tff_dprec.aggregators.dp_rec_mean import DpRecMeanFactory

__all__ = [
    'DpRecInLawSumFactory',
    'DpRecMeanFactory',
    'DpRecSumFactory',
]
