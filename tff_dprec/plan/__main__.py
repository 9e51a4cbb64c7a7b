"""`python -m tff_dprec.plan`: the planner's table and notes, or JSON."""

import argparse
import json
import sys
from typing import Optional, Sequence

from tff_dprec.plan import markdown
from tff_dprec.plan import planner


def _parser() -> argparse.ArgumentParser:
  """The command line of `main`."""
  parser = argparse.ArgumentParser(
      prog='python -m tff_dprec.plan',
      description='Calibrates DP-REC, DP-FedAvg and DDGauss (16 bits) for a '
      'federation and compares their noise on the averaged update and '
      'their traffic, with the clients per round at which DP-REC matches '
      "DP-FedAvg's noise.")
  parser.add_argument('--population', type=int, required=True, help='N')
  parser.add_argument('--clients_per_round', type=int, required=True,
                      help='B')
  parser.add_argument('--rounds', type=int, required=True, help='T')
  parser.add_argument('--target_epsilon', type=float, required=True)
  parser.add_argument('--dimension', type=int, required=True,
                      help="d, the model's parameters")
  parser.add_argument('--delta', type=float, default=None,
                      help='default: population ** -1.1')
  parser.add_argument('--bits', type=int, default=None,
                      help="DP-REC's bits per group (default: from c)")
  parser.add_argument('--num_groups', type=int, default=1,
                      help="DP-REC's groups per message (default 1)")
  parser.add_argument('--server_optimizer', default='sgd',
                      choices=sorted(planner.OPTIMIZER_SLOTS),
                      help='sizes the state a DP-REC history competes with')
  parser.add_argument('--full_bits', type=int, default=None,
                      help='that state in bits (overrides the estimate)')
  parser.add_argument('--ddgauss_l2_clip', type=float,
                      default=planner.DDGAUSS_L2_CLIP,
                      help="DDGauss's clip (sets its quantisation grid)")
  parser.add_argument('--nobreak_even', dest='break_even',
                      action='store_false',
                      help="skip the search for DP-REC's break-even B'")
  parser.add_argument('--json', action='store_true',
                      help='one JSON object keyed by dp_rec, dp_fedavg, '
                      'ddgauss')
  return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
  """Prints the plan; exit code 2 with one line for bad input."""
  parser = _parser()
  args = parser.parse_args(argv)
  try:
    result = planner.plan(
        population=args.population, clients_per_round=args.clients_per_round,
        rounds=args.rounds, target_epsilon=args.target_epsilon,
        dimension=args.dimension, delta=args.delta, bits=args.bits,
        num_groups=args.num_groups, full_bits=args.full_bits,
        server_optimizer=args.server_optimizer,
        ddgauss_l2_clip=args.ddgauss_l2_clip,
        with_break_even=args.break_even)
  except (TypeError, ValueError) as e:
    parser.exit(2, f'error: {e}\n')
  if args.json:
    json.dump(result.to_json(), sys.stdout, indent=1)
    print()
  else:
    print('\n'.join(markdown.format_plan(result)))


if __name__ == '__main__':
  main()
