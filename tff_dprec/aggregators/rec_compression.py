"""Compression-only REC: DP-REC's wire without a clip, and without privacy.

`RecCompressionSumFactory` sends what `dp_rec.DpRecSumFactory` sends (a
seed and one REC index per group) from an update that is not clipped: the
paper's Appendix D.3 ablation, which measures what the coding alone costs.
It has no privacy guarantee, and no `dp_event` or `epsilon`.
"""

from typing import Optional

from tff_dprec import rec
from tff_dprec.aggregators import dp_rec


class RecCompressionSumFactory(dp_rec.RecSumFactoryBase):
  """NOT PRIVATE: sums client updates compressed with REC, without a clip.

  Each client encodes its whole update, unclipped, as `DpRecSumFactory`'s
  clients encode theirs (a fresh 64-bit seed, one index of `bits` bits per
  group, drawn from K = 2**bits candidates of the prior N(0, s^2 I) with s =
  `noise_stddev`); the server decodes and sums the messages. This is
  Triastcyn et al.'s compression-only REC (2021, Appendix D.3): the same
  messages as DP-REC, but an update's norm is not bounded, so nothing bounds
  what a message reveals about it. Use `DpRecSumFactory` for privacy.

  Measurements, `record_messages` and `messages_sum_fn` (for
  `tff_dprec.history`) as `DpRecSumFactory`'s (`dp_rec.RecSumFactoryBase`).
  For `tff.learning`, use the mean around it,
  `tff_dprec.learning.rec_compression_aggregator(...)`.
  """

  def __init__(self,
               noise_stddev: float,
               bits: int = 7,
               grouping: rec.Grouping = rec.GROUPING_TENSOR,
               chunk_elements: int = rec.DEFAULT_CHUNK_ELEMENTS,
               record_messages: bool = False,
               insecure_test_seed: Optional[int] = None):
    """Initializes the factory.

    Args:
      noise_stddev: The prior standard deviation s, in the units of the
        update. Positive.
      bits: Index bits per group, in [1, 24]; K = 2**bits. Default 7.
      grouping: `'tensor'` (default), `'network'` or a positive int G, as
        in `DpRecSumFactory`.
      chunk_elements: Number of candidate elements generated at once on the
        client; bounds client memory.
      record_messages: Whether to report and canonically order the round's
        messages, as in `DpRecSumFactory`. Default `False`.
      insecure_test_seed: TESTS ONLY: an int makes each client's seed and
        selection noise a function of this value and its update, as in
        `DpRecSumFactory`.

    Raises:
      TypeError: If an argument has the wrong type.
      ValueError: If an argument has an invalid value.
    """
    super().__init__(noise_stddev, l2_clip=None, bits=bits,
                     grouping=grouping, chunk_elements=chunk_elements,
                     record_messages=record_messages,
                     insecure_test_seed=insecure_test_seed)
