"""`python -m tff_dprec.accounting`: epsilon, or the calibrated parameter."""

import argparse
from typing import Optional, Sequence
import warnings

from tff_dprec import accounting
from tff_dprec.accounting import accountings
from tff_dprec.accounting import baselines
from tff_dprec.accounting import calibration


def _parser() -> argparse.ArgumentParser:
  """The command line of `main`."""
  parser = argparse.ArgumentParser(
      prog='python -m tff_dprec.accounting',
      description='Epsilon of DP-REC, DP-FedAvg or DDGauss, or the '
      'calibrated parameter for --target_epsilon. Calibrated values are '
      'printed rounded in the safe direction: pasting them back meets the '
      'target.')
  parser.add_argument('--mechanism', required=True,
                      choices=['dp_rec', 'dp_fedavg', 'ddgauss'])
  parser.add_argument('--population', type=int, required=True)
  parser.add_argument('--clients_per_round', type=int, required=True)
  parser.add_argument('--rounds', type=int, required=True)
  parser.add_argument('--delta', type=float, default=None,
                      help='default: population ** -1.1')
  parser.add_argument('--target_epsilon', type=float, default=None)
  parser.add_argument('--clip_ratio', type=float, help='dp_rec')
  parser.add_argument('--bits', type=int,
                      help='dp_rec: index bits per group; ddgauss: bits')
  parser.add_argument('--num_groups', type=int, help='dp_rec: groups')
  parser.add_argument('--total_bits', type=int,
                      help='dp_rec, --accounting=paper only: one index of '
                      'this many bits')
  parser.add_argument('--accounting', default=None,
                      choices=list(accountings.ACCOUNTINGS),
                      help="dp_rec and dp_fedavg: 'pld' (the default: the "
                      "smaller of the certified PLD and RDP epsilons; "
                      "dp_fedavg with --conversion=classic: 'rdp'), 'rdp' "
                      "(the RDP epsilon alone; docs/PRIVACY.md); dp_rec "
                      "also 'paper' (the paper's Theorem 1, unproven for "
                      "groups); ddgauss: 'rdp' only")
  parser.add_argument('--local', action='store_true',
                      help='dp_rec: local epsilon, no amplification')
  parser.add_argument('--noise_multiplier', type=float,
                      help='dp_fedavg, ddgauss')
  parser.add_argument('--l2_clip', type=float, help='ddgauss')
  parser.add_argument('--dimension', type=int, help='ddgauss')
  parser.add_argument('--conversion', default=baselines.CONVERSION_TIGHT,
                      choices=[baselines.CONVERSION_TIGHT,
                               baselines.CONVERSION_CLASSIC],
                      help='RDP to (epsilon, delta): dp_fedavg with '
                      '--accounting=rdp, and ddgauss')
  return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
  parser = _parser()
  args = parser.parse_args(argv)

  def need(*names):
    missing = [n for n in names if getattr(args, n) is None]
    if missing:
      parser.error(f'--mechanism={args.mechanism} needs ' +
                   ', '.join('--' + m for m in missing))

  try:
    delta = (args.delta if args.delta is not None else
             accounting.default_delta(args.population))
    common = dict(population=args.population,
                  clients_per_round=args.clients_per_round,
                  rounds=args.rounds, delta=delta)
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter('always', accounting.UnprovenPaperBound)
      if args.mechanism == 'dp_rec':
        _dp_rec(args, common, delta, need)
      elif args.mechanism == 'dp_fedavg':
        _dp_fedavg(args, common, delta, need)
      else:
        _ddgauss(args, common, delta, need)
    for w in caught:
      print(f'warning: {w.message}')
  except (ValueError, TypeError) as e:
    parser.exit(2, f'error: {e}\n')


def _dp_rec(args, common, delta, need):
  if args.accounting is None:
    args.accounting = accountings.DEFAULT_ACCOUNTING
  if args.total_bits is None:
    need('bits', 'num_groups')
  bits = dict(bits=args.bits, num_groups=args.num_groups,
              total_bits=args.total_bits, accounting=args.accounting)
  label = f'accounting={args.accounting}'
  if args.target_epsilon is not None:
    c = accounting.calibrate_clip_ratio(target_epsilon=args.target_epsilon,
                                        **bits, **common)
    c = calibration.round_down(c)
    eps = accounting.dp_rec_epsilon(clip_ratio=c, **bits, **common)
    print(f'clip_ratio={c:.6g} (epsilon={eps:.6g} delta={delta:.6g}, '
          f'{label})')
    return
  need('clip_ratio')
  if args.local:
    eps = accounting.dp_rec_local_epsilon(
        clip_ratio=args.clip_ratio, delta=delta, rounds=args.rounds, **bits)
    print(f'epsilon={eps:.6g} delta={delta:.6g} (local, {label})')
  else:
    eps = accounting.dp_rec_epsilon(clip_ratio=args.clip_ratio, **bits,
                                    **common)
    print(f'epsilon={eps:.6g} delta={delta:.6g} ({label})')


def _dp_fedavg(args, common, delta, need):
  if args.accounting is None:
    args.accounting = (accountings.RDP
                       if args.conversion == baselines.CONVERSION_CLASSIC
                       else accountings.DEFAULT_ACCOUNTING)
  if args.accounting not in accountings.DP_FEDAVG_ACCOUNTINGS:
    raise ValueError(f'--accounting={args.accounting} is for dp_rec; '
                     "dp_fedavg takes 'pld' or 'rdp'.")
  kind = args.accounting
  options = dict(conversion=args.conversion, accounting=kind)
  label = f'accounting={kind}'
  if args.target_epsilon is not None:
    z = accounting.calibrate_dp_fedavg_noise(
        target_epsilon=args.target_epsilon, **options, **common)
    z = calibration.round_up(z)
    eps = accounting.dp_fedavg_epsilon(noise_multiplier=z, **options,
                                       **common)
    print(f'noise_multiplier={z:.6g} (epsilon={eps:.6g} delta={delta:.6g}, '
          f'{label})')
    return
  need('noise_multiplier')
  eps = accounting.dp_fedavg_epsilon(noise_multiplier=args.noise_multiplier,
                                     **options, **common)
  print(f'epsilon={eps:.6g} delta={delta:.6g} ({label})')


def _ddgauss(args, common, delta, need):
  if (args.accounting is not None and
      args.accounting not in accountings.DDGAUSS_ACCOUNTINGS):
    raise ValueError(f'--accounting={args.accounting}: ddgauss has an RDP '
                     "accountant only ('rdp').")
  need('l2_clip', 'bits', 'dimension')
  extra = dict(l2_clip=args.l2_clip, bits=args.bits, dimension=args.dimension,
               conversion=args.conversion)
  if args.target_epsilon is not None:
    z = accounting.calibrate_ddgauss_noise(
        target_epsilon=args.target_epsilon, **extra, **common)
    # Epsilon is not monotone in the noise: keep the rounded value only if
    # it still meets the target, else print more digits.
    for digits in (6, 8, 10, 17):
      candidate = calibration.round_up(z, digits)
      eps = accounting.ddgauss_epsilon(noise_multiplier=candidate, **extra,
                                       **common)
      if eps <= args.target_epsilon:
        break
    print(f'noise_multiplier={candidate!r} (epsilon={eps:.6g} '
          f'delta={delta:.6g}, accounting=rdp)')
    return
  need('noise_multiplier')
  eps = accounting.ddgauss_epsilon(noise_multiplier=args.noise_multiplier,
                                   **extra, **common)
  print(f'epsilon={eps:.6g} delta={delta:.6g} (accounting=rdp)')


if __name__ == '__main__':
  main()
