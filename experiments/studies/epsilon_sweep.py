r"""Final metric against the privacy target, each point tuned at its epsilon.

  python -m experiments.epsilon_sweep --task=stackoverflow_lr \
      --aggregators=dp_rec,dp_fedavg --epsilons=1,4,16,64 --num_seeds=3

For every target epsilon and private aggregator:

1.  **Tuning on the validation split.** Each setting of the aggregator's grid
    (`--grids`, `experiments.tune`'s syntax per aggregator) trains
    `--tune_seeds` seeds at that epsilon and is scored on the validation split
    (never the test split), in `<output_dir>/eps<epsilon>/tune/`, with seeds
    `tuning.TUNE_SEED_OFFSET` onwards, so that no tuning run is also one of the
    point's runs (the winner's luck on validation would carry into a test
    seed). The best mean wins (ties: the first in grid order; a diverged run,
    a non-finite mean, never wins). With no grid for an aggregator its task
    defaults are used.
2.  **The point.** The chosen setting trains `--num_seeds` seeds (0, 1, ...,
    as `experiments.run`), scored on the test split, with the
    `<aggregator>_no_noise` control beside it (`--controls`: the same clip,
    sampling, optimizer and rounds, no noise), in
    `<output_dir>/eps<epsilon>/<aggregator>/<setting>/` (each resumes on its
    own).

A grid varies an aggregator's free parameters only: the privacy target, the
accounting, the rounds and the clients per round are the sweep's, the same
at every point.

A DP-REC setting whose calibrated clip ratio is at least
`rec.IDEALISED_CLIP_RATIO_LIMIT` is neither tuned nor run: its epsilon rests
on an idealisation that fails there (docs/PRIVACY.md, section 7); a point
with no setting inside the limit is a table row that says so. Writes
`<output_dir>/<task>/`: `epsilon_sweep.csv` (aggregator, target epsilon, spent
epsilon, the chosen setting, c or z, seeds, mean, standard error, note),
`epsilon_sweep.md` and `metric_vs_target_epsilon.png` (mean +- standard error
against epsilon, log x; controls dashed; the frequent-tags and initial-model
lines).

Privacy cost of tuning: as in `experiments.tune`, each tried setting is a
separate private run on the same training clients.
"""

import csv
import math
import os
import time


from absl import app
from absl import flags
# As in experiments.run: Keras models built after a TensorFlow import under
# `app.run` fail to build (empty inbound nodes).
import tensorflow as tf  # pylint: disable=unused-import  # noqa: F401

from experiments.infra import atomic_files
from experiments.runner import cli as cli_lib
from experiments.runner import config as config_lib
from experiments.runner import registry
from experiments.runner import report
from experiments.runner import stats
from experiments.studies import tuning
from tff_dprec import rec
from tff_dprec import worker_reaper

# Grids of the main job's setting (docs/EXPERIMENTS.md, "Tuning"): DP-FedAvg's
# clip and server rate around the epsilon-1 optimum (0.2, 10); DP-REC's prior
# sigma, which while the clip c sigma binds scales the whole update (step and
# noise) as a learning rate does.
DEFAULT_GRIDS = ('dp_fedavg: l2_clip=0.2,0.5,1 server_lr=3,10; '
                 'dp_rec: noise_stddev=0.003,0.006,0.012')
# Tuning runs use seeds from here on; the points use 0, 1, ...
# Fields a grid may not vary: they define the point, not its free parameters.
_FIXED_FIELDS = ('target_epsilon', 'accounting', 'rounds',
                 'clients_per_round')


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
  epsilons = sorted(set(epsilons))
  for a, b in zip(epsilons, epsilons[1:]):
    if epsilon_dir(a) == epsilon_dir(b):
      raise ValueError(f'--epsilons: {a!r} and {b!r} are too close to tell '
                       f'apart ({epsilon_dir(a)}).')
  return epsilons


def epsilon_dir(epsilon: float) -> str:
  return f'eps{epsilon:g}'


def parse_grids(text: str, aggregators) -> dict:
  """`'agg: grid; agg: grid'` -> {aggregator: [setting, ...]}.

  Each grid is `experiments.tune`'s syntax. Aggregators of `text` that are
  not among `aggregators` are ignored (the default grids name more than a
  sweep may run); an unknown aggregator name, a control, or a repeated one is
  an error naming it.
  """
  grids = {}
  if not text or not text.strip():
    return grids
  for part in text.split(';'):
    if not part.strip():
      continue
    name, sep, grid = part.partition(':')
    name = name.strip()
    if not sep:
      raise tuning.GridError(
          f'--grids: {part.strip()!r} is not "aggregator: grid".')
    if name not in registry.private_names():
      raise tuning.GridError(
          f'--grids: {name!r} is not a private aggregator; choose from '
          f'{registry.private_names()}.')
    if name in grids:
      raise tuning.GridError(f'--grids: {name!r} has two grids.')
    grids[name] = tuning.parse_grid(grid)
    for setting in grids[name]:
      for field in _FIXED_FIELDS:
        if field in setting:
          raise tuning.GridError(
              f'--grids: {name}: {field!r} cannot vary in an epsilon sweep '
              '(every point has the same target, accounting, rounds and '
              'clients per round).')
  return {name: grid for name, grid in grids.items() if name in aggregators}


def summarize(points) -> list[dict]:
  """Rows of `(target, records)` or `(target, records, setting)` points.

  A point with no records and a `note` in its setting is a row that was not
  run (mean None).
  """
  rows = []
  for point in points:
    target, records = point[0], point[1]
    setting = dict(point[2]) if len(point) > 2 else {}
    note = setting.pop('note', '')
    if not records:
      rows.append(dict(aggregator=setting.pop('aggregator'),
                       target_epsilon=target, epsilon=None,
                       setting='', parameter='', seeds=0,
                       mean=None, se=None, note=note))
      continue
    for name, runs in report.group_by_aggregator(records).items():
      mean, se = stats.mean_se([r['final_metric'] for r in runs])
      epsilons = [r['epsilon'] for r in runs if r.get('epsilon') is not None]
      rows.append(dict(aggregator=name, target_epsilon=target,
                       epsilon=max(epsilons) if epsilons else None,
                       setting=tuning.setting_name(setting),
                       parameter=report.parameter_text(
                           runs[0].get('params', {})),
                       seeds=len(runs), mean=mean, se=se,
                       note='; '.join(n for n in (
                           note, report.lost_rounds_note(runs)) if n)))
  return rows


def write(output_dir: str, rows, context: dict, label: str) -> list[str]:
  """Writes epsilon_sweep.csv, epsilon_sweep.md and the plot."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  os.makedirs(output_dir, exist_ok=True)
  csv_path = os.path.join(output_dir, 'epsilon_sweep.csv')
  fields = ['aggregator', 'target_epsilon', 'epsilon', 'setting', 'parameter',
            'seeds', 'mean', 'se', 'note']
  with atomic_files.replacing(csv_path, newline='') as f:
    writer = csv.DictWriter(f, fieldnames=fields, extrasaction='ignore')
    writer.writeheader()
    writer.writerows(rows)
  md_path = atomic_files.write_text(
      os.path.join(output_dir, 'epsilon_sweep.md'),
      markdown_table(rows, context, label) + '\n')
  fig, ax = plt.subplots(figsize=(6, 4.2))
  colors = {}
  for name in dict.fromkeys(r['aggregator'] for r in rows):
    mine = sorted((r for r in rows
                   if r['aggregator'] == name and r['mean'] is not None),
                  key=lambda r: r['target_epsilon'])
    if not mine:
      continue
    base = registry.control_of(name) or name
    control = registry.control_of(name) is not None
    color = colors.setdefault(base, f'C{len(colors)}')
    ax.errorbar([r['target_epsilon'] for r in mine],
                [100 * r['mean'] for r in mine],
                yerr=[100 * (r['se'] or 0.0) for r in mine],
                marker='x' if control else 'o', ls='--' if control else '-',
                color=color, capsize=3,
                label=f"{report.display_name(name)} ({mine[0]['seeds']} seeds)")
  if context.get('frequent_tags') is not None:
    ax.axhline(100 * context['frequent_tags'], color='black', ls='-.',
               lw=1, label='frequent tags')
  if context.get('initial_metric') is not None:
    ax.axhline(100 * context['initial_metric'], color='grey', ls=':', lw=1,
               label='initial model')
  ax.set_xscale('log')
  targets = sorted({r['target_epsilon'] for r in rows})
  ax.set_xticks(targets)
  ax.set_xticklabels([f'{t:g}' for t in targets])
  ax.minorticks_off()
  ax.set_xlabel('target epsilon (log scale)')
  ax.set_ylabel(f'final {label} (%)')
  ax.set_title(f'{label} vs privacy target (mean ± SE)\n'
               'each point tuned on validation at its epsilon', fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  fig.tight_layout()
  png_path = os.path.join(output_dir, 'metric_vs_target_epsilon.png')
  with atomic_files.replacing_path(png_path, suffix='.png') as tmp:
    fig.savefig(tmp, dpi=120)
  plt.close(fig)
  return [csv_path, md_path, png_path]


def markdown_table(rows, context: dict, label: str) -> str:
  """The sweep as a markdown table, one row per aggregator and epsilon."""
  lines = [f'| target epsilon | row | chosen setting | c or z | {label} (%) '
           '| note |', '|---|---|---|---|---|---|']
  for r in sorted(rows, key=lambda r: (r['target_epsilon'],
                                       registry.control_of(r['aggregator'])
                                       or r['aggregator'],
                                       r['aggregator'])):
    if r['mean'] is None:
      value = 'not run'
    else:
      se = '' if r['se'] is None else f" ± {100 * r['se']:.2f}"
      value = f"{100 * r['mean']:.2f}{se}"
    lines.append(f"| {r['target_epsilon']:g} | "
                 f"{report.display_name(r['aggregator'])} | {r['setting']} | "
                 f"{r['parameter']} | {value} | {r['note']} |")
  for name, key in (('frequent tags', 'frequent_tags'),
                    ('initial model', 'initial_metric')):
    if context.get(key) is not None:
      lines.append(f'| | {name} | | | {100 * context[key]:.2f} | |')
  return '\n'.join(lines)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  # TFF's worker_binary dies with this process, even when only a report
  # (which evaluates the initial model) runs.
  worker_reaper.install()
  try:
    epsilons = parse_epsilons(_EPSILONS.value)
    aggregators = tuple(_AGGREGATORS.value)
    for name in aggregators:
      if name not in registry.private_names():
        raise ValueError(f'--aggregators: {name!r} is not a private '
                         f'aggregator; choose from {registry.private_names()}.')
    grids = parse_grids(_GRIDS.value, aggregators)
    if _TUNE_SEEDS.value < 1:
      raise ValueError(f'--tune_seeds must be >= 1, found {_TUNE_SEEDS.value}.')
    base = config_lib.RunConfig(
        task=_STUDY.task.value, aggregators=aggregators,
        data_dir=_STUDY.data_dir.value,
        output_dir=_STUDY.output_dir.value, num_seeds=_NUM_SEEDS.value,
        rounds=_ROUNDS.value, progress=False,
        population=_STUDY.population_value())
    check_grid_values(base, grids)
  except (TypeError, ValueError) as e:
    cli_lib.fail(e)
  cli_lib.quiet_logs()
  start = time.time()
  points, context, label = run_sweep(base, epsilons, grids,
                                     tune_seeds=_TUNE_SEEDS.value,
                                     controls=_CONTROLS.value)
  rows = summarize(points)
  paths = write(os.path.join(_STUDY.output_dir.value, _STUDY.task.value),
                rows, context, label)
  print(markdown_table(rows, context, label))
  print(f'Wrote {", ".join(paths)}; wall time {time.time() - start:.0f} s.')


def check_grid_values(base, grids) -> None:
  """Raises ValueError (naming the setting) for a value RunConfig refuses.

  Checked before anything trains: a bad value would otherwise stop the sweep
  hours in, at the first point that tunes it.
  """
  for name, settings in grids.items():
    for setting in settings:
      try:
        config_lib.RunConfig(**{**base.asdict(), **setting,
                                'aggregators': (name,)})
      except (TypeError, ValueError) as e:
        raise ValueError(f'--grids: {name}: {tuning.key(setting)}: {e}'
                         ) from None


def run_sweep(base, epsilons, grids, *, tune_seeds: int, controls: bool,
              print_fn=print):
  """Tunes and runs every (epsilon, aggregator) point; returns the points."""
  # Imported here: TFF takes seconds to import, flag errors should not wait.
  from experiments.data import tasks as tasks_lib  # pylint: disable=g-import-not-at-top
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  task = tasks_lib.create_task(base.task, base.data_dir,
                               embedded_config=base.embedded_config,
                               population=base.population)
  points, context, label = [], {}, 'metric'
  warnings_only = tuning.warnings_only(print_fn)
  for eps in epsilons:
    for name in base.aggregators:
      eps_dir = os.path.join(base.output_dir, epsilon_dir(eps))
      default = config_lib.RunConfig(**{
          **base.asdict(), 'aggregators': (name,), 'target_epsilon': eps})
      inside, clip_ratios = _inside_idealisation(
          task, default, grids.get(name) or [{}], name)
      if not inside:
        note = (f'not run: c = {min(clip_ratios):.3f} >= the idealisation '
                f'limit {rec.IDEALISED_CLIP_RATIO_LIMIT:g} (docs/PRIVACY.md, '
                'section 7)')
        print_fn(f'[sweep] epsilon {eps:g} {name}: {note}')
        points.append((eps, [], dict(aggregator=name, note=note)))
        continue
      setting = {}
      if grids.get(name):
        setting = _tuned(default, inside, os.path.join(eps_dir, 'tune', name),
                         tune_seeds, lambda line, e=eps, n=name: print_fn(
                             f'[sweep] epsilon {e:g} {n} tuning: {line}'))
        if setting is None:
          note = 'not run: every tuned setting diverged (non-finite metric)'
          print_fn(f'[sweep] epsilon {eps:g} {name}: {note}')
          points.append((eps, [], dict(aggregator=name, note=note)))
          continue
      names = (name, name + registry.NO_NOISE_SUFFIX) if controls else (name,)
      config = config_lib.RunConfig(**{
          **default.asdict(), **setting, 'aggregators': names,
          'output_dir': os.path.join(
              eps_dir, name, tuning.setting_name(setting).replace(' ', '_'))})
      print_fn(f'[sweep] epsilon {eps:g} {name}: '
               f'{tuning.setting_name(setting)}')
      captured = {}
      records = training.run(config, print_fn=warnings_only,
                             context_out=captured)
      context, label = captured, records[0]['metric_label']
      for r in records:
        print_fn(f"[sweep] epsilon {eps:g} {r['aggregator']} seed "
                 f"{r['seed']}: {100 * r['final_metric']:.2f}")
      points.append((eps, records, setting))
  return points, context, label


def _inside_idealisation(task, default, settings, name):
  """(settings inside the idealisation, clip ratios of those outside).

  Settings outside it are neither tuned nor run; c can depend on a setting
  (bits, grouping), so each is calibrated.
  """
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  inside, clip_ratios = [], []
  for setting in settings:
    config = config_lib.RunConfig(**{**default.asdict(), **setting})
    params = run_setup.calibrated_aggregator(task, config.resolved(task), name,
                               False).params
    if tuning.outside_idealisation(params):
      clip_ratios.append(params['clip_ratio'])
    else:
      inside.append(setting)
  return inside, clip_ratios


def _tuned(default, settings, output_dir, tune_seeds, print_fn):
  """The best of `settings` on validation (None if all diverged)."""
  tuning_config = config_lib.RunConfig(**{
      **default.asdict(), 'num_seeds': tune_seeds,
      'seed': default.seed + tuning.TUNE_SEED_OFFSET,
      'eval_split': 'validation', 'eval_every': 10**6,
      'output_dir': output_dir})
  os.makedirs(output_dir, exist_ok=True)
  name, = default.aggregators
  results = tuning.tune(
      tuning_config, settings, os.path.join(output_dir, f'tune_{name}.json'),
      print_fn=print_fn)
  return tuning.choose(results, settings)


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _STUDY, _AGGREGATORS, _EPSILONS, _NUM_SEEDS, _TUNE_SEEDS, _GRIDS
  global _CONTROLS, _ROUNDS
  _STUDY = cli_lib.define_study_flags('output/epsilon_sweep')
  _AGGREGATORS = flags.DEFINE_list('aggregators', ['dp_rec', 'dp_fedavg'],
                                   'Private aggregators to sweep.')
  _EPSILONS = flags.DEFINE_list('epsilons', ['1', '4', '16', '64'],
                                'Target epsilons.')
  _NUM_SEEDS = flags.DEFINE_integer('num_seeds', 3, 'Seeds per point.')
  _ROUNDS = flags.DEFINE_integer('rounds', None,
                                 'Rounds, the same for all (task default).')
  _TUNE_SEEDS = flags.DEFINE_integer('tune_seeds', 1,
                                     'Seeds per tuned setting.')
  _GRIDS = flags.DEFINE_string(
      'grids', DEFAULT_GRIDS,
      "Per-aggregator tuning grids, 'aggregator: grid; ...' (grid as in "
      "experiments.tune); '' runs every point at the task defaults.")
  _CONTROLS = flags.DEFINE_boolean(
      'controls', True, 'Run each point\'s <aggregator>_no_noise control.')

