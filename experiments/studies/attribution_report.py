"""The attribution study's report: its table, the gaps beside the paper's,
the attribution of the 300-round gap, the neighbour checks, the CSV and
the curves."""

import math
import os
from typing import Optional

from experiments.runner import stats
from experiments.studies import attribution_rows as rows_lib
from experiments.studies import paper


def last_rounds_mean(record, rounds=rows_lib.LAST_ROUNDS) -> float:
  """The mean of a run's evaluations after its last `rounds` rounds began."""
  curve = record['curve']
  end = max(p['round'] for p in curve)
  points = [p['metric'] for p in curve if p['round'] > end - rounds]
  return sum(points) / len(points)


def summarize(rows, records_by_row) -> list[dict]:
  """One line per row that has finished runs."""
  lines = []
  for row in rows:
    runs = sorted(records_by_row.get(row.key, []), key=lambda r: r['seed'])
    if not runs:
      continue
    finals = [r['final_metric'] for r in runs]
    mean, se = stats.mean_se(finals)
    last_mean, last_se = stats.mean_se([last_rounds_mean(r) for r in runs])
    params = runs[0].get('params', {})
    spent = [r['epsilon'] for r in runs if r.get('epsilon') is not None]
    lines.append(dict(
        key=row.key, label=row.label, kind=row.kind, block=row.block,
        aggregator=row.aggregator, meant_epsilon=row.epsilon,
        accountant=row.accountant,
        spent_epsilon=max(spent) if spent else None,
        seeds=len(runs), mean=mean, se=se, per_seed=finals,
        last_mean=last_mean, last_se=last_se,
        lost_rounds=sum(r.get('lost_rounds', 0) for r in runs),
        relative_noise=stats.relative_noise(
            params, runs[0]['clients_per_round']),
        clip=params.get('l2_clip'), clip_ratio=params.get('clip_ratio'),
        noise_multiplier=params.get('noise_multiplier'),
        bits=params.get('bits'),
        upload_gb=sum(r['upload_gb'] for r in runs) / len(runs),
        seconds_per_round=sum(r['seconds_per_round'] for r in runs) /
        len(runs),
        paper=_paper_metric(row)))
  return lines


def _paper_metric(row):
  if row.kind not in ('paper', 'proven'):
    return None
  return paper.metric_of('mnist', row.aggregator, row.epsilon)


def difference(a: dict, b: dict) -> dict:
  """a - b in accuracy, with the SE of two independent means."""
  se = None
  if a['se'] is not None and b['se'] is not None:
    se = math.hypot(a['se'], b['se'])
  return dict(gap=a['mean'] - b['mean'], se=se,
              last_gap=a['last_mean'] - b['last_mean'])


# (name, minuend row key, subtrahend row key, the paper's gap or None) at
# each epsilon.
def comparisons(eps) -> list[tuple]:
  tag = f'eps{eps:g}'
  paper_gap = (rows_lib.paper_value('metric', paper.DP_REC, eps)
               - rows_lib.paper_value('metric', paper.DP_FEDAVG, eps))
  return [
      ("DP-REC - DP-FedAvg, the paper's parameters",
       f'paper_dp_rec_{tag}', f'paper_dp_fedavg_{tag}', paper_gap),
      ('DP-REC - DP-FedAvg, proven and tight', f'dp_rec_{tag}',
       f'dp_fedavg_{tag}', paper_gap),
      ("DP-REC - its exact-sample control, the paper's c (REC's cost under "
       'noise)', f'paper_dp_rec_{tag}', f'exact_paper_{tag}', None),
      ('DP-REC - its exact-sample control, the proven c (REC\'s cost under '
       'noise)', f'dp_rec_{tag}', f'exact_sound_{tag}', None),
      ('DDGauss16 - DP-FedAvg (RDP): the mechanism and its subsampling '
       'bound', f'ddgauss16_{tag}', f'dp_fedavg_rdp_{tag}', None),
      ('DP-FedAvg (RDP) - DP-FedAvg (PLD): the accountant',
       f'dp_fedavg_rdp_{tag}', f'dp_fedavg_{tag}', None)]


def gaps(table) -> list[dict]:
  by = {l['key']: l for l in table}
  out = []
  for eps in (3.0, 6.0):
    for name, a, b, paper_gap in comparisons(eps):
      if a in by and b in by:
        out.append(dict(name=name, epsilon=eps, paper_gap=paper_gap,
                        **difference(by[a], by[b])))
  return out


def reference_gap(reference_dir) -> Optional[dict]:
  """The 300-round study's proven DP-REC - DP-FedAvg at epsilon 3, from its
  records under `reference_dir` (None where they are not there)."""
  import glob  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  lines = {}
  for name in ('dp_rec', 'dp_fedavg'):
    pattern = os.path.join(reference_dir, 'rows', name, 'eps3', rows_lib.TASK,
                           name, 'seed*', 'record.json')
    records = []
    for path in sorted(glob.glob(pattern)):
      with open(path) as f:
        saved = json.load(f)
      records.append(dict(saved['record'], curve=saved['curve']))
    if not records:
      return None
    mean, se = stats.mean_se([r['final_metric'] for r in records])
    last, _ = stats.mean_se([last_rounds_mean(r) for r in records])
    lines[name] = dict(mean=mean, se=se, last_mean=last)
  return difference(lines['dp_rec'], lines['dp_fedavg'])


def attribution(table, reference) -> list[str]:
  """The 300-round gap at epsilon 3 split into run length, accounting and
  what is left against the paper's gap; REC's own cost beside it."""
  by = {g['name']: g for g in gaps(table) if g['epsilon'] == 3.0}
  names = [c[0] for c in comparisons(3.0)]
  paper_gap, proven, rec_paper, rec_proven = (
      by.get(names[0]), by.get(names[1]), by.get(names[2]), by.get(names[3]))
  lines = []
  fmt = lambda g: _points(g['gap'], g['se'])
  if reference is not None:
    lines.append(f'* 300 rounds, proven and tight: {fmt(reference)}.')
  if reference is not None and proven is not None:
    lines.append(
        '* Run length (1,000 rounds against 300, both proven): '
        f"{100 * (proven['gap'] - reference['gap']):+.2f} points "
        f"(to {fmt(proven)}).")
  if proven is not None and paper_gap is not None:
    lines.append(
        "* Accounting (the paper's parameters against proven, tight ones, "
        f"1,000 rounds): {100 * (paper_gap['gap'] - proven['gap']):+.2f} "
        f"points (to {fmt(paper_gap)}).")
  if paper_gap is not None:
    lines.append(
        "* Left against the paper's MNIST gap "
        f"({paper_gap['paper_gap']:+.1f}): "
        f"{100 * paper_gap['gap'] - paper_gap['paper_gap']:+.2f} points "
        '(data: Fashion-MNIST, not MNIST; seeds; the rest).')
  for g, c in ((rec_paper, "the paper's c"), (rec_proven, 'the proven c')):
    if g is not None:
      lines.append(f'* REC against exact samples at {c}: {fmt(g)} (the '
                   'part that would be a defect of the coding).')
  return lines


def _points(value, se):
  return f'{100 * value:+.2f}' + ('' if se is None else f' ± {100 * se:.2f}')


def _seeds(n):
  return f'{n} seed' + ('' if n == 1 else 's')


def _eps(value):
  return '-' if value is None else f'{value:.3f}'


def markdown(table, neighbours, reference, pending) -> str:
  """The table, the gaps, the attribution, the neighbour checks."""
  lines = [
      '| row | epsilon meant | accountant | epsilon spent | accuracy (%) | '
      'per seed | last 100 rounds (%) | relative noise | clip | bits | '
      "paper's MNIST (%) | s/round |",
      '|---|---|---|---|---|---|---|---|---|---|---|---|']
  for l in table:
    meant = '-' if l['meant_epsilon'] is None else f"{l['meant_epsilon']:g}"
    if l['kind'] == 'paper':
      meant += " (the paper's claim)"
    noise = ('-' if l['relative_noise'] is None else
             f"{l['relative_noise']:.3g}")
    lost = (f", {l['lost_rounds']} round{'s' * (l['lost_rounds'] != 1)} lost"
            if l['lost_rounds'] else '')
    lines.append(
        f"| {l['label']} | {meant} | {l['accountant']} | "
        f"{_eps(l['spent_epsilon'])} | {_points(l['mean'], l['se'])[1:]} "
        f"({_seeds(l['seeds'])}{lost}) | "
        + ', '.join(f'{100 * v:.2f}' for v in l['per_seed']) + ' | '
        f"{_points(l['last_mean'], l['last_se'])[1:]} | {noise} | "
        f"{'-' if l['clip'] is None else format(l['clip'], '.4g')} | "
        f"{l['bits'] or '-'} | "
        f"{'-' if l['paper'] is None else format(l['paper'], '.1f')} | "
        f"{l['seconds_per_round']:.2f} |")
  lines += ['', '| difference | epsilon | final (points) | last 100 rounds '
            "(points) | paper, MNIST (points) |", '|---|---|---|---|---|']
  for g in gaps(table):
    paper_gap = '-' if g['paper_gap'] is None else f"{g['paper_gap']:+.1f}"
    lines.append(f"| {g['name']} | {g['epsilon']:g} | "
                 f"{_points(g['gap'], g['se'])} | "
                 f"{100 * g['last_gap']:+.2f} | {paper_gap} |")
  lines += ['', 'Attribution of the 300-round gap at epsilon 3:', '']
  lines += attribution(table, reference) or ['* (rows not trained yet)']
  lines += ['', _neighbour_note(neighbours)]
  if pending:
    lines += ['', 'Not finished yet (rerun the command to train them): ' +
              '; '.join(pending) + '.']
  return '\n'.join(lines) + '\n'


def _neighbour_note(neighbours) -> str:
  parts = [f'{name} ' + (', '.join(f'{k}: {100 * v:.2f}' for k, v in
                                   scores.items()) or 'not trained yet') +
           _verdict(name, scores) for name, scores in neighbours.items()]
  return ('Free parameters: the 300-round study\'s validation choices '
          f'(DP-FedAvg clip {rows_lib.CHOSEN_CLIP}, '
          f'DP-REC sigma {rows_lib.CHOSEN_SIGMA}), '
          'checked at 1,000 rounds on the validation split against their '
          'grid neighbours, one seed each: ' + '; '.join(parts) + '.')


def _verdict(name, scores) -> str:
  """A finished grid's best setting, its margin, and whether on an edge."""
  field, values = rows_lib.NEIGHBOURS[name]
  if len(scores) < len(values):
    return ''
  chosen_value = (rows_lib.CHOSEN_CLIP if name == 'dp_fedavg'
                  else rows_lib.CHOSEN_SIGMA)
  chosen = f'{field}={chosen_value}'
  best = max(scores, key=scores.get)
  where = ("on the grid's edge" if best in {f'{field}={v}' for v in (
      min(values), max(values))} else 'inside the grid')
  if best != chosen:
    return f' (best: {best}, {where}; the rows keep the 300-round choice)'
  margin = scores[best] - max(v for k, v in scores.items() if k != best)
  return f' (the choice is best, by {100 * margin:.2f} points, {where})'


def write(output_dir, table, records_by_row, neighbours, reference,
          pending) -> list[str]:
  """attribution.md, .csv and _curves.png, each whole or not at all."""
  from experiments.infra import atomic_files  # pylint: disable=g-import-not-at-top
  os.makedirs(output_dir, exist_ok=True)
  md = atomic_files.write_text(
      os.path.join(output_dir, 'attribution.md'),
      markdown(table, neighbours, reference, pending))
  path = atomic_files.write_csv(
      os.path.join(output_dir, 'attribution.csv'),
      [dict(l, per_seed=' '.join(f'{v:.4f}' for v in l['per_seed']))
       for l in table])
  png = os.path.join(output_dir, 'attribution_curves.png')
  with atomic_files.replacing_path(png, suffix='.png') as tmp:
    plot_curves(tmp, table, records_by_row)
  return [md, path, png]


_STYLE = {'paper': '-', 'proven': '-', 'reference': '-.', 'control': ':',
          'nonprivate': '--'}


def plot_curves(path, table, records_by_row) -> None:
  """Test accuracy against round, mean over seeds +- SE, one panel per
  epsilon (FedAvg beside the private rows of each; a row keeps its colour
  in both)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(14, 6.4), sharex=True,
                           sharey=True)
  colors = plt.get_cmap('tab10')
  color = {l['key']: colors(i % 10) for i, l in enumerate(table)}
  for ax, eps in zip(axes, (3.0, 6.0)):
    shown = [l for l in table if l['meant_epsilon'] == eps]
    # FedAvg, the ceiling, beside a panel's private rows (not alone).
    shown += [l for l in table if shown and l['meant_epsilon'] is None]
    for l in shown:
      series = stats.mean_curve([r['curve'] for r in records_by_row[l['key']]],
                                lambda p: p['metric'])
      rounds = [x for x, _, _ in series]
      mean = [m for _, m, _ in series]
      se = [s for _, _, s in series]
      low = [100 * (m - s) for m, s in zip(mean, se)]
      high = [100 * (m + s) for m, s in zip(mean, se)]
      ax.plot(rounds, [100 * m for m in mean], _STYLE[l['kind']],
              color=color[l['key']], lw=1.4,
              label=f"{l['label']} ({_seeds(l['seeds'])})")
      ax.fill_between(rounds, low, high, color=color[l['key']], alpha=0.15,
                      lw=0)
    ax.set_title(f'epsilon {eps:g} (FedAvg: no privacy)', fontsize=10)
    ax.set_xlabel('round')
    ax.grid(alpha=0.3)
    if shown:
      ax.legend(fontsize=7, loc='upper center', bbox_to_anchor=(0.5, -0.12),
                ncol=2, frameon=False)
    else:
      ax.text(0.5, 0.5, 'no runs finished yet', ha='center',
              transform=ax.transAxes, color='grey')
  axes[0].set_ylabel('test accuracy (%), mean over seeds ± SE')
  fig.suptitle("Fashion-MNIST, the paper's MNIST protocol at its 1,000 "
               'rounds (B = 10, LeNet-5)', fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
