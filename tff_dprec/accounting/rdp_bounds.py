"""Renyi bounds of one DP-REC client draw, and the order grids.

* `proven_rdp`: RDP of one draw with probability q (docs/PRIVACY.md,
  Sections 2-3), what `rdp_accountant` and `pld_accountant` compose.
* `zhu_wang_upper_bound`: the general Poisson-subsampled RDP bound of Zhu
  and Wang (ICML 2019, Theorem 6), also DDGauss's (`baselines`).
* `PROVEN_ORDERS` (integers, as that bound needs) and `PAPER_ORDERS` (any
  orders > 1: the paper's accountant and DP-FedAvg's RDP).
"""

import functools
import math
from typing import Sequence

import numpy as np
from scipy import special

from tff_dprec.accounting import channel

# The proven accountings: integer orders (exact reverse divergence,
# Zhu-Wang bound).
PROVEN_ORDERS = tuple(range(2, 65))
# The paper's accountant: any orders > 1; dense where the optima fall.
PAPER_ORDERS = tuple(
    [1.0 + x / 20.0 for x in range(1, 200)] + list(range(11, 129)) +
    [160, 192, 256, 384, 512, 1024])


def proven_rdp(q: float, clip_ratio: float, bits: int, num_groups: int,
              orders: Sequence[int]) -> np.ndarray:
  """RDP of one DP-REC client draw with probability q (proven accounting).

  q = 1 (a known participant's message against the message of the same
  client with no data, update 0): eps(a) = max of the two directions of
  `channel.message_rdp`.

  q < 1 (a draw that picks the target client with probability q, otherwise
  another client of the population): the output is (1-q) A + q P_v against
  A, A the mixture of the other clients' messages. By joint convexity of
  exp((a-1) D_a) this is at most the worst case over one other client v',
  (1-q) P_v' + q P_v against P_v', whose base RDP is the substitution bound
  `channel.substitution_rdp`; then `zhu_wang_upper_bound`, never above the
  base. docs/PRIVACY.md, Section 3.
  """
  orders = channel.check_orders(orders)
  return np.copy(_proven_rdp(float(q), float(clip_ratio), int(bits),
                            int(num_groups), tuple(int(a) for a in orders)))


@functools.lru_cache(maxsize=1024)
def _proven_rdp(q, clip_ratio, bits, num_groups, orders):
  """`proven_rdp`, kept per argument (a search re-evaluates its points)."""
  orders = np.asarray(orders, np.int64)
  # Clipping and encoding run in float32: allow the norm 2^-20 above c.
  clip_ratio = clip_ratio * (1.0 + 2.0**-20)
  if q >= 1.0:
    forward, reverse = channel.message_rdp(
        clip_ratio=clip_ratio, bits=bits, num_groups=num_groups,
        orders=orders)
    return np.maximum(forward, reverse)
  all_orders = tuple(range(2, int(orders.max()) + 1))
  base = channel.substitution_rdp(clip_ratio=clip_ratio, bits=bits,
                                  num_groups=num_groups, orders=all_orders)
  values = base[orders - 2]  # base[l - 2] = eps(l)
  return np.minimum(values, zhu_wang_upper_bound(q, base, orders))


def zhu_wang_upper_bound(q: float, base: np.ndarray,
                         orders: np.ndarray) -> np.ndarray:
  """General Poisson-subsampled RDP upper bound (Zhu and Wang, ICML 2019).

  Theorem 6 there: for a mechanism with RDP eps(.) (add/remove, both
  directions) and sampling probability q, at integer a >= 2,
    (a-1) eps'(a) <= log[(1-q)^(a-1) (a q - q + 1)
                         + C(a,2) q^2 (1-q)^(a-2) e^{eps(2)}
                         + 3 sum_{l=3}^a C(a,l) (1-q)^(a-l) q^l
                               e^{(l-1)eps(l)}].
  `base[l - 2]` is eps(l).

  For small q the bracket is 1 + O(q^2): its log is formed as
  log1p(expm1(first term) + the others), not by a log-sum-exp, which would
  round 1 + tiny and lose the O(q^2) part (a relative error of 1e-8 at
  SO-LR's q = 1/342477 against 50-digit arithmetic;
  tests/library/accounting_rdp_bounds_test.py checks it against mpmath).
  """
  log_q = math.log(q)
  log_1mq = math.log1p(-q)
  out = np.empty(len(orders))
  for i, alpha in enumerate(orders):
    alpha = int(alpha)
    first = _log_first_term(alpha - 1, q, log_1mq)
    others = [_log_comb(alpha, 2) + 2 * log_q + (alpha - 2) * log_1mq +
              base[0]]
    if alpha >= 3:
      l = np.arange(3, alpha + 1)
      others.extend(math.log(3.0) + _log_comb(alpha, l) +
                    (alpha - l) * log_1mq + l * log_q + (l - 1) * base[l - 2])
    log_others = float(channel.log_sum_exp(np.asarray(others, np.float64)))
    if log_others < 0.0:
      total = math.log1p(math.expm1(first) + math.exp(log_others))
    else:  # Far from 1: no cancellation to avoid.
      total = float(np.logaddexp(first, log_others))
    out[i] = max(total, 0.0) / (alpha - 1)
  return out


def _log_first_term(m: int, q: float, log_1mq: float) -> float:
  """log[(1-q)^m (1 + m q)] = -m (m+1) q^2 / 2 + O(q^3), without cancellation.

  Its two logs cancel to first order in q; for m q < 0.01 the series
  sum_k [(-1)^(k+1) m^k - m] q^k / k (k >= 2) is summed instead, to
  relative precision 1e-16.
  """
  if m * q >= 0.01:
    return m * log_1mq + math.log1p(m * q)
  total, k = 0.0, 2
  while True:
    total += ((-1)**(k + 1) * m**k - m) * q**k / k
    # Bound on the rest (terms can vanish: m = 1 at odd k).
    if (m**k + m) * q**k / k <= 1e-18 * abs(total) or k > 60:
      return total
    k += 1


def _log_comb(n, k):
  return (special.gammaln(n + 1) - special.gammaln(k + 1) -
          special.gammaln(n - k + 1))
