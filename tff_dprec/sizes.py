"""Wire sizes and codec limits of DP-REC, without TensorFlow.

`rec`, `message` and `history` use these constants; `plan` sizes traffic
and checks settings with them without loading TensorFlow.
"""

# The largest index bit-width the codec accepts (K = 2^bits candidates).
MAX_BITS = 24
# Clip ratios at or above this are outside the privacy idealisation of the
# implemented selection: the float64 Gumbel noise is bounded (a range of
# 42.61), so a candidate whose log-weight gap to the best exceeds it is never
# selected; between two candidates the gap is N(0, 2 c^2), and at c = 4 a
# group of 128 candidates meets a gap > 42.61 with probability about 4e-10
# (docs/PRIVACY.md, section 7). Experiments warn, the epsilon sweep does not
# run such points, and the planner flags them.
IDEALISED_CLIP_RATIO_LIMIT = 4.0

# Bits of a message's shared seed R.
SEED_BITS = 64
# Bits of the per-round message count in a history.
ROUND_HEADER_BITS = 32
# Bits of the initial model seed R' sent to a first-time client.
INITIAL_SEED_BITS = 64
# Bits of one float32 coordinate (a model, an optimizer slot, an update).
FLOAT_BITS = 32
