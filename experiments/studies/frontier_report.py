"""The frontier's report: its rows, table, verdict, CSV and figure.

`summarize` turns the points that `experiments.studies.frontier` trained
into rows; `report_text` is the table (`markdown`), the verdict against
DP-FedAvg at B = 40 (`verdict`: per-point gaps, the cross-checks of DP-REC
in law against the codec, the measured break-even `break_even` beside the
planner's), and DDGauss16's distance to DP-FedAvg in two parts
(`split_lines`); `write` writes frontier.csv, frontier.md and frontier.png.
"""

import math
import os

import numpy as np

from experiments.infra import atomic_files
from experiments.runner import registry
from experiments.runner import report
from experiments.runner import stats
from experiments.studies import tuning

# The point DP-REC's points are measured against.
REFERENCE = ('dp_fedavg', 40)

# What the table's two round columns mean (`summarize`).
ROUNDS_NOTE = ('rounds: the fewest any seed trained; rounds lost: lost to '
               'interruptions, summed over the seeds, and counted as spent '
               'privacy (a seed that lost one trained one round fewer).')


def summarize(points) -> list[dict]:
  """One row per point from (method, B, records, info) tuples.

  `rounds` is the fewest rounds any seed trained; `lost_rounds` the rounds
  its seeds lost to interruptions, summed over them. A lost round counts as
  spent privacy, so a seed that lost one stops that much sooner.
  """
  rows = []
  for name, clients, records, info in points:
    row = dict(aggregator=name, clients_per_round=clients,
               setting=info.get('setting', ''), tuned=info.get('tuned', False),
               fixed=info.get('fixed', False),
               edge='; '.join(info.get('edges', [])),
               extended='; '.join(info.get('extended', [])),
               note=info.get('note', ''), seeds=len(records),
               shared_with=info.get('shared_with', ''))
    if records:
      mean, se = stats.mean_se([r['final_metric'] for r in records])
      params = records[0].get('params', {})
      upload = sum(r['upload_gb'] for r in records) / len(records)
      download = sum(r['download_gb'] for r in records) / len(records)
      row.update(
          scores=[r['final_metric'] for r in records],
          rounds=min(r['rounds'] for r in records),
          lost_rounds=sum(r.get('lost_rounds', 0) for r in records),
          epsilon=max(r['epsilon'] or 0.0 for r in records),
          parameter=report.parameter_text(params, detail=True),
          relative_noise=stats.relative_noise(params, clients), mean=mean,
          se=se,
          upload_gb=upload, download_gb=download, total_gb=upload + download,
          seconds_per_round=sum(r['seconds_per_round'] for r in records) /
          len(records),
          train_seconds=sum(r['seconds_per_round'] * r['rounds']
                            for r in records))
    row['tune_seconds'] = info.get('tune_seconds', 0.0)
    rows.append(row)
  return rows


def markdown(rows, context: dict, label: str) -> str:
  """The frontier table (one row per point, then the reference rows)."""
  lines = [f'| method | B | setting (validation) | c or z | relative noise '
           f'(x {REFERENCE[0]} at B={REFERENCE[1]}) | {label} (%) | rounds '
           '| rounds lost | upload GB | download GB | total GB | s/round |',
           '|---|---|---|---|---|---|---|---|---|---|---|---|']
  reference = [r for r in rows if 'mean' in r and
               (r['aggregator'], r['clients_per_round']) == REFERENCE]
  scale = reference[0]['relative_noise'] if reference else None
  for r in rows:
    if 'mean' not in r:
      lines.append(f"| {r['aggregator']} | {r['clients_per_round']} | "
                   f"{r['note']} |" + ' |' * 9)
      continue
    se = '' if r['se'] is None else f" ± {100 * r['se']:.2f}"
    lines.append(
        f"| {r['aggregator']} | {r['clients_per_round']} | {_setting(r)} | "
        f"{r['parameter']} | {_noise(r['relative_noise'], scale)} | "
        f"{100 * r['mean']:.2f}{se} ({r['seeds']} seeds) | {r['rounds']} | "
        f"{r['lost_rounds']} | {r['upload_gb']:.3g} | "
        f"{r['download_gb']:.3g} | {r['total_gb']:.3g} | "
        f"{r['seconds_per_round']:.2f} |")
  for key, name in (('frequent_tags', report.FREQUENT_TAGS_LABEL),
                    ('initial_metric', report.INITIAL_MODEL_LABEL)):
    if context.get(key) is not None:
      lines.append(f'| {name} | | | | | {100 * context[key]:.2f} |' +
                   ' |' * 6)
  lines += ['', ROUNDS_NOTE]
  simulated = sorted({r['aggregator'] for r in rows if _in_law(r)})
  if simulated:
    lines += ['', f"{', '.join(simulated)}: {registry.IN_LAW_NOTE}."]
  return '\n'.join(lines) + '\n'


def _setting(row) -> str:
  """The setting cell: where it comes from, and how its grid was tuned."""
  setting = row['note'] or row['setting']
  if row.get('shared_with'):
    setting += f" ({row['shared_with']}'s: a cross-check)"
  if row.get('fixed'):
    setting += ' (given, untuned)'
  if row['tuned']:
    grown = tuning.grown_note(
        [k for k in (row.get('extended') or '').split('; ') if k])
    notes = ['tuned'] + ([grown] if grown else [])
    notes += [f"edge: {row['edge']}"] if row['edge'] else []
    setting += ' (' + ', '.join(notes) + ')'
  return setting


def report_text(rows, context: dict, label: str) -> str:
  """The table, then the verdict (`verdict`) where it has one."""
  lines = verdict(rows, context.get('predicted_break_even'), label)
  split = split_lines(rows)
  lines += ([''] if lines and split else []) + split
  lines += ['', time_line(rows)] if lines else [time_line(rows)]
  return markdown(rows, context, label) + '\n' + '\n'.join(lines) + '\n'


def split_lines(rows) -> list[str]:
  """Per B with DDGauss16, DP-FedAvg (RDP) and DP-FedAvg finished: the
  distance DDGauss16 - DP-FedAvg in two parts (`report.accountant_split`),
  the mechanism with its subsampling bound, and RDP against PLD."""
  lines = []
  for clients in sorted({r['clients_per_round'] for r in rows}):
    finished = [dict(aggregator=r['aggregator'], metric_mean=r['mean'],
                     metric_se=r['se']) for r in rows
                if r['clients_per_round'] == clients and 'mean' in r and
                math.isfinite(r['mean'])]
    split = report.accountant_split(finished)
    if split:
      lines.append(f'* At B = {clients}: {split}')
  return lines


def time_line(rows) -> str:
  """The tuning runs' wall time (of the invocation that finished each) and
  the points' time in training rounds, summed over the finished runs."""
  train = sum(r.get('train_seconds', 0.0) for r in rows) / 3600
  tune = sum(r.get('tune_seconds', 0.0) for r in rows) / 3600
  return (f'Time, summed over runs: {tune:.2f} h of tuning runs (wall '
          f'time) and {train:.2f} h in the points\' training rounds (s/round'
          ' x rounds: building and evaluation not counted).')


def verdict(rows, predicted=None, label='metric') -> list[str]:
  """Where DP-REC meets DP-FedAvg at the reference B, as markdown lines.

  Per DP-REC point (the real codec's, and `dp_rec_in_law`'s, DP-REC
  simulated in law): its gap to the reference (SE from both points' SEs,
  independent seeds; none unless both have one), and its upload and total
  traffic as multiples of the reference's. Where both modes ran at one B,
  their difference (`_cross_check_lines`). Then the measured break-even
  over one DP-REC curve (the real codec's point at each B where it has
  one, else the in-law point: equal in law), `_measured_break_even`; then
  the planner's `predicted` B' (None: not computed). Points with a
  non-finite mean (diverged) are named and left out.
  """
  reference = [r for r in rows if 'mean' in r and
               (r['aggregator'], r['clients_per_round']) == REFERENCE]
  ours = sorted((r for r in rows if 'mean' in r and _is_dp_rec(r)),
                key=lambda r: (r['clients_per_round'], _in_law(r)))
  if not reference or not ours or not math.isfinite(reference[0]['mean']):
    return []
  ref = reference[0]
  name = f'{REFERENCE[0]} at B = {REFERENCE[1]}'
  lines = [f'Against {name} ({100 * ref["mean"]:.2f}%, '
           f'{ref["seeds"]} seeds):', '']
  for r in ours:
    head = (f"* {r['aggregator']} at B = {r['clients_per_round']} "
            f"({r['seeds']} seeds{_lost(r)}): ")
    if not math.isfinite(r['mean']):
      lines.append(head + 'diverged; left out.')
      continue
    lines.append(
        head + f"{_gap(r, ref)} points; upload "
        f"x{r['upload_gb'] / ref['upload_gb']:.3g}, total traffic "
        f"x{r['total_gb'] / ref['total_gb']:.3g}.")
  checks = _cross_check_lines(ours)
  lines += ([''] + checks) if checks else []
  curve = {}
  for r in ours:  # The real codec's point where it has one.
    if math.isfinite(r['mean']):
      curve.setdefault(r['clients_per_round'], r)
  if curve:
    lines += ['', _measured_break_even(
        [curve[b] for b in sorted(curve)], ref, name, label)]
  if predicted is not None:
    lines.append(f'The planner predicted B\' = {predicted:,} (equal noise '
                 'over the clip).')
  return lines


def _lost(row) -> str:
  """'' or ', n round(s) lost' for a point whose seeds lost rounds."""
  lost = row.get('lost_rounds', 0)
  return f", {lost} round{'s' * (lost != 1)} lost" if lost else ''


def _is_dp_rec(row) -> bool:
  return registry.protocol(row['aggregator']) == 'dp_rec'


def _in_law(row) -> bool:
  return registry.get(row['aggregator']).in_law


def _cross_check_lines(ours) -> list[str]:
  """Per B with both modes finished: in law minus the real codec."""
  lines = []
  by_b = {}
  for r in ours:
    if math.isfinite(r['mean']):
      by_b.setdefault(r['clients_per_round'], {})[_in_law(r)] = r
  for clients, modes in sorted(by_b.items()):
    if len(modes) < 2:
      continue
    real, law = modes[False], modes[True]
    lines.append(
        f"* Cross-check at B = {clients}: {law['aggregator']} - "
        f"{real['aggregator']} {_gap(law, real)} points (equal in law: "
        f"expected 0); s/round {law['seconds_per_round']:.2f} in law, "
        f"{real['seconds_per_round']:.2f} with the codec.")
  return lines


def _gap(row, ref) -> str:
  gap = 100 * (row['mean'] - ref['mean'])
  if row['se'] is None or ref['se'] is None:
    return f'{gap:+.2f}'
  return f"{gap:+.2f} ± {100 * math.hypot(row['se'], ref['se']):.2f}"


def break_even(points) -> dict:
  """The measured break-even of a curve of (B, gap, SE of the gap) points.

  `first`: the smallest B whose gap is within one SE of 0 or above (None
  if none is). `estimate`: the B where the gap, linear in log B between
  consecutive points, first reaches 0; `low` and `high`: the same for the
  gaps plus and minus one SE. Each is None when that curve never reaches
  0 over the points, and the first point's B when it starts at or above
  0 (`at_first`: which of the three do).
  """
  points = sorted(points)
  first = next((b for b, gap, se in points if gap >= -se), None)

  def crossing(shift):
    shifted = [(math.log(b), gap + shift * se) for b, gap, se in points]
    for i, (x, y) in enumerate(shifted):
      if y >= 0:
        if i == 0:
          return points[0][0], True
        x0, y0 = shifted[i - 1]
        return math.exp(x0 + (x - x0) * -y0 / (y - y0)), False
    return None, False

  result = dict(first=first, at_first=[])
  for key, shift in (('estimate', 0.0), ('low', 1.0), ('high', -1.0)):
    result[key], at_first = crossing(shift)
    if at_first:
      result['at_first'].append(key)
  return result


# The break-even's percentile bootstrap over seeds: resamples, seed.
BOOTSTRAP_DRAWS = 10000
BOOTSTRAP_SEED = 0


def break_even_interval(curve, reference, level=0.95,
                        draws=BOOTSTRAP_DRAWS, seed=BOOTSTRAP_SEED):
  """A percentile bootstrap interval of the break-even over seeds.

  Each draw resamples, with replacement, the seeds' scores of every point
  of `curve` ((B, scores) pairs) and of `reference` (scores), independently,
  and takes `break_even`'s estimate on the mean gaps. Returns (low, high):
  a bound is 0 where the draws' quantile starts at or above 0 at the first
  point (at most its B), inf where it never reaches 0 over the points
  (above the last B), None when a point has fewer than 2 seeds.
  """
  if len(reference) < 2 or any(len(scores) < 2 for _, scores in curve):
    return None
  rng = np.random.default_rng(seed)

  def resampled_means(scores):
    scores = np.asarray(scores, dtype=float)
    picks = rng.integers(0, len(scores), size=(draws, len(scores)))
    return scores[picks].mean(axis=1)

  ref = resampled_means(reference)
  means = [(b, resampled_means(scores) - ref) for b, scores in sorted(curve)]
  found = np.empty(draws)
  for i in range(draws):
    estimate = break_even([(b, gaps[i], 0.0) for b, gaps in means])
    if 'estimate' in estimate['at_first']:
      found[i] = 0.0
    else:
      found[i] = math.inf if estimate['estimate'] is None else (
          estimate['estimate'])
  tail = 100 * (1 - level) / 2
  return (float(np.percentile(found, tail, method='lower')),
          float(np.percentile(found, 100 - tail, method='higher')))


def _measured_break_even(ours, ref, name, label) -> str:
  """The measured break-even (`break_even`) of DP-REC's curve, in words."""
  points = [(r['clients_per_round'], r['mean'] - ref['mean'],
             math.hypot(r['se'] or 0.0, ref['se'] or 0.0)) for r in ours]
  found = break_even(points)
  last = ours[-1]
  simulated = [f"{r['clients_per_round']:,}" for r in ours if _in_law(r)]
  who = 'dp_rec' + (f" (in law at B = {', '.join(simulated)})"
                    if simulated else '')
  if found['first'] is None:
    return (f"Measured: {who} stays below {name} up to B = "
            f"{last['clients_per_round']}, by {_gap(last, ref)} points"
            ' (more than one SE).')
  row = next(r for r in ours if r['clients_per_round'] == found['first'])
  text = (f"Measured: {who} comes within one SE of {name}, or above it, "
          f"first at B = {found['first']:,} ({_gap(row, ref)} points).")
  if found['estimate'] is None:
    return text + (f' Its {label} stays below the reference\'s up to B = '
                   f"{last['clients_per_round']:,}.")
  if 'estimate' in found['at_first']:
    return text + (' It reaches the reference already at B = '
                   f"{ours[0]['clients_per_round']:,}.")

  def bound(key):
    if key in found['at_first']:
      return f"≤ {ours[0]['clients_per_round']:,}"
    if found[key] is None:
      return f"> {last['clients_per_round']:,}"
    return f'≈ {found[key]:,.0f}'

  return text + (
      f" Its {label} reaches the reference's at B ≈ "
      f"{found['estimate']:,.0f} (linear in log B between the measured "
      f"points); with each gap moved by one SE, between B {bound('low')} "
      f"and B {bound('high')} (a ±1 SE band, not a confidence interval)."
      + _interval_text(ours, ref))


def _interval_text(ours, ref) -> str:
  """' 95% interval ...' from `break_even_interval`, or ''."""
  interval = break_even_interval(
      [(r['clients_per_round'], r.get('scores', [])) for r in ours],
      ref.get('scores', []))
  if interval is None:
    return ''
  first, last = ours[0]['clients_per_round'], ours[-1]['clients_per_round']

  def bound(value):
    if value == 0.0:
      return f'≤ {first:,}'
    if math.isinf(value):
      return f'> {last:,}'
    return f'{value:,.0f}'

  return (f' A 95% percentile bootstrap interval over seeds '
          f'({BOOTSTRAP_DRAWS:,} resamples of each point\'s seeds): '
          f'B {bound(interval[0])} to {bound(interval[1])}.')


def _noise(value, scale) -> str:
  if value is None:
    return '-'
  return f'{value:.4g}' + ('' if not scale else f' ({value / scale:.2f}x)')


def write(output_dir: str, rows, context: dict, label: str) -> list[str]:
  """Writes frontier.csv, frontier.md (the table and `verdict`) and, once a
  point has finished, frontier.png; each replaced whole (written aside,
  then renamed), so a reader never sees half a file."""
  os.makedirs(output_dir, exist_ok=True)
  csv_path = atomic_files.write_csv(
      os.path.join(output_dir, 'frontier.csv'), rows)
  md_path = os.path.join(output_dir, 'frontier.md')
  atomic_files.write_text(md_path, report_text(rows, context, label))
  finished = [r for r in rows if 'mean' in r]
  if not finished:
    return [csv_path, md_path]
  png_path = os.path.join(output_dir, 'frontier.png')
  with atomic_files.replacing_path(png_path, suffix='.png') as tmp:
    plot(tmp, finished, context, label)
  return [csv_path, md_path, png_path]


def plot(path, rows, context, label) -> None:
  """The metric against upload GB, total GB and B (log x), +- SE bands."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), sharey=True)
  panels = (('upload_gb', 'upload per run, GB (log)'),
            ('total_gb', 'upload + download per run, GB (log)'),
            ('clients_per_round', 'clients per round B (log)'))
  reference = [r for r in rows
               if (r['aggregator'], r['clients_per_round']) == REFERENCE]
  for ax, (key, xlabel) in zip(axes, panels):
    for name in dict.fromkeys(r['aggregator'] for r in rows):
      mine = sorted((r for r in rows if r['aggregator'] == name),
                    key=lambda r: r[key])
      x = [r[key] for r in mine]
      y = [100 * r['mean'] for r in mine]
      se = [100 * (r['se'] or 0.0) for r in mine]
      legend = name + (' (simulated in law)' if _in_law(mine[0]) else '')
      line, = ax.plot(x, y, marker='o', label=legend, color=_COLORS.get(name))
      ax.fill_between(x, [a - b for a, b in zip(y, se)],
                      [a + b for a, b in zip(y, se)],
                      color=line.get_color(), alpha=0.2)
      if key != 'clients_per_round':
        for r in mine:
          ax.annotate(f"B={r['clients_per_round']}", (r[key], 100 * r['mean']),
                      textcoords='offset points', xytext=(4, -10), fontsize=7)
    _reference_lines(ax, reference, context)
    ax.set_xscale('log')
    if key == 'clients_per_round':
      size_ticks(ax, {r[key] for r in rows})
    ax.set_xlabel(xlabel)
    ax.grid(alpha=0.3)
  axes[0].set_ylabel(f'final {label} (%), test split')
  axes[0].legend(fontsize=8, loc='lower right')
  epsilon = max(r['epsilon'] for r in rows)
  fig.suptitle(f'{label} at epsilon {epsilon:.2g}: mean ± SE over seeds',
               fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


# The colours of the other studies' figures (studies.real_images).
_COLORS = {'dp_fedavg': 'tab:orange', 'dp_rec': 'tab:blue',
           'ddgauss16': 'tab:green', 'dp_fedavg_rdp': 'tab:gray',
           registry.DP_REC_IN_LAW: 'tab:purple'}


def _reference_lines(ax, reference, context):
  if reference:
    ax.axhline(100 * reference[0]['mean'], color=_COLORS[REFERENCE[0]],
               ls='--',
               lw=1, label=f'dp_fedavg at B={REFERENCE[1]}')
  if context.get('frequent_tags') is not None:
    ax.axhline(100 * context['frequent_tags'], color='black', ls=':', lw=1,
               label='frequent tags')


def size_ticks(ax, sizes) -> None:
  """Ticks at the sizes trained, as plain numbers; slanted where neighbours
  are less than a factor 2 apart (2560 and 4096 would overlap on a log axis).
  """
  sizes = sorted(sizes)
  crowded = any(b < 2 * a for a, b in zip(sizes, sizes[1:]))
  ax.set_xticks(sizes, [str(b) for b in sizes],
                rotation=45 if crowded else 0,
                ha='right' if crowded else 'center')
  ax.minorticks_off()
