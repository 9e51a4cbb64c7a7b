"""Summary files and a Markdown table like the paper's Table 1.

Every aggregator may have been run with several seeds. `records` holds one
dict per (aggregator, seed) run; `curves` maps each aggregator to one list of
evaluation points per seed (see `write_curves`). Tables report the mean over
seeds with its standard error (`stats.mean_se`); `report_plots` draws the
figures.
"""

import csv
import math
import os
import statistics
from typing import Optional, Sequence

from experiments.infra import atomic_files
from experiments.runner import registry
from experiments.runner import stats

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
    mean, se = stats.mean_se([r['final_metric'] for r in runs])
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


def parameter_text(params: dict, detail: bool = False) -> str:
  """A run's privacy parameter: 'c 1.703, 5 bits', 'z 0.463', 'clip 0.2' (a
  control), or '' (non-private). `detail` adds sigma and the clip
  ('c 1.703, sigma 0.006, clip 0.0102'; 'z 0.463, clip 0.2') instead of
  the bits."""
  if params.get('control_of'):
    return f"clip {params['l2_clip']:.4g}"
  if params.get('clip_ratio') is not None:
    if detail:
      return (f"c {params['clip_ratio']:.3f}, sigma "
              f"{params['noise_stddev']:.4g}, clip {params['l2_clip']:.3g}")
    return f"c {params['clip_ratio']:.3f}, {params['bits']} bits"
  if params.get('noise_multiplier') is not None:
    if detail:
      return (f"z {params['noise_multiplier']:.3f}, clip "
              f"{params['l2_clip']:.3g}")
    return f"z {params['noise_multiplier']:.3f}"
  return ''


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
