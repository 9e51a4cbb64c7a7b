r"""Utility against communication: can cheap messages buy back DP-REC's noise?

  python -m experiments.frontier --task=stackoverflow_lr --num_seeds=3

At one privacy target (epsilon 1) and the same number of rounds T, runs
DP-REC with B in `--dp_rec_clients` (40, 160, 640) clients per round, and
DP-FedAvg and DDGauss16 with `--baseline_clients` (40), each calibrated to
the target at its own B (DP-REC's prior sigma scaled as sqrt(B / 40):
`noise_stddev_for`), through `experiments.run`'s training loop
(`training.run`; each B in `<output_dir>/B<B>/`, so each resumes on its
own). DP-REC's messages are 100-1000x smaller than a model, so it can
afford more clients per round at the same traffic; more clients average
away more of its per-client noise, but raise the sampling rate, which lowers
its calibrated clip ratio. This measures which wins.

Writes `<output_dir>/<task>/`: `frontier.csv` and `frontier.md` (method, B,
epsilon, seeds, final metric mean and standard error, upload, download and
total GB per run) and `frontier.png` (final metric, mean +- standard error,
against total GB per run, log x, with the frequent-tags and initial-model
lines).
"""

import csv
import os
import time

from absl import app
from absl import flags
# As in experiments.run: Keras models built after a TensorFlow import under
# `app.run` fail to build (empty inbound nodes).
import tensorflow as tf  # pylint: disable=unused-import

from experiments.data import tasks
from experiments.runner import cli as cli_lib
from experiments.runner import config as config_lib
from experiments.runner import report


def parse_sizes(values, flag: str) -> list[int]:
  """A list of clients per round as positive ints (ValueError names it)."""
  sizes = []
  for text in values:
    try:
      value = int(text)
    except ValueError:
      raise ValueError(f'--{flag}: {text!r} is not an int.') from None
    if value < 1:
      raise ValueError(f'--{flag}: {text!r} must be at least 1.')
    sizes.append(value)
  if not sizes:
    raise ValueError(f'--{flag} is empty.')
  return sorted(set(sizes))


def plan_runs(dp_rec_clients, baseline_clients, baselines) -> dict:
  """{B: aggregators trained at B}: DP-REC at each of its sizes, baselines
  at theirs."""
  runs = {}
  for b in dp_rec_clients:
    runs.setdefault(b, []).append('dp_rec')
  for b in baseline_clients:
    runs.setdefault(b, []).extend(a for a in baselines
                                  if a not in runs.get(b, []))
  return dict(sorted(runs.items()))


def noise_stddev_for(clients: int, reference_clients: int,
                     noise_stddev: float) -> float:
  """DP-REC's prior sigma at `clients` per round, from the tuned one.

  sigma sqrt(reference / clients): the noise of the averaged update
  (sigma / sqrt(B) per coordinate) stays at the level tuned at the
  reference B, and the clip c sigma, the signal, grows as sqrt(B /
  reference). With sigma unchanged the step c sigma times the rate stays the
  small one tuned against B = 40's noise, and more clients would only
  average noise that no longer limits (the main job's no-noise control
  learns no more at that step).
  """
  return noise_stddev * (clients / reference_clients)**0.5


def summarize(points) -> list[dict]:
  """Rows of (clients_per_round, records) pairs, one per (method, B)."""
  rows = []
  for clients, records in points:
    for name, runs in report.group_by_aggregator(records).items():
      mean, se = report.mean_se([r['final_metric'] for r in runs])
      upload = sum(r['upload_gb'] for r in runs) / len(runs)
      download = sum(r['download_gb'] for r in runs) / len(runs)
      rows.append(dict(
          aggregator=name, clients_per_round=clients,
          rounds=max(r['rounds'] for r in runs),
          epsilon=max(r['epsilon'] or 0.0 for r in runs),
          seeds=len(runs), mean=mean, se=se, upload_gb=upload,
          download_gb=download, total_gb=upload + download,
          seconds_per_round=sum(r['seconds_per_round'] for r in runs) /
          len(runs)))
  return rows


def markdown(rows, context: dict, label: str) -> str:
  lines = [f'| method | B | rounds | epsilon | {label} (%) | upload GB | '
           'download GB | total GB | s/round |',
           '|---|---|---|---|---|---|---|---|---|']
  for r in rows:
    se = '' if r['se'] is None else f" ± {100 * r['se']:.2f}"
    lines.append(
        f"| {r['aggregator']} | {r['clients_per_round']} | {r['rounds']} | "
        f"{r['epsilon']:.3f} | {100 * r['mean']:.2f}{se} ({r['seeds']} "
        f"seeds) | {r['upload_gb']:.4g} | {r['download_gb']:.4g} | "
        f"{r['total_gb']:.4g} | {r['seconds_per_round']:.2f} |")
  for key, name in (('frequent_tags', report.FREQUENT_TAGS_LABEL),
                    ('initial_metric', report.INITIAL_MODEL_LABEL)):
    if context.get(key) is not None:
      lines.append(f'| {name} | - | - | - | {100 * context[key]:.2f} | - | '
                   '- | - | - |')
  return '\n'.join(lines) + '\n'


def write(output_dir: str, rows, context: dict, label: str) -> list[str]:
  """Writes frontier.csv, frontier.md and frontier.png."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  os.makedirs(output_dir, exist_ok=True)
  csv_path = os.path.join(output_dir, 'frontier.csv')
  with open(csv_path, 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  md_path = os.path.join(output_dir, 'frontier.md')
  with open(md_path, 'w') as f:
    f.write(markdown(rows, context, label))
  fig, ax = plt.subplots(figsize=(6, 4.2))
  for name in dict.fromkeys(r['aggregator'] for r in rows):
    mine = sorted((r for r in rows if r['aggregator'] == name),
                  key=lambda r: r['total_gb'])
    ax.errorbar([r['total_gb'] for r in mine],
                [100 * r['mean'] for r in mine],
                yerr=[100 * (r['se'] or 0.0) for r in mine], marker='o',
                capsize=3, label=f"{name} ({mine[0]['seeds']} seeds)")
    for r in mine:
      ax.annotate(f"B={r['clients_per_round']}",
                  (r['total_gb'], 100 * r['mean']),
                  textcoords='offset points', xytext=(4, 4), fontsize=7)
  if context.get('frequent_tags') is not None:
    ax.axhline(100 * context['frequent_tags'], color='black', ls='--',
               lw=1, label='frequent tags')
  if context.get('initial_metric') is not None:
    ax.axhline(100 * context['initial_metric'], color='grey', ls=':', lw=1,
               label='initial model')
  ax.set_xscale('log')
  ax.set_xlabel('total communication per run, GB (upload + download, log)')
  ax.set_ylabel(f'final {label} (%)')
  epsilon = max(r['epsilon'] for r in rows)
  ax.set_title(f'{label} vs communication at epsilon {epsilon:.2g} '
               '(mean ± SE)', fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  png_path = os.path.join(output_dir, 'frontier.png')
  fig.savefig(png_path, dpi=120)
  plt.close(fig)
  return [csv_path, md_path, png_path]


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  start = time.time()
  cli_lib.quiet_logs()
  try:
    baseline_clients = parse_sizes(_BASELINE_CLIENTS.value,
                                   'baseline_clients')
    runs = plan_runs(parse_sizes(_DP_REC_CLIENTS.value, 'dp_rec_clients'),
                     baseline_clients, tuple(_BASELINES.value))
    reference = min(baseline_clients)
    sigma = tasks.defaults(_STUDY.task.value).noise_stddev
    configs = []
    for clients, aggregators in runs.items():
      scaled = {}
      if _SCALE_NOISE_STDDEV.value and clients != reference:
        scaled['noise_stddev'] = noise_stddev_for(clients, reference, sigma)
      configs.append(config_lib.RunConfig(
          task=_STUDY.task.value, aggregators=tuple(aggregators),
          data_dir=_STUDY.data_dir.value,
          output_dir=os.path.join(_STUDY.output_dir.value, f'B{clients}'),
          clients_per_round=clients, rounds=_ROUNDS.value,
          target_epsilon=_TARGET_EPSILON.value, num_seeds=_NUM_SEEDS.value,
          progress=False,
          population=_STUDY.population_value(),
          **scaled))
  except (TypeError, ValueError) as e:
    cli_lib.fail(e)
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  points, context, label = [], {}, 'metric'
  for config in configs:
    captured = {}
    records = training.run(config, print_fn=print, context_out=captured)
    context, label = captured, records[0]['metric_label']
    points.append((config.clients_per_round, records))
  rows = summarize(points)
  paths = write(os.path.join(_STUDY.output_dir.value, _STUDY.task.value),
                rows, context, label)
  print(markdown(rows, context, label))
  print('Wrote ' + ', '.join(paths) +
        f'; wall time {time.time() - start:.0f} s.')


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _STUDY, _DP_REC_CLIENTS, _BASELINE_CLIENTS, _BASELINES, _ROUNDS
  global _TARGET_EPSILON, _NUM_SEEDS, _SCALE_NOISE_STDDEV
  _STUDY = cli_lib.define_study_flags('output/frontier')
  _DP_REC_CLIENTS = flags.DEFINE_list(
      'dp_rec_clients', ['40', '160', '640'], 'DP-REC clients per round.')
  _BASELINE_CLIENTS = flags.DEFINE_list(
      'baseline_clients', ['40'], 'The baselines\' clients per round.')
  _BASELINES = flags.DEFINE_list('baselines', ['dp_fedavg', 'ddgauss16'],
                                 'Baseline aggregators.')
  _ROUNDS = flags.DEFINE_integer('rounds', None,
                                 'Rounds, the same for all (task default).')
  _TARGET_EPSILON = flags.DEFINE_float('target_epsilon', 1.0,
                                       'Privacy target.')
  _SCALE_NOISE_STDDEV = flags.DEFINE_bool(
      'scale_noise_stddev', True,
      "DP-REC's prior sigma times sqrt(B / the baselines' B), so that its "
      'averaged noise stays at the level tuned at that B and its clip grows '
      '(noise_stddev_for); --noscale_noise_stddev keeps the tuned sigma.')
  _NUM_SEEDS = flags.DEFINE_integer('num_seeds', 3, 'Seeds per point.')


def cli():
  """The command line: `python -m experiments.frontier`."""
  _define_flags()
  app.run(main)


if __name__ == '__main__':
  cli()
