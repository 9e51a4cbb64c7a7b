"""`python -m tff_dprec.plan`: the planner's table and notes, or JSON.

Calibrates DP-REC, DP-FedAvg and DDGauss (16 bits) for a federation and
compares their noise on the averaged update and their traffic, with the
clients per round at which DP-REC matches DP-FedAvg's noise. A bad flag or
setting: one `error:` line on stderr, exit code 2.
"""

import json
import sys
import types
from typing import Optional, Sequence

from absl import flags

from tff_dprec import command_line
from tff_dprec.plan import markdown
from tff_dprec.plan import planner

_REQUIRED = ('population', 'clients_per_round', 'rounds', 'target_epsilon',
             'dimension')


def _define_flags(values: flags.FlagValues) -> None:
  """The command's flags, on `values`."""
  command_line.define_federation_flags(values)
  flags.DEFINE_float('target_epsilon', None, 'The target epsilon.',
                     flag_values=values)
  flags.DEFINE_integer('dimension', None, "d, the model's parameters",
                       flag_values=values)
  flags.DEFINE_integer('bits', None,
                       "DP-REC's bits per group (default: from c)",
                       flag_values=values)
  flags.DEFINE_integer('num_groups', 1,
                       "DP-REC's groups per message (default 1)",
                       flag_values=values)
  flags.DEFINE_enum('server_optimizer', 'sgd', sorted(planner.OPTIMIZER_SLOTS),
                    'sizes the state a DP-REC history competes with',
                    flag_values=values)
  flags.DEFINE_integer('full_bits', None,
                       'that state in bits (overrides the estimate)',
                       flag_values=values)
  flags.DEFINE_float('ddgauss_l2_clip', planner.DDGAUSS_L2_CLIP,
                     "DDGauss's clip (sets its quantisation grid)",
                     flag_values=values)
  flags.DEFINE_bool('break_even', True,
                    "search for DP-REC's break-even B' (--nobreak_even "
                    'skips it)', flag_values=values)
  flags.DEFINE_bool('json', False,
                    'one JSON object keyed by dp_rec, dp_fedavg, ddgauss',
                    flag_values=values)
  flags.mark_flags_as_required(_REQUIRED, flag_values=values)


def main(argv: Optional[Sequence[str]] = None) -> None:
  """Prints the plan for the flags in `argv` (default sys.argv[1:]).

  Raises:
    SystemExit: With code 2 after one `error:` line for bad input (0 after
      --help).
  """
  command_line.run(_define_flags, _print_plan, __doc__, argv)


def _print_plan(args: types.SimpleNamespace) -> None:
  """Plans for the parsed flags and prints the table or the JSON."""
  result = planner.plan(
      population=args.population, clients_per_round=args.clients_per_round,
      rounds=args.rounds, target_epsilon=args.target_epsilon,
      dimension=args.dimension, delta=args.delta, bits=args.bits,
      num_groups=args.num_groups, full_bits=args.full_bits,
      server_optimizer=args.server_optimizer,
      ddgauss_l2_clip=args.ddgauss_l2_clip,
      with_break_even=args.break_even)
  if args.json:
    json.dump(result.to_json(), sys.stdout, indent=1)
    print()
  else:
    print('\n'.join(markdown.format_plan(result)))


if __name__ == '__main__':
  command_line.run_main(main)
