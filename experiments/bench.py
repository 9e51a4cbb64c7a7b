"""Benchmarks: `python -m experiments.bench codec`.

For d in {1e4, 1e6} and bits in {4, 7, 10}, prints the encoder's throughput in
candidate elements per second next to the raw Philox normal generator's
throughput for the same K x d in the same blocks (generation plus a sum, the
least work that keeps the generator from being optimised away), the decode
time next to the time to generate one candidate, and the encoder's peak extra
memory (each configuration runs in a fresh subprocess: growth of the peak
RSS over the first encode, and the process's peak RSS).
"""

import argparse
import json
import resource
import subprocess
import sys
import time


def _best_time(fn, repeats):
  best = float('inf')
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - t0)
  return best


def codec_one(dim: int, bits: int, repeats: int) -> dict:
  """Measures one configuration in this process."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tff_dprec import rec  # pylint: disable=g-import-not-at-top

  k = 2**bits
  pdim = rec.padded_dim(dim)
  block = rec._block_size(k, pdim, rec.DEFAULT_CHUNK_ELEMENTS)  # pylint: disable=protected-access
  num_blocks = k // block
  seed = tf.constant([1, 2], tf.int64)
  value = tf.constant(np.random.default_rng(0).normal(size=dim) * 1e-3,
                      tf.float32)

  @tf.function
  def encode(value, seed):
    return rec.encode(value, prior_stddev=0.1, bits=bits, seed=seed)

  @tf.function
  def raw(seed):
    def body(i, acc):
      z = tf.random.stateless_normal([block, pdim], seed=seed + i,
                                     alg='philox')
      return i + 1, acc + tf.reduce_sum(z)
    return tf.while_loop(lambda i, _: i < num_blocks, body,
                         (tf.constant(0, tf.int64), tf.constant(0.0)))[1]

  @tf.function
  def decode(index, seed):
    return rec.decode(index, prior_stddev=0.1, bits=bits, dim=dim, seed=seed)

  @tf.function
  def one_candidate(seed):
    return tf.random.stateless_normal([pdim], seed=seed, alg='philox')

  # Memory: peak RSS growth over the first encode (tracing included), before
  # anything else allocates candidate blocks.
  tf.constant(0.0).numpy()
  base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  encode(value, seed).numpy()
  peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  raw(seed).numpy()
  decode(tf.constant(3), seed).numpy()
  one_candidate(seed).numpy()
  encode_s = _best_time(lambda: encode(value, seed).numpy(), repeats)
  raw_s = _best_time(lambda: raw(seed).numpy(), repeats)
  decode_s = _best_time(lambda: decode(tf.constant(k - 1), seed).numpy(),
                        repeats * 5)
  candidate_s = _best_time(lambda: one_candidate(seed).numpy(), repeats * 5)
  elements = k * dim
  return dict(
      dim=dim, bits=bits, block_candidates=block,
      encode_s=encode_s, encode_elems_per_s=elements / encode_s,
      raw_s=raw_s, raw_elems_per_s=elements / raw_s,
      encode_vs_raw=raw_s / encode_s,
      decode_ms=decode_s * 1e3, one_candidate_ms=candidate_s * 1e3,
      decode_vs_candidate=decode_s / candidate_s,
      peak_extra_mib=max(0, peak_rss - base_rss) / 1024.0,
      peak_rss_mib=peak_rss / 1024.0)


def codec(dims, bits_list, repeats):
  rows = []
  print(f"{'d':>9} {'bits':>4} {'encode s':>9} {'enc elem/s':>11} "
        f"{'raw elem/s':>11} {'enc/raw':>7} {'decode ms':>9} "
        f"{'1 cand ms':>9} {'dec/cand':>8} {'+MiB enc':>8} {'RSS MiB':>8}")
  for dim in dims:
    for bits in bits_list:
      out = subprocess.run(
          [sys.executable, '-m', 'experiments.bench', 'codec_one',
           f'--dim={dim}', f'--bits={bits}', f'--repeats={repeats}'],
          check=True, capture_output=True, text=True)
      row = json.loads(out.stdout.strip().splitlines()[-1])
      rows.append(row)
      print(f"{dim:>9} {bits:>4} {row['encode_s']:>9.4f} "
            f"{row['encode_elems_per_s']:>11.3e} "
            f"{row['raw_elems_per_s']:>11.3e} {row['encode_vs_raw']:>7.2f} "
            f"{row['decode_ms']:>9.3f} {row['one_candidate_ms']:>9.3f} "
            f"{row['decode_vs_candidate']:>8.2f} "
            f"{row['peak_extra_mib']:>8.1f} {row['peak_rss_mib']:>8.0f}",
            flush=True)
  return rows


def main(argv=None):
  parser = argparse.ArgumentParser(prog='python -m experiments.bench')
  parser.add_argument('what', choices=['codec', 'codec_one'])
  parser.add_argument('--dim', type=int, default=10**4)
  parser.add_argument('--bits', type=int, default=7)
  parser.add_argument('--dims', default='10000,1000000')
  parser.add_argument('--bits_list', default='4,7,10')
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args(argv)
  if args.what == 'codec_one':
    print(json.dumps(codec_one(args.dim, args.bits, args.repeats)))
  else:
    codec([int(x) for x in args.dims.split(',')],
          [int(x) for x in args.bits_list.split(',')], args.repeats)


if __name__ == '__main__':
  main()
