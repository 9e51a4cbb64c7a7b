r"""Final metric against the privacy target: where each private method learns.

  python -m experiments.epsilon_sweep --task=stackoverflow_lr \
      --aggregators=dp_rec,dp_fedavg --epsilons=1,4,16,64 --num_seeds=3

Runs `experiments.run`'s training loop (`training.run`) once per target
epsilon, each in `<output_dir>/eps<epsilon>/` (so each resumes on its own),
with the task's defaults otherwise, and writes `<output_dir>/<task>/`:
`epsilon_sweep.csv` (aggregator, target epsilon, spent epsilon, seeds, mean,
standard error) and `metric_vs_target_epsilon.png` (mean +- standard error
against epsilon, log x, with the frequent-tags and initial-model lines).
"""

import csv
import math
import os
import sys

from absl import app
from absl import flags
# As in experiments.run: Keras models built after a TensorFlow import under
# `app.run` fail to build (empty inbound nodes).
import tensorflow as tf  # pylint: disable=unused-import

from experiments.runner import config as config_lib
from experiments.runner import report



def parse_epsilons(values) -> list[float]:
  """The --epsilons list as positive floats, or ValueError naming the value."""
  epsilons = []
  for text in values:
    try:
      value = float(text)
    except ValueError:
      raise ValueError(f'--epsilons: {text!r} is not a number.') from None
    if not (value > 0 and math.isfinite(value)):
      raise ValueError(f'--epsilons: {text!r} must be positive and finite.')
    epsilons.append(value)
  if not epsilons:
    raise ValueError('--epsilons is empty.')
  return sorted(set(epsilons))


def summarize(points) -> list[dict]:
  """Rows (aggregator, target, spent, seeds, mean, se) of (target, records)."""
  rows = []
  for target, records in points:
    for name, runs in report.group_by_aggregator(records).items():
      mean, se = report.mean_se([r['final_metric'] for r in runs])
      rows.append(dict(aggregator=name, target_epsilon=target,
                       epsilon=max(r['epsilon'] for r in runs),
                       seeds=len(runs), mean=mean, se=se))
  return rows


def write(output_dir: str, rows, context: dict, label: str) -> list[str]:
  """Writes epsilon_sweep.csv and metric_vs_target_epsilon.png."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  os.makedirs(output_dir, exist_ok=True)
  csv_path = os.path.join(output_dir, 'epsilon_sweep.csv')
  with open(csv_path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  fig, ax = plt.subplots(figsize=(5.5, 4))
  for name in dict.fromkeys(r['aggregator'] for r in rows):
    mine = sorted((r for r in rows if r['aggregator'] == name),
                  key=lambda r: r['target_epsilon'])
    ax.errorbar([r['target_epsilon'] for r in mine],
                [100 * r['mean'] for r in mine],
                yerr=[100 * (r['se'] or 0.0) for r in mine], marker='o',
                capsize=3, label=f"{name} ({mine[0]['seeds']} seeds)")
  if context.get('frequent_tags') is not None:
    ax.axhline(100 * context['frequent_tags'], color='black', ls='--',
               lw=1, label='frequent tags')
  if context.get('initial_metric') is not None:
    ax.axhline(100 * context['initial_metric'], color='grey', ls=':', lw=1,
               label='initial model')
  ax.set_xscale('log')
  ax.set_xlabel('target epsilon (log scale)')
  ax.set_ylabel(f'final {label} (%)')
  ax.set_title(f'{label} vs privacy target (mean ± SE)')
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  png_path = os.path.join(output_dir, 'metric_vs_target_epsilon.png')
  fig.savefig(png_path, dpi=120)
  plt.close(fig)
  return [csv_path, png_path]


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  try:
    epsilons = parse_epsilons(_EPSILONS.value)
    configs = [config_lib.RunConfig(
        task=_TASK.value, aggregators=tuple(_AGGREGATORS.value),
        data_dir=_DATA_DIR.value,
        output_dir=os.path.join(_OUTPUT_DIR.value, f'eps{eps:g}'),
        target_epsilon=eps, num_seeds=_NUM_SEEDS.value, progress=False)
               for eps in epsilons]
  except (TypeError, ValueError) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(2)
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  points, context, label = [], {}, 'metric'
  for config in configs:
    captured = {}
    records = training.run(config, print_fn=print, context_out=captured)
    context, label = captured, records[0]['metric_label']
    points.append((config.target_epsilon, records))
  rows = summarize(points)
  paths = write(os.path.join(_OUTPUT_DIR.value, _TASK.value), rows, context,
                label)
  for r in rows:
    se = '' if r['se'] is None else f" ± {100 * r['se']:.2f}"
    print(f"{r['aggregator']:>10} epsilon {r['target_epsilon']:g}: "
          f"{100 * r['mean']:.2f}{se}")
  print('Wrote ' + ', '.join(paths))


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _TASK, _AGGREGATORS, _EPSILONS, _NUM_SEEDS
  global _DATA_DIR, _OUTPUT_DIR
  _TASK = flags.DEFINE_enum('task', 'stackoverflow_lr', config_lib.TASKS,
                            'Task.')
  _AGGREGATORS = flags.DEFINE_list('aggregators', ['dp_rec', 'dp_fedavg'],
                                   'Private aggregators to sweep.')
  _EPSILONS = flags.DEFINE_list('epsilons', ['1', '4', '16', '64'],
                                'Target epsilons.')
  _NUM_SEEDS = flags.DEFINE_integer('num_seeds', 3, 'Seeds per point.')
  _DATA_DIR = flags.DEFINE_string('data_dir', 'data_cache', 'Data directory.')
  _OUTPUT_DIR = flags.DEFINE_string('output_dir', 'output/epsilon_sweep',
                                    'Where runs and the results go.')


def cli():
  """The command line: `python -m experiments.epsilon_sweep`."""
  _define_flags()
  app.run(main)


if __name__ == '__main__':
  cli()
