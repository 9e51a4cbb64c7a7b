"""`python -m tff_dprec.accounting`: epsilon, or the calibrated parameter.

Epsilon of DP-REC, DP-FedAvg or DDGauss, or the calibrated parameter for
--target_epsilon. Calibrated values are printed rounded in the safe
direction: pasting them back meets the target. A bad flag or setting: one
`error:` line on stderr, exit code 2.
"""

import types
from typing import Optional, Sequence
import warnings

from absl import app
from absl import flags

from tff_dprec import accounting
from tff_dprec import command_line
from tff_dprec.accounting import accountings
from tff_dprec.accounting import baselines
from tff_dprec.accounting import calibration

MECHANISMS = ('dp_rec', 'dp_fedavg', 'ddgauss')


def _define_flags(values: flags.FlagValues) -> None:
  """The command's flags, on `values`."""
  flags.DEFINE_enum('mechanism', None, MECHANISMS, 'The mechanism.',
                    flag_values=values)
  command_line.define_federation_flags(values)
  flags.mark_flags_as_required(
      ['mechanism', 'population', 'clients_per_round', 'rounds'],
      flag_values=values)
  flags.DEFINE_float('target_epsilon', None,
                     'Calibrate to this epsilon instead of printing one.',
                     flag_values=values)
  flags.DEFINE_float('clip_ratio', None, 'dp_rec', flag_values=values)
  flags.DEFINE_integer('bits', None,
                       'dp_rec: index bits per group; ddgauss: bits',
                       flag_values=values)
  flags.DEFINE_integer('num_groups', None, 'dp_rec: groups',
                       flag_values=values)
  flags.DEFINE_integer('total_bits', None,
                       'dp_rec, --accounting=paper only: one index of this '
                       'many bits', flag_values=values)
  flags.DEFINE_enum(
      'accounting', None,
      list(accountings.ACCOUNTINGS) + list(accountings.RENAMED),
      "dp_rec and dp_fedavg: 'min_pld_rdp' (the default: the smaller of the "
      "certified PLD and RDP epsilons; dp_fedavg with --conversion=classic: "
      "'rdp'), 'rdp' (the RDP epsilon alone; docs/PRIVACY.md); dp_rec also "
      "'paper' (the paper's Theorem 1, unproven for groups); ddgauss: 'rdp' "
      'only', flag_values=values)
  flags.DEFINE_bool('local', False,
                    'dp_rec: local epsilon, no amplification',
                    flag_values=values)
  flags.DEFINE_float('noise_multiplier', None, 'dp_fedavg, ddgauss',
                     flag_values=values)
  flags.DEFINE_float('l2_clip', None, 'ddgauss', flag_values=values)
  flags.DEFINE_integer('dimension', None, 'ddgauss', flag_values=values)
  flags.DEFINE_enum('conversion', baselines.CONVERSION_TIGHT,
                    [baselines.CONVERSION_TIGHT, baselines.CONVERSION_CLASSIC],
                    'RDP to (epsilon, delta): dp_fedavg with '
                    '--accounting=rdp, and ddgauss', flag_values=values)


def main(argv: Optional[Sequence[str]] = None) -> None:
  """Prints epsilon or the calibrated parameter for the flags in `argv`
  (default sys.argv[1:]).

  Raises:
    SystemExit: With code 2 after one `error:` line for bad input (0 after
      --help).
  """
  command_line.run(_define_flags, _account, __doc__, argv)


def _account(args: types.SimpleNamespace) -> None:
  """The mechanism's line for the parsed flags, and any warning's."""

  def need(*names):
    missing = [n for n in names if getattr(args, n) is None]
    if missing:
      raise app.UsageError(f'--mechanism={args.mechanism} needs ' +
                           ', '.join('--' + m for m in missing))

  delta = (args.delta if args.delta is not None else
           accounting.default_delta(args.population))
  common = dict(population=args.population,
                clients_per_round=args.clients_per_round,
                rounds=args.rounds, delta=delta)
  if args.accounting in accountings.RENAMED:
    print('note: ' + accountings.renamed_notice(args.accounting,
                                                '--accounting'))
    args.accounting = accountings.renamed(args.accounting)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always', accounting.UnprovenPaperBoundWarning)
    if args.mechanism == 'dp_rec':
      _dp_rec(args, common, delta, need)
    elif args.mechanism == 'dp_fedavg':
      _dp_fedavg(args, common, delta, need)
    else:
      _ddgauss(args, common, delta, need)
  for w in caught:
    print(f'warning: {w.message}')


def _dp_rec(args, common, delta, need):
  kind = (accountings.DEFAULT_ACCOUNTING if args.accounting is None
          else args.accounting)
  if args.total_bits is None:
    need('bits', 'num_groups')
  bits = dict(bits=args.bits, num_groups=args.num_groups,
              total_bits=args.total_bits, accounting=kind)
  label = f'accounting={kind}'
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
  kind = args.accounting
  if kind is None:
    kind = (accountings.RDP if args.conversion == baselines.CONVERSION_CLASSIC
            else accountings.DEFAULT_ACCOUNTING)
  if kind not in accountings.DP_FEDAVG_ACCOUNTINGS:
    raise ValueError(f'--accounting={kind} is for dp_rec; '
                     "dp_fedavg takes 'min_pld_rdp' or 'rdp'.")
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
  command_line.run_main(main)
