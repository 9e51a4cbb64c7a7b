"""Summary files, a Markdown table like the paper's Table 1, and plots."""

import json
import os
from typing import Sequence

GIGABYTE_BITS = 8e9


def write_summary(output_dir: str, records: Sequence[dict]) -> str:
  path = os.path.join(output_dir, 'summary.json')
  with open(path + '.tmp', 'w') as f:
    json.dump(list(records), f, indent=1)
  os.replace(path + '.tmp', path)
  return path


def markdown_table(records: Sequence[dict]) -> str:
  """One row per aggregator: metric, epsilon, communication (GB), time."""
  if not records:
    return '(no results)\n'
  first = records[0]
  label = first.get('metric_label', 'metric')
  lines = [
      f"**{first['task']}** ({first['data_source']} data), "
      f"delta = {first['delta']:.3g}",
      '',
      f'| aggregator | {label} (%) | epsilon | local eps | accounting | '
      'rounds | downlink | upload GB | download GB | total GB | s/round |',
      '|---|---|---|---|---|---|---|---|---|---|---|',
  ]
  for r in records:
    eps = '-' if r['epsilon'] is None else f"{r['epsilon']:.3f}"
    lines.append(
        f"| {r['aggregator']} | {100 * r['final_metric']:.2f} | {eps} | "
        f"{_local(r)} | {r.get('accounting') or '-'} | {r['rounds']} | {r.get('downlink', 'full')} | "
        f"{r['upload_bits_total'] / GIGABYTE_BITS:.4g} | "
        f"{r['download_bits_total'] / GIGABYTE_BITS:.4g} | "
        f"{(r['upload_bits_total'] + r['download_bits_total']) / GIGABYTE_BITS:.4g}"
        f" | {r['seconds_per_round']:.2f} |")
  lines.append('')
  lines.append('epsilon: against observers who do not know who was sampled '
               '(amplified). local eps: one participation against the '
               'server (DP-REC; docs/PRIVACY.md).')
  ratios = communication_ratios(records)
  if ratios:
    lines.append('')
    lines.append('Total communication per client-round, relative to '
                 'dp_fedavg: ' + ', '.join(
                     f'{name} {ratio:.3g}x less' for name, ratio in ratios))
  return '\n'.join(lines) + '\n'


def _local(record) -> str:
  local = record.get('local_epsilon_per_participation')
  return '-' if local is None else f'{local:.3f}'


def communication_ratios(records: Sequence[dict],
                         reference: str = 'dp_fedavg') -> list:
  """(aggregator, ratio) of the reference's total bits per client-round to
  each other aggregator's; empty without the reference."""
  per_client = {}
  for r in records:
    slots = r['rounds'] * r['clients_per_round']
    if slots:
      per_client[r['aggregator']] = (
          (r['upload_bits_total'] + r['download_bits_total']) / slots)
  if reference not in per_client:
    return []
  return [(name, per_client[reference] / bits)
          for name, bits in per_client.items()
          if name != reference and bits > 0]


def write_table(output_dir: str, records: Sequence[dict]) -> str:
  path = os.path.join(output_dir, 'table.md')
  with open(path, 'w') as f:
    f.write(markdown_table(records))
  return path


def write_plots(output_dir: str, records: Sequence[dict],
                curves: dict) -> list[str]:
  """Final metric vs total communication (log x); metric vs epsilon."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  if not records:
    return []
  label = records[0].get('metric_label', 'metric')
  paths = []
  fig, ax = plt.subplots(figsize=(5, 3.6))
  for r in records:
    total = (r['upload_bits_total'] + r['download_bits_total']) / GIGABYTE_BITS
    ax.scatter([total], [100 * r['final_metric']], label=r['aggregator'])
  ax.set_xscale('log')
  ax.set_xlabel('total communication (GB, log scale)')
  ax.set_ylabel(f'{label} (%)')
  ax.set_title(f"{records[0]['task']}: {label} vs communication")
  ax.legend(fontsize=8)
  fig.tight_layout()
  path = os.path.join(output_dir, 'metric_vs_communication.png')
  fig.savefig(path, dpi=120)
  plt.close(fig)
  paths.append(path)

  fig, ax = plt.subplots(figsize=(5, 3.6))
  plotted = False
  for name, points in curves.items():
    points = [(e, m) for e, m in points if e is not None and m is not None]
    if points:
      eps, metric = zip(*points)
      ax.plot(eps, [100 * m for m in metric], marker='o', markersize=3,
              label=name)
      plotted = True
  ax.set_xlabel('epsilon spent')
  ax.set_ylabel(f'{label} (%)')
  ax.set_title(f"{records[0]['task']}: {label} vs epsilon")
  if plotted:
    ax.legend(fontsize=8)
  else:
    ax.text(0.5, 0.5, 'no private aggregator evaluated', ha='center',
            transform=ax.transAxes)
  fig.tight_layout()
  path = os.path.join(output_dir, 'metric_vs_epsilon.png')
  fig.savefig(path, dpi=120)
  plt.close(fig)
  paths.append(path)
  return paths
