"""Wire sizes of DP-REC messages and histories, without TensorFlow.

`message` and `history` use these constants; `plan` sizes traffic from them
without loading TensorFlow.
"""

# Bits of a message's shared seed R.
SEED_BITS = 64
# Bits of the per-round message count in a history.
ROUND_HEADER_BITS = 32
# Bits of the initial model seed R' sent to a first-time client.
INITIAL_SEED_BITS = 64
# Bits of one float32 coordinate (a model, an optimizer slot, an update).
FLOAT_BITS = 32
