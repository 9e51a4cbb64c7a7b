"""Writes tests/library/golden/rec_v1.json, only when the codec changes.

`python -m tests.library.make_golden` regenerates the file; the suite then
pins the random stream of codec version 1.
"""

import json
import os

import numpy as np

from tff_dprec import rec

CASES = [
    # seed, group, index, bits, dim, prior_stddev
    ([0, 0], 0, 0, 7, 5, 1.0),
    ([1, 2], 0, 127, 7, 6, 0.5),
    ([123456789, -987654321], 3, 1000, 10, 9, 0.05),
    ([-1, 2**62], 1, 5, 4, 4, 2.0),
]
ENCODE_CASES = [
    # value, seed, selection_seed, bits, prior_stddev
    ([0.3, -0.2, 0.1, 0.0, 0.5], [7, 8], [9, 10], 7, 0.5),
    ([1.0, 1.0, -1.0], [11, 12], [13, 14], 10, 1.0),
]


def main():
  decode = []
  for seed, group, index, bits, dim, s in CASES:
    x = rec.decode(index, prior_stddev=s, bits=bits, dim=dim,
                   seed=np.array(seed, np.int64), group=group).numpy()
    decode.append(dict(seed=seed, group=group, index=index, bits=bits,
                       dim=dim, prior_stddev=s,
                       values=[float(v) for v in x]))
  encode = []
  for value, seed, sel, bits, s in ENCODE_CASES:
    i = rec.encode(np.array(value, np.float32), prior_stddev=s, bits=bits,
                   seed=np.array(seed, np.int64),
                   selection_seed=np.array(sel, np.int64)).numpy()
    encode.append(dict(value=value, seed=seed, selection_seed=sel, bits=bits,
                       prior_stddev=s, index=int(i)))
  path = os.path.join(os.path.dirname(__file__), 'golden', 'rec_v1.json')
  with open(path, 'w') as f:
    json.dump(dict(codec_version=rec.CODEC_VERSION, decode=decode,
                   encode=encode), f, indent=1)
  print('wrote', path)


if __name__ == '__main__':
  main()
