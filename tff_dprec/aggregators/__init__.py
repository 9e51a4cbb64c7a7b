"""DP-REC aggregation factories for TFF.

* `DPRecMeanFactory`: the unweighted mean of client updates summed with
  DP-REC, the `model_aggregator` of
  `tff.learning.algorithms.build_unweighted_fed_avg` (build it with
  `tff_dprec.learning.dp_rec_aggregator`); its `layout`, `dp_event` and
  `epsilon` take your model.
* `DPRecSumFactory`: the private sum inside it.
* `DPRecInLawSumFactory`: SIMULATION ONLY, DP-REC's decoded sum drawn
  exactly in law; its clients send floats (a tool for studies, never a
  protocol to deploy).

Their `create` refuses a weight type (`creation_guard`); what is built
around them is checked by `tff_dprec.learning.check_process`.
"""

from tff_dprec.aggregators.dp_rec import DPRecSumFactory
from tff_dprec.aggregators.dp_rec_in_law import DPRecInLawSumFactory
from tff_dprec.aggregators.dp_rec_mean import DPRecMeanFactory

__all__ = [
    'DPRecInLawSumFactory',
    'DPRecMeanFactory',
    'DPRecSumFactory',
]
