"""SIMULATION ONLY: DP-REC drawn in law, for studies; not a protocol.

DP-REC's decoded updates drawn exactly in law (`tff_dprec.in_law`) at K + d
normals per group and client instead of the codec's K * d, so that studies
can afford DP-REC at thousands of clients per round. The clients send their
decoded updates as floats, not messages: never deploy these.

* `dp_rec_in_law_aggregator(...)`: a `DpRecInLawMeanFactory`, the
  `model_aggregator` of `tff.learning.algorithms.build_unweighted_fed_avg`
  (or `aggregator` of `tff_dprec.learning.build_dp_rec_fed_avg`, which
  builds it without checking its uploads).
* `DpRecInLawMeanFactory`: its type, not a
  `tff_dprec.aggregators.DpRecMeanFactory`, so that `isinstance` tells the
  simulation from the protocol; `layout`, `dp_event` and `epsilon` are the
  simulated protocol's.
* `DpRecInLawSumFactory`: the sum inside it.

docs/PRIVACY.md, section 10, proves the law.
"""

from typing import Optional

from tff_dprec import rec
from tff_dprec.aggregators import dp_rec_in_law

DpRecInLawMeanFactory = dp_rec_in_law.DpRecInLawMeanFactory
DpRecInLawSumFactory = dp_rec_in_law.DpRecInLawSumFactory

__all__ = [
    'dp_rec_in_law_aggregator',
    'DpRecInLawMeanFactory',
    'DpRecInLawSumFactory',
]


def dp_rec_in_law_aggregator(
    noise_stddev: float,
    l2_clip: float,
    bits: int = 7,
    grouping: rec.Grouping = rec.GROUPING_TENSOR,
    insecure_test_seed: Optional[int] = None,
) -> dp_rec_in_law.DpRecInLawMeanFactory:
  """SIMULATION ONLY: the DP-REC mean with its decoded updates drawn in law.

  `tff_dprec.learning.dp_rec_aggregator`'s mean, with the sum drawn exactly
  in law at K + d normals per group and client (`DpRecInLawSumFactory`):
  the same training in law, clipping, groups, bits and `epsilon`, at a
  fraction of the cost. Its clients send floats, not messages: use it to
  study DP-REC, never to deploy it. `upload_bits` is the real protocol's,
  analytic. It records no messages, so history compression
  (`tff_dprec.learning.start_history`) refuses it. Arguments as in
  `tff_dprec.aggregators.DpRecSumFactory` (`l2_clip` required).

  Raises:
    TypeError, ValueError: For invalid arguments.
  """
  return dp_rec_in_law.DpRecInLawMeanFactory(
      dp_rec_in_law.DpRecInLawSumFactory(
          noise_stddev=noise_stddev, l2_clip=l2_clip, bits=bits,
          grouping=grouping, insecure_test_seed=insecure_test_seed))
