"""Summary files, a Markdown table like the paper's Table 1, and plots.

Every aggregator may have been run with several seeds. `records` holds one
dict per (aggregator, seed) run; `curves` maps each aggregator to one list of
evaluation points per seed (see `write_curves`). Tables report the mean over
seeds with its standard error; plots draw the mean with a +-1 standard error
band, in the style of the DP-REC paper's Figure 1.
"""

import csv
import math
import os
import statistics
from typing import Callable, Optional, Sequence

from experiments.infra import atomic_files
from experiments.runner import registry

GIGABYTE_BITS = 8e9

FREQUENT_TAGS_LABEL = 'frequent tags (5 most frequent)'
INITIAL_MODEL_LABEL = 'initial model'
REFERENCE = 'dp_fedavg'

# Columns of table.csv, in order (the keys of `summarize`'s rows).
SUMMARY_COLUMNS = (
    'aggregator', 'n_seeds', 'seeds', 'metric_mean', 'metric_se', 'epsilon',
    'local_epsilon_per_participation', 'accounting', 'rounds', 'downlink',
    'upload_gb', 'download_gb', 'total_gb', 'seconds_per_round')
CURVE_COLUMNS = ('aggregator', 'seed', 'round', 'metric', 'epsilon',
                 'upload_bits', 'download_bits')

_FIGSIZE = (5.5, 4)
_DPI = 120
# Each aggregator keeps its colour and marker in all plots, so that lines stay
# apart in greyscale; at most this many markers per line.
_MARKERS = ('o', 's', '^', 'D', 'v', 'P', 'X', '*')
_MAX_MARKERS = 30
# Private aggregators calibrated to one target epsilon draw the same epsilon
# curve: line styles let the lower ones show through.
_LINESTYLES = ('-', '--', '-.', ':')


def write_summary(output_dir: str, records: Sequence[dict]) -> str:
  return atomic_files.write_json(
      os.path.join(output_dir, 'summary.json'), list(records))


def summarize(records: Sequence[dict]) -> list[dict]:
  """One row per aggregator (first-appearance order), aggregated over seeds.

  The metric is summarized by its mean over the n seeds and the standard
  error of that mean, SE = s / sqrt(n) with s the sample standard deviation
  (ddof = 1); SE is None for a single seed. epsilon and the local epsilon are
  the largest over seeds (None when non-private), rounds the fewest, and
  communication (GB = 8e9 bits) and seconds per round the mean.

  Args:
    records: One dict per (aggregator, seed) run, with keys 'aggregator',
      'seed', 'final_metric', 'epsilon', 'local_epsilon_per_participation',
      'accounting', 'rounds', 'downlink', 'upload_bits_total',
      'download_bits_total' and 'seconds_per_round'.

  Returns:
    A list of dicts keyed by `SUMMARY_COLUMNS`.
  """
  rows = []
  for name, runs in group_by_aggregator(records).items():
    mean, se = mean_se([r['final_metric'] for r in runs])
    upload = statistics.fmean(r['upload_bits_total'] for r in runs)
    download = statistics.fmean(r['download_bits_total'] for r in runs)
    rows.append(dict(
        aggregator=name,
        n_seeds=len(runs),
        seeds=[r.get('seed') for r in runs],
        metric_mean=mean,
        metric_se=se,
        epsilon=_max_or_none(r.get('epsilon') for r in runs),
        local_epsilon_per_participation=_max_or_none(
            r.get('local_epsilon_per_participation') for r in runs),
        accounting=_joined(r.get('accounting') for r in runs),
        rounds=min(r['rounds'] for r in runs),
        downlink=_joined(r.get('downlink', 'full') for r in runs),
        upload_gb=upload / GIGABYTE_BITS,
        download_gb=download / GIGABYTE_BITS,
        total_gb=(upload + download) / GIGABYTE_BITS,
        seconds_per_round=statistics.fmean(
            r['seconds_per_round'] for r in runs),
    ))
  return rows


def markdown_table(records: Sequence[dict],
                   context: Optional[dict] = None) -> str:
  """A Markdown table: one row per aggregator, mean +- SE over seeds.

  Args:
    records: One dict per (aggregator, seed) run (see `summarize`).
    context: Optional reference points on the same test set:
      'initial_metric' (the untrained model), 'frequent_tags' (always
      predicting the 5 most frequent tags), 'split' (e.g. 'test') and
      'wall_seconds'. Baselines become extra rows with only the metric.

  Returns:
    The table and its explanatory lines, ending in a newline.
  """
  if not records:
    return '(no results)\n'
  context = context or {}
  label = records[0].get('metric_label', 'metric')
  rows = summarize(records)
  lines = _table_head(records[0], rows, context, label)
  for row in rows:
    lines.append(
        f"| {display_name(row['aggregator'])} | {_metric_cell(row)} | "
        f"{_number(row['epsilon'])} | "
        f"{_number(row['local_epsilon_per_participation'])} | "
        f"{row['accounting'] or '-'} | {row['rounds']} | "
        f"{row['downlink'] or 'full'} | {row['upload_gb']:.4g} | "
        f"{row['download_gb']:.4g} | {row['total_gb']:.4g} | "
        f"{row['seconds_per_round']:.2f} |")
  for name, value in baselines(context):
    lines.append(f'| {name} | {100 * value:.2f} |' + ' - |' * 9)
  lines += _table_notes(records, rows, context, label)
  return '\n'.join(lines) + '\n'


def _table_head(first, rows, context, label) -> list[str]:
  """The caption line and the header of `markdown_table`."""
  counts = sorted({row['n_seeds'] for row in rows})
  seeds = (str(counts[0]) if len(counts) == 1
           else f'{counts[0]}-{counts[-1]}')
  split = f", {context['split']} split" if context.get('split') else ''
  return [
      f"**{first['task']}** ({first['data_source']} data{split}), "
      f"delta = {first['delta']:.3g}, {seeds} "
      f"seed{'' if counts == [1] else 's'} per aggregator",
      '',
      f'| aggregator | {label} (%) | epsilon | local eps | accounting | '
      'rounds | downlink | upload GB | download GB | total GB | s/round |',
      '|---|---|---|---|---|---|---|---|---|---|---|',
  ]


def _table_notes(records, rows, context, label) -> list[str]:
  """The lines under `markdown_table`'s rows."""
  lines = ['']
  lines.append(f'{label}: mean ± standard error over seeds (sample standard '
               'deviation / sqrt(n)); communication and s/round are means '
               'over seeds, epsilon the largest.')
  lines.append('')
  lines.append('epsilon: against observers who do not know who was sampled '
               '(amplified; the runs draw their samples from the recorded '
               'seed, for reproducibility, so whoever holds it knows them: '
               'docs/PRIVACY.md, section 3). local eps: one participation '
               'against the server (DP-REC).')
  if any(r['aggregator'].startswith('ddgauss') and r.get('epsilon')
         for r in records):
    lines.append('DDGauss epsilon: Poisson accounting for B distinct clients '
                 'per round, an assumption, not a theorem (docs/PRIVACY.md, '
                 'section 8); and an RDP accountant, looser than the PLD of '
                 'DP-REC and DP-FedAvg, so DDGauss is calibrated with more '
                 'noise than a tight accountant would need (a handicap).')
  simulated = sorted({r['aggregator'] for r in records
                      if r['aggregator'] in registry.names() and
                      registry.get(r['aggregator']).in_law})
  if simulated:
    lines.append(f"{', '.join(simulated)}: {registry.IN_LAW_NOTE}.")
  split = accountant_split(rows)
  if split:
    lines.append('')
    lines.append(split)
  ratios = communication_ratios(records)
  if ratios:
    lines.append('')
    lines.append('Total communication per client-round, relative to '
                 f'{REFERENCE}: ' + ', '.join(
                     f'{name} {_ratio_words(ratio)}'
                     for name, ratio in ratios))
  differences = _difference_lines(rows, context)
  if differences:
    lines.append('')
    lines.append('Differences in points of the private aggregators (± '
                 'standard error of the difference, sqrt(se1^2 + se2^2); '
                 'the frequent-tags baseline is exact):')
    lines.extend(differences)
  if context.get('wall_seconds') is not None:
    lines.append('')
    lines.append(f"Wall time {context['wall_seconds']:.0f} s.")
  return lines


def communication_ratios(records: Sequence[dict],
                         reference: str = REFERENCE) -> list:
  """(aggregator, ratio) of the reference's total bits per client-round to
  each other aggregator's; empty without the reference.

  Bits per client-round are averaged over each aggregator's seeds first.
  With the full downlink they are the fixed per-client sizes (a Poisson
  sample's client count varies around rounds x B); with the history
  downlink, the measured total over rounds x B.
  """
  per_client = {}
  for name, runs in group_by_aggregator(records).items():
    bits = [_bits_per_client_round(r) for r in runs
            if r['rounds'] * r['clients_per_round']]
    if bits:
      per_client[name] = statistics.fmean(bits)
  if reference not in per_client:
    return []
  return [(name, per_client[reference] / bits)
          for name, bits in per_client.items()
          if name != reference and bits > 0]


def _bits_per_client_round(record: dict) -> float:
  if record.get('downlink') == 'full' and (
      'upload_bits_per_client_round' in record):
    return (record['upload_bits_per_client_round'] +
            record['download_bits_per_client_round'])
  return ((record['upload_bits_total'] + record['download_bits_total'])
          / (record['rounds'] * record['clients_per_round']))


def write_table(output_dir: str, records: Sequence[dict],
                context: Optional[dict] = None) -> str:
  """Writes table.md (`markdown_table`) and table.csv (`summarize`'s rows).

  Args:
    output_dir: An existing directory.
    records: One dict per (aggregator, seed) run.
    context: Optional baselines, see `markdown_table`.

  Returns:
    The path of table.md.
  """
  path = atomic_files.write_text(os.path.join(output_dir, 'table.md'),
                                 markdown_table(records, context))
  with atomic_files.replacing(os.path.join(output_dir, 'table.csv'),
                              newline='') as f:
    writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
    writer.writeheader()
    for row in summarize(records):
      writer.writerow({
          k: (' '.join(str(s) for s in v) if k == 'seeds'
              else '' if v is None else v) for k, v in row.items()})
  return path


def write_curves(output_dir: str, curves: dict,
                 records: Optional[Sequence[dict]] = None) -> str:
  """Writes curves.csv: every evaluation point behind the plots.

  Args:
    output_dir: An existing directory.
    curves: Aggregator -> one list per seed of points {'round', 'metric',
      'epsilon', 'upload_bits', 'download_bits'} (bits cumulative over all
      clients up to and including the round; epsilon None when non-private).
    records: Optional; when an aggregator has as many records as seed curves,
      the 'seed' column takes their seeds in order, else the curve's position.

  Returns:
    The path of curves.csv (columns `CURVE_COLUMNS`; None written as '').
  """
  path = os.path.join(output_dir, 'curves.csv')
  grouped = group_by_aggregator(records or [])
  with atomic_files.replacing(path, newline='') as f:
    writer = csv.writer(f)
    writer.writerow(CURVE_COLUMNS)
    for name, seed_curves in curves.items():
      seeds = [r.get('seed') for r in grouped.get(name, [])]
      if len(seeds) != len(seed_curves) or None in seeds:
        seeds = list(range(len(seed_curves)))
      for seed, points in zip(seeds, seed_curves):
        for p in points:
          writer.writerow([name, seed] + [
              '' if p.get(k) is None else p[k] for k in CURVE_COLUMNS[2:]])
  return path


def write_plots(output_dir: str, records: Sequence[dict], curves: dict,
                context: Optional[dict] = None) -> list[str]:
  """Writes metric vs round, metric vs communication, epsilon vs round.

  One line per aggregator: the mean over seeds with a shaded +-1 standard
  error band. A seed that stopped early would make the mean jump where it
  drops out, so each line covers only the rounds all its seeds evaluated.
  Baselines from `context` are dashed horizontal lines on the metric plots;
  the epsilon plot shows the aggregators with an epsilon after round 0.

  Args:
    output_dir: An existing directory.
    records: One dict per (aggregator, seed) run (task, metric label and
      aggregator order come from them).
    curves: See `write_curves`.
    context: Optional baselines, see `markdown_table`.

  Returns:
    The paths of metric_vs_round.png, metric_vs_communication.png and
    epsilon_vs_round.png; empty without records.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  if not records:
    return []
  task = records[0]['task']
  label = records[0].get('metric_label', 'metric')
  names = list(dict.fromkeys([r['aggregator'] for r in records] +
                             list(curves)))
  seed_curves = {n: [c for c in curves.get(n, []) if c] for n in names}
  references = list(baselines(context or {}))
  private = [n for n in names if any(
      p.get('epsilon') is not None and p['round'] > 0
      for c in seed_curves[n] for p in c)]
  paths = []
  for filename, title, xlabel, ylabel, x_fn, y_fn, shown in _panels(
      task, label, names, private):
    fig, ax = plt.subplots(figsize=_FIGSIZE)
    is_epsilon = y_fn is _epsilon
    for name in shown:
      _draw_line(ax, name, seed_curves[name], x_fn, y_fn, names.index(name),
                 shown.index(name) if is_epsilon else 0)
    _finish_panel(ax, [] if is_epsilon else references, x_fn, xlabel, ylabel,
                  title, 'no private aggregator evaluated' if is_epsilon
                  else 'no evaluation points')
    fig.tight_layout()
    path = os.path.join(output_dir, filename)
    with atomic_files.replacing_path(path, suffix='.png') as tmp:
      fig.savefig(tmp, dpi=_DPI)
    plt.close(fig)
    paths.append(path)
  return paths


def _panels(task, label, names, private):
  """(file, title, x label, y label, x_fn, y_fn, aggregators) per figure."""
  return [
      ('metric_vs_round.png', f'{task}: {label} vs round', 'round',
       f'{label} (%)', None, _metric, names),
      ('metric_vs_communication.png', f'{task}: {label} vs communication',
       'total communication, upload + download (GB, log scale)',
       f'{label} (%)', _communication_gb, _metric, names),
      ('epsilon_vs_round.png', f'{task}: epsilon vs round', 'round',
       'epsilon spent', None, _epsilon, private),
  ]


def _finish_panel(ax, references, x_fn, xlabel, ylabel, title, empty_text):
  """Reference lines, axes, title and legend (or `empty_text`) of a panel."""
  for (base, value), color in zip(references, ('black', '0.5')):
    ax.axhline(100 * value, linestyle='--', linewidth=1, color=color,
               label=base)
  if x_fn is _communication_gb:
    ax.set_xscale('log')
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=10)
  ax.grid(True, alpha=0.3, which='both' if x_fn else 'major')
  if ax.get_legend_handles_labels()[0]:
    ax.legend(fontsize=8)
  else:
    ax.text(0.5, 0.5, empty_text, ha='center', va='center',
            transform=ax.transAxes)


def group_by_aggregator(records: Sequence[dict]) -> dict:
  """Aggregator -> its records, in first-appearance order."""
  grouped = {}
  for r in records:
    grouped.setdefault(r['aggregator'], []).append(r)
  return grouped


def lost_rounds_note(runs: Sequence[dict]) -> str:
  """'' or what a table says of runs that lost rounds to an interruption
  (their rounds count as spent privacy, so such a run trains fewer)."""
  lost = [(r.get('seed'), r['lost_rounds']) for r in runs
          if r.get('lost_rounds')]
  if not lost:
    return ''
  total = sum(n for _, n in lost)
  seeds = ', '.join(str(s) for s, _ in lost)
  return (f'{total} round{"s" * (total != 1)} lost to interruptions (seed '
          f'{seeds}), counted as spent')


# DDGauss's distance to DP-FedAvg in two parts, through DP-FedAvg under RDP
# (`registry.DP_FEDAVG_RDP`): (name, minuend, subtrahend).
SPLIT = (('the mechanism and its general subsampling bound', 'ddgauss16',
          'dp_fedavg_rdp'),
         ('RDP against PLD, the accountant', 'dp_fedavg_rdp', 'dp_fedavg'))


def accountant_split(rows: Sequence[dict]) -> str:
  """'' or a line splitting DDGauss16 - DP-FedAvg into the mechanism's part
  and the accountant's, in points with the SE of each difference."""
  by_name = {r['aggregator']: r for r in rows}
  if not all(name in by_name for _, a, b in SPLIT for name in (a, b)):
    return ''
  parts = []
  for what, a, b in SPLIT:
    first, second = by_name[a], by_name[b]
    diff = 100 * (first['metric_mean'] - second['metric_mean'])
    se = ''
    if first['metric_se'] is not None and second['metric_se'] is not None:
      se = ' ± {:.2f}'.format(
          100 * math.hypot(first['metric_se'], second['metric_se']))
    parts.append(f'{a} - {b} {diff:+.2f}{se} ({what})')
  total = 100 * (by_name['ddgauss16']['metric_mean'] -
                 by_name['dp_fedavg']['metric_mean'])
  return (f'ddgauss16 - dp_fedavg {total:+.2f} points, in two parts: ' +
          '; '.join(parts) + '.')


def _ratio_words(ratio: float) -> str:
  """'365x less', '1.5x more', or 'the same' (within 0.5%)."""
  if abs(ratio - 1.0) < 5e-3:
    return 'the same'
  if ratio > 1.0:
    return f'{ratio:.3g}x less'
  return f'{1.0 / ratio:.3g}x more'


def mean_se(values: Sequence[float]) -> tuple:
  """(mean, standard error of the mean), SE None for a single value.

  A non-finite value (a diverged run) makes the mean NaN and the SE None.
  """
  if not all(math.isfinite(v) for v in values):
    return math.nan, None
  mean = statistics.fmean(values)
  if len(values) < 2:
    return mean, None
  return mean, statistics.stdev(values) / math.sqrt(len(values))


def _max_or_none(values) -> Optional[float]:
  values = [v for v in values if v is not None]
  return max(values) if values else None


def _joined(values) -> Optional[str]:
  """Distinct non-empty values, in order, joined by '/'; None if none."""
  distinct = list(dict.fromkeys(v for v in values if v))
  return '/'.join(str(v) for v in distinct) if distinct else None


def _number(value) -> str:
  return '-' if value is None else f'{value:.3f}'


def _metric_cell(row: dict) -> str:
  if row['metric_se'] is None:
    return f"{100 * row['metric_mean']:.2f} (1 seed)"
  return f"{100 * row['metric_mean']:.2f} ± {100 * row['metric_se']:.2f}"


def baselines(context: dict):
  """(label, metric) of the baselines present in `context`."""
  for key, name in (('frequent_tags', FREQUENT_TAGS_LABEL),
                    ('initial_metric', INITIAL_MODEL_LABEL)):
    if context.get(key) is not None:
      yield name, context[key]


NO_NOISE_SUFFIX = '_no_noise'  # registry.NO_NOISE_SUFFIX


def display_name(aggregator: str) -> str:
  """'dp_rec_no_noise' -> 'dp_rec (no noise)'; other names unchanged."""
  if aggregator.endswith(NO_NOISE_SUFFIX):
    return aggregator[:-len(NO_NOISE_SUFFIX)] + ' (no noise)'
  return aggregator


def _difference_lines(rows: Sequence[dict], context: dict) -> list[str]:
  """One bullet per private aggregator: its lead over the baselines."""
  references = []
  if context.get('frequent_tags') is not None:
    references.append(('frequent tags', context['frequent_tags'], 0.0))
  if context.get('initial_metric') is not None:
    references.append(('initial model', context['initial_metric'], 0.0))
  reference = next((r for r in rows if r['aggregator'] == REFERENCE), None)
  if reference is not None:
    references.append(
        (REFERENCE, reference['metric_mean'], reference['metric_se']))
  by_name = {r['aggregator']: r for r in rows}
  lines = []
  for row in rows:
    if row['epsilon'] is None:
      continue
    parts = []
    control = by_name.get(row['aggregator'] + NO_NOISE_SUFFIX)
    own = [] if control is None else [(display_name(control['aggregator']),
                                       control['metric_mean'],
                                       control['metric_se'])]
    for name, mean, se in references + own:
      if name == row['aggregator']:
        continue
      diff = 100 * (row['metric_mean'] - mean)
      if se is None or row['metric_se'] is None:
        parts.append(f'{diff:+.2f} vs {name} (no SE: 1 seed)')
      else:
        parts.append(f'{diff:+.2f} ± '
                     f"{100 * math.hypot(row['metric_se'], se):.2f} "
                     f'vs {name}')
    if parts:
      lines.append(f"- {row['aggregator']}: " + '; '.join(parts))
  return lines


def _series(seed_curves: Sequence[list], y_fn: Callable,
            x_fn: Optional[Callable] = None) -> list[tuple]:
  """(x, mean y, SE of y) over seeds, per round that all seeds evaluated.

  Rounds where any seed's y (or x) is None are left out. x is the round, or
  the mean over seeds of x_fn(point).
  """
  if not seed_curves:
    return []
  by_round = [{p['round']: p for p in points} for points in seed_curves]
  shared = sorted(set.intersection(*(set(b) for b in by_round)))
  series = []
  for round_num in shared:
    points = [b[round_num] for b in by_round]
    ys = [y_fn(p) for p in points]
    xs = [round_num] * len(points) if x_fn is None else [
        x_fn(p) for p in points]
    if None in ys or None in xs:
      continue
    mean, se = mean_se(ys)
    series.append((statistics.fmean(xs), mean, se or 0.0))
  return series


def _draw_line(ax, name: str, seed_curves: Sequence[list],
               x_fn: Optional[Callable], y_fn: Callable, style: int,
               dash: int) -> None:
  """Draws one aggregator's mean over seeds and its +-1 SE band, if any."""
  series = _series(seed_curves, y_fn, x_fn)
  if not series:
    return
  x, y, se = (list(v) for v in zip(*series))
  n = len(seed_curves)
  # Lines after the first in a stack of equal ones get hollow, larger markers
  # around the filled ones below.
  ax.plot(x, y, color=f'C{style % 10}', marker=_MARKERS[style % len(_MARKERS)],
          markersize=3 + 2 * dash, markerfacecolor='none' if dash else None,
          markevery=max(1, len(x) // _MAX_MARKERS),
          linestyle=_LINESTYLES[dash % len(_LINESTYLES)], linewidth=1.4,
          label=f"{display_name(name)} ({n} seed{'' if n == 1 else 's'})")
  if n > 1:
    ax.fill_between(x, [m - s for m, s in zip(y, se)],
                    [m + s for m, s in zip(y, se)], color=f'C{style % 10}',
                    alpha=0.2, linewidth=0)


def _metric(point: dict) -> Optional[float]:
  return None if point.get('metric') is None else 100 * point['metric']


def _communication_gb(point: dict) -> Optional[float]:
  total = (point['upload_bits'] + point['download_bits']) / GIGABYTE_BITS
  return total if total > 0 else None  # Round 0 cannot go on a log axis.


def _epsilon(point: dict) -> Optional[float]:
  return point.get('epsilon')


def progress_bar(run_, progress):
  """A run's tqdm bar (None with `progress=False`)."""
  if not run_.config.progress:
    return None
  from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top
  return tqdm.tqdm(desc=f'{run_.task.name}/{run_.name}', leave=True,
                   initial=progress.completed, total=run_.config.rounds)


def update_bar(bar, run_, progress, row):
  """Advances a run's bar by a round, with its loss, metric and epsilon."""
  if bar is None:
    return
  postfix = {}
  if not math.isnan(row['train_loss']):
    postfix['loss'] = f"{row['train_loss']:.4f}"
  if progress.last_metric is not None:
    postfix[run_.task.metric_label] = f'{progress.last_metric:.4f}'
  if progress.epsilon is not None:
    postfix['eps'] = f'{progress.epsilon:.3f}'
  postfix['up_bits'] = row['upload_bits']
  bar.set_postfix(postfix)
  bar.update(1)
