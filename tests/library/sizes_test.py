"""Tests of tff_dprec.sizes: the wire sizes are the codec's, and the clip
ratio limit is where docs/PRIVACY.md (section 7) puts it."""

import math

from absl.testing import absltest
import numpy as np
from scipy import stats

from tff_dprec import sizes


class WireSizesTest(absltest.TestCase):

  def test_sizes_match_the_codec_and_message(self):
    from tff_dprec import message  # pylint: disable=g-import-not-at-top
    from tff_dprec import rec  # pylint: disable=g-import-not-at-top
    from tff_dprec.aggregators import dp_rec  # pylint: disable=g-import-not-at-top
    self.assertEqual(rec.MAX_BITS, sizes.MAX_BITS)
    self.assertEqual(message.SEED_BITS, sizes.SEED_BITS)
    seed = dp_rec.message_type(1).seed
    self.assertEqual(np.dtype(seed.dtype).itemsize * 8,
                     sizes.SEED_BITS)
    self.assertEqual(np.dtype(np.float32).itemsize * 8, sizes.FLOAT_BITS)
    # K = 2^MAX_BITS candidates still index in an int32.
    self.assertLess(2**sizes.MAX_BITS, np.iinfo(np.int32).max)


class IdealisedClipRatioLimitTest(absltest.TestCase):

  def test_gumbel_range_and_the_chance_of_a_larger_gap_at_the_limit(self):
    # Float64 uniforms in [tiny, 1 - 2^-52] give Gumbel noise in
    # [-log(-log tiny), -log(-log(1 - 2^-52))].
    low = -math.log(-math.log(np.finfo(np.float64).tiny))
    high = -math.log(-math.log1p(-2.0**-52))
    self.assertAlmostEqual(low, -6.563, places=3)
    self.assertAlmostEqual(high, 36.044, places=3)
    gap = high - low
    # A log-weight gap N(0, 2 c^2) above the range, over K (K - 1) ordered
    # pairs of K = 128 candidates, at c = the limit: about 4e-10 or less.
    c, k = sizes.IDEALISED_CLIP_RATIO_LIMIT, 128
    pair = stats.norm.sf(gap / (math.sqrt(2) * c))
    self.assertLess(k * (k - 1) * pair, 5e-10)
    # Twice the limit, it is no longer small: the limit is not arbitrary.
    self.assertGreater(
        k * (k - 1) * stats.norm.sf(gap / (math.sqrt(2) * 2 * c)), 1e-3)


if __name__ == '__main__':
  absltest.main()
