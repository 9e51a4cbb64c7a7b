"""The suite's order for pytest-xdist's work stealing: longest tests first.

`--dist worksteal` gives each of n workers a contiguous share of the
collection (n shares of equal counts, in order), and an idle worker steals
the back half of another's queue. So a long test collected last starts
last, and one worker ends alone with it: the suite's tail. This module
orders the collection so that each share begins with long units, spread
over the shares longest first to the least loaded (LPT), and ends with
short ones, which stealing balances.

A unit is a test class (its tests stay together, in one share, so its
class setup runs once) or a module-level test. Its cost is the sum of
`COSTS` over its tests (seconds of worker time, measured with
`--durations=0`); a test missing from `COSTS` costs `DEFAULT_COST`. Stale
costs only cost speed: the order never drops or repeats a test.
"""

import collections
import json
import os
import re
import sys

# Tests at or above this many seconds are placed first; the rest keep their
# collection order and fill the shares.
LONG = 10.0
DEFAULT_COST = 0.5
COSTS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          'durations.json')


def load_costs(path=COSTS_FILE) -> dict:
  """{test node id: seconds} from `path` ({} if it does not exist)."""
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    costs = json.load(f)
  if not isinstance(costs, dict) or not all(
      isinstance(v, (int, float)) for v in costs.values()):
    raise ValueError(f'{path} must map test ids to seconds, found '
                     f'{str(costs)[:200]!r}.')
  return costs


def unit_of(node_id: str) -> str:
  """The class of a test (`path::Class`), or the test itself."""
  parts = node_id.split('[')[0].split('::')
  return '::'.join(parts[:2]) if len(parts) > 2 else node_id


def order(node_ids, workers: int, costs: dict) -> list:
  """A permutation of `node_ids`: shares of `workers` workers, long first.

  Args:
    node_ids: The collected test ids, in collection order.
    workers: The number of xdist workers (>= 1).
    costs: {test id: seconds}; missing tests cost `DEFAULT_COST`.

  Returns:
    The ids reordered: share k (of `share_sizes`, as xdist splits the
    collection) holds its long units longest first, then short tests in
    collection order.

  Raises:
    ValueError: If `workers` < 1.
  """
  if workers < 1:
    raise ValueError(f'workers must be >= 1, found {workers!r}.')
  units = collections.OrderedDict()
  for node_id in node_ids:
    units.setdefault(unit_of(node_id), []).append(node_id)
  cost = {u: sum(costs.get(i, DEFAULT_COST) for i in ids)
          for u, ids in units.items()}
  position = {u: n for n, u in enumerate(units)}
  long_units = sorted((u for u in units if cost[u] >= LONG),
                      key=lambda u: (-cost[u], position[u]))
  shares = [[] for _ in range(workers)]
  load = [0.0] * workers
  sizes = share_sizes(len(node_ids), workers)
  for u in long_units:
    # Least loaded share that still has room; else the least loaded.
    room = [k for k in range(workers)
            if len(shares[k]) + len(units[u]) <= sizes[k]] or range(workers)
    k = min(room, key=lambda k: (load[k], k))
    shares[k].extend(units[u])
    load[k] += cost[u]
  rest = [i for u in units if cost[u] < LONG for i in units[u]]
  for k in range(workers):
    take = max(0, sizes[k] - len(shares[k]))
    shares[k].extend(rest[:take])
    del rest[:take]
  shares[-1].extend(rest)
  return [i for share in shares for i in share]


def share_sizes(count: int, workers: int) -> list:
  """How xdist's worksteal splits `count` tests over idle workers."""
  sizes, left = [], count
  for k in range(workers):
    sizes.append(left // (workers - k))
    left -= sizes[-1]
  return sizes


_DURATION = re.compile(r'^\s*([0-9.]+)s\s+(setup|call|teardown)\s+(\S+)\s*$')


def durations_from_pytest(text: str, minimum: float = 1.0) -> dict:
  """{test id: seconds} from `--durations=0` output, phases summed.

  Tests under `minimum` seconds are left out (they cost `DEFAULT_COST`).
  """
  totals = collections.defaultdict(float)
  for line in text.splitlines():
    match = _DURATION.match(line)
    if match:
      totals[match.group(3)] += float(match.group(1))
  return {k: round(v, 1) for k, v in sorted(totals.items())
          if v >= minimum}


def main(argv) -> int:
  """`python -m tests.scheduling LOG`: writes tests/durations.json from a
  `pytest --durations=0` log."""
  if len(argv) != 2:
    print('usage: python -m tests.scheduling PYTEST_DURATIONS_LOG',
          file=sys.stderr)
    return 2
  with open(argv[1]) as f:
    costs = durations_from_pytest(f.read())
  with open(COSTS_FILE, 'w') as f:
    json.dump(costs, f, indent=0, sort_keys=True)
    f.write('\n')
  print(f'{COSTS_FILE}: {len(costs)} tests, {sum(costs.values()):.0f} s')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
