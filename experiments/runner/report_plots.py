"""A task's figures: metric against round and communication, epsilon
against round; mean over seeds with a +-1 SE band (`stats.mean_curve`)."""

import os
from typing import Callable, Optional, Sequence

from experiments.infra import atomic_files
from experiments.runner import report
from experiments.runner import stats

_FIGSIZE = (5.5, 4)
_DPI = 120
# Each aggregator keeps its colour and marker in all plots, so that lines stay
# apart in greyscale; at most this many markers per line.
_MARKERS = ('o', 's', '^', 'D', 'v', 'P', 'X', '*')
_MAX_MARKERS = 30
# Private aggregators calibrated to one target epsilon draw the same epsilon
# curve: line styles let the lower ones show through.
_LINESTYLES = ('-', '--', '-.', ':')


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
  references = list(report.baselines(context or {}))
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
    # Plain labels ('3', '10', '1e-05'): over about a decade matplotlib's
    # default labels the minor ticks as '3x10^0', and they overlap.
    from matplotlib import ticker  # pylint: disable=g-import-not-at-top
    ax.xaxis.set_major_formatter(ticker.LogFormatter())
    ax.xaxis.set_minor_formatter(ticker.LogFormatter(minor_thresholds=(1, 0.4)))
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=10)
  ax.grid(True, alpha=0.3, which='both' if x_fn else 'major')
  if ax.get_legend_handles_labels()[0]:
    ax.legend(fontsize=8)
  else:
    ax.text(0.5, 0.5, empty_text, ha='center', va='center',
            transform=ax.transAxes)


def _draw_line(ax, name: str, seed_curves: Sequence[list],
               x_fn: Optional[Callable], y_fn: Callable, style: int,
               dash: int) -> None:
  """Draws one aggregator's mean over seeds and its +-1 SE band, if any."""
  series = stats.mean_curve(seed_curves, y_fn, x_fn)
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
          label=(f'{report.display_name(name)} '
                 f"({n} seed{'' if n == 1 else 's'})"))
  if n > 1:
    ax.fill_between(x, [m - s for m, s in zip(y, se)],
                    [m + s for m, s in zip(y, se)], color=f'C{style % 10}',
                    alpha=0.2, linewidth=0)


def _metric(point: dict) -> Optional[float]:
  return None if point.get('metric') is None else 100 * point['metric']


def _communication_gb(point: dict) -> Optional[float]:
  total = (point['upload_bits'] + point['download_bits']) / report.GIGABYTE_BITS
  return total if total > 0 else None  # Round 0 cannot go on a log axis.


def _epsilon(point: dict) -> Optional[float]:
  return point.get('epsilon')
