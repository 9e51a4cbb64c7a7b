"""A plan as lines of text: a markdown table of the mechanisms, then notes.

`python -m tff_dprec.plan` prints them, and so does the experiments' main
job before it trains.
"""

from tff_dprec import sizes
from tff_dprec.accounting import calibration
from tff_dprec.plan import planner
from tff_dprec.plan import results
from tff_dprec.plan import search

_LABELS = {'dp_rec': 'DP-REC', 'dp_fedavg': 'DP-FedAvg',
           'ddgauss': f'DDGauss{planner.DDGAUSS_BITS}'}


def format_plan(p: results.Plan) -> list[str]:
  """The plan as lines of text (a markdown table, then notes)."""
  fed = p.federation
  reference = p.dp_fedavg.relative_noise
  lines = [
      f'Federation: N={fed.population:,} clients, B={fed.clients_per_round:,}'
      f' per round, T={fed.rounds} rounds, d={fed.dimension:,} parameters, '
      f'target epsilon={fed.target_epsilon:g} at delta={fed.delta:.3g}.',
      '| mechanism | accountant | calibrated | relative noise | vs DP-FedAvg '
      '| upload bits/client-round | download bits/client-round |',
      '|---|---|---|---|---|---|---|']
  for m in (p.dp_rec, p.dp_fedavg, p.ddgauss):
    symbol = 'c' if m.parameter_name == 'clip_ratio' else 'z'
    download = ('-' if m.download_bits is None else
                f'{m.download_bits:,.0f}')
    if m.parameter is None:
      lines.append(f'| {_LABELS[m.name]} | {m.accountant} | out of reach | - '
                   f'| - | {m.upload_bits:,} | {download} |')
      continue
    # 6 digits: exact for c (rounded down) and DP-FedAvg's z (rounded up);
    # DDGauss's z, not rounded (its epsilon is not monotone in z), has all
    # its digits in --json.
    lines.append(
        f'| {_LABELS[m.name]} | {m.accountant} | {symbol}={m.parameter:.6g} '
        f'| {m.relative_noise:.4g} | {m.relative_noise / reference:.3g}x | '
        f'{m.upload_bits:,} | {download} |')
  lines.extend(_notes(p))
  return lines


def _notes(p):
  """The lines under the table: RDP z, errors, DP-REC, its break-even."""
  fed, r, g = p.federation, p.dp_rec, p.ddgauss
  z_rdp = p.dp_fedavg.rdp_noise_multiplier
  noise_rdp = search.gaussian_relative_noise(z_rdp, fed.clients_per_round)
  notes = [f"DP-FedAvg under RDP (DDGauss's accountant): z={z_rdp:.6g}, "
           f'relative noise {noise_rdp:.4g}.']
  if g.error:
    notes.append(f'DDGauss{g.bits}: {g.error}')
  if r.parameter is None:
    return notes + [f'DP-REC: {r.error}']
  source = 'chosen from c' if r.bits_from_c else 'given'
  notes.append(
      f'DP-REC: {r.bits} bits ({source}) x {r.num_groups} group(s), '
      f'a {r.upload_bits}-bit message; local epsilon per participation '
      f'{calibration.round_up(r.local_epsilon, 4):.4g} (what the server '
      'learns from one message, rounded up); download: the history or the '
      f'full state ({r.full_bits:,} bits), whichever is smaller, in '
      'expectation.')
  notes += _warnings(r, 'at B')
  if r.break_even_searched:
    notes += _break_even_notes(p)
  return notes


def _break_even_notes(p):
  fed, f, found = p.federation, p.dp_fedavg, p.dp_rec.break_even
  if found is None:
    return [
        f"DP-REC break-even: none up to N={fed.population:,} clients per "
        f"round: its relative noise stays above DP-FedAvg's at "
        f'B={fed.clients_per_round:,}.']
  fedavg_round = fed.clients_per_round * f.upload_bits
  return _warnings(found, 'at the break-even') + [
      f"DP-REC break-even: B'={found.clients_per_round:,} clients per round "
      f'(c={found.clip_ratio:.6g}, {found.bits} bits) match DP-FedAvg\'s '
      f'relative noise at B={fed.clients_per_round:,}. Per round DP-REC '
      f'would upload {found.upload_bits_per_round / 8e6:.4g} MB (DP-FedAvg: '
      f'{fedavg_round / 8e6:.4g} MB) and download '
      f'{found.download_bits_per_round / 8e6:.4g} MB (DP-FedAvg: '
      f'{fed.clients_per_round * f.download_bits / 8e6:.4g} MB).']


def _warnings(setting, where):
  """Warnings for DP-REC `where`: outside the idealisation, margin unmet.

  `setting` is a `results.DpRecPlan` or `results.BreakEven`.
  """
  out = []
  if setting.outside_idealisation:
    out.append(f'WARNING: DP-REC {where}: c >= '
               f'{sizes.IDEALISED_CLIP_RATIO_LIMIT:g} is outside the '
               'idealisation the privacy proof relies on (docs/PRIVACY.md, '
               'section 7): do not trust its epsilon.')
  if setting.bits_margin_met is False:
    out.append(f'WARNING: DP-REC {where}: {search.MAX_AUTO_BITS} bits (the '
               'cap) do not meet the coding margin at this c; more groups '
               'would.')
  return out
