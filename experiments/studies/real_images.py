"""Real data: Fashion-MNIST under the paper's MNIST protocol, beside Table 1.

  python -m experiments.reproduce --part=fashion_mnist \
      --output_dir=results/fashion_mnist [--rounds=300] [--training_seeds=2] \
      [--tuning_seeds=2]

Trains on real Fashion-MNIST (`--task=fashion_mnist`: the paper's MNIST
protocol, 100 clients, B = 10, client SGD 0.01, server Adam 2e-3, LeNet-5)
and writes a table beside the paper's MNIST row (which is on MNIST, an
easier dataset with the same shapes: the comparison is of gaps, not of
levels). Rows, in the order they train (cheapest decisions first):

1. Tuning on the validation split (the 10,000 training images outside the
   clients), `tuning_seeds` seeds per setting (`TUNING_SEEDS` by default:
   one seed could not separate DP-REC's sigmas, whose seeds differ by 5-9
   points) from `tuning_lib.TUNE_SEED_OFFSET` at epsilon 3: DP-FedAvg's clip and
   DP-REC's prior sigma (`GRIDS`, around the paper's 0.01 and 0.005), each grown
   one geometric step past an edge where its best value sits, up to `EXTENSIONS`
   times. The choices are used at epsilon 6 too.
2. DP-FedAvg and DP-REC at epsilon 3, each with its default accountant
   (PLD; DP-REC picks its bits from c), each with its no-noise control.
3. DP-REC at the paper's c = 0.545 (7 bits per tensor, the paper's): the
   paper's Theorem 1 calls that epsilon 3 (unproven for groups,
   docs/PRIVACY.md); the row shows that claim and the proven epsilon at that
   c, which is what its run is accounted at.
4. DDGauss16 at epsilon 3 (RDP, DP-FedAvg's chosen clip), with its control.
5. FedAvg.
6. The private rows at epsilon 6 (the paper's c = 0.87 for the paper row).

Every row trains `training_seeds` seeds on the official test split and
evaluates every `EVAL_EVERY` rounds, so the curves show whether a row
still climbs at the end. Everything resumes: rerun the command and finished
runs are reused, unfinished ones continue from their checkpoints.
`--report_only` trains nothing: it writes the table and curves from the
runs finished so far and lists the rows still to train.

Writes to the output folder: fashion_mnist.md (the table), fashion_mnist.csv,
fashion_mnist_curves.png, and returns reproduce cells for the rows that
have a paper number.
"""

import csv
import dataclasses
import os
from typing import Optional

from experiments.infra import atomic_files
from experiments.runner import aggregator_builders
from experiments.runner import config as config_lib
from experiments.runner import registry
from experiments.runner import report
from experiments.runner import stats
from experiments.studies import paper
from experiments.studies import tuning as tuning_lib
from tff_dprec.accounting import calibration

TASK = 'fashion_mnist'
EPSILONS = (3.0, 6.0)
TUNE_EPSILON = 3.0
DEFAULT_ROUNDS = 300
EVAL_EVERY = 25
GRIDS = {'dp_fedavg': 'l2_clip=0.005,0.01,0.02',
         'dp_rec': 'noise_stddev=0.0025,0.005,0.01'}
EXTENSIONS = 2  # Steps past a grid's edge when its best value sits there.
TUNING_SEEDS = 2  # Seeds per tuning setting; the choice is on their mean.


@dataclasses.dataclass(frozen=True)
class Row:
  """One table row: a method at a target, how it is set, its runs."""
  name: str
  aggregator: str
  epsilon: Optional[float]
  setting: dict
  label: str
  accountant: str
  paper_epsilon: Optional[float] = None  # The paper row's claimed epsilon.
  controls: bool = False


def rows_for(chosen: dict, proven_paper_epsilon) -> list[Row]:
  """The rows, cheapest decisions first (module doc)."""
  clip = chosen.get('dp_fedavg', {}).get('l2_clip')
  ddgauss = {} if clip is None else {'l2_clip': clip}
  rows = []
  for eps in EPSILONS:
    first = eps == EPSILONS[0]
    c = paper.paper_value('mnist', 'clip_ratio', paper.DP_REC, eps)
    rows += [
        Row('dp_fedavg', 'dp_fedavg', eps, chosen.get('dp_fedavg', {}),
            'DP-FedAvg', 'PLD', controls=first),
        Row('dp_rec', 'dp_rec', eps, chosen.get('dp_rec', {}), 'DP-REC',
            'PLD', controls=first),
        Row('dp_rec_paper_c', 'dp_rec', proven_paper_epsilon(c), dict(
            clip_ratio=c, bits=aggregator_builders.PAPER_BITS),
            f"DP-REC at the paper's c = {c}",
            'PLD (proven) at the paper\'s c', paper_epsilon=eps),
        Row('ddgauss16', 'ddgauss16', eps, ddgauss, 'DDGauss16', 'RDP',
            controls=first)]
    if first:
      rows.append(Row('fedavg', 'fedavg', None, {}, 'FedAvg', '-'))
  return rows


# The tuned method each row's setting comes from (DDGauss16 takes DP-FedAvg's
# clip); a report on a study still tuning leaves such rows out.
_TUNED_BY = {'dp_fedavg': 'dp_fedavg', 'ddgauss16': 'dp_fedavg',
             'dp_rec': 'dp_rec'}


def ready(row: Row, chosen: dict) -> bool:
  """Whether the tuning `row`'s setting depends on has been chosen."""
  return _TUNED_BY.get(row.name) in (None, *chosen)


def base_config(output_dir, data_dir, rounds, seeds) -> config_lib.RunConfig:
  return config_lib.RunConfig(
      task=TASK, aggregators=('fedavg',), data_dir=data_dir,
      output_dir=output_dir, rounds=rounds, num_seeds=seeds,
      eval_every=EVAL_EVERY, progress=False)


def tune_methods(base, log, extensions=EXTENSIONS, report_only=False,
                 seeds=TUNING_SEEDS) -> tuple:
  """(chosen, tuning): {'dp_fedavg': setting, 'dp_rec': setting} chosen on
  validation, and per method its validation scores by setting (the mean of
  `seeds` seeds), the settings added past an edge (up to `extensions`), the
  fields still at an edge and the number of seeds.

  `report_only` trains nothing: a method whose tuning has not finished is
  left out of `chosen`, and its `tuning` entry is a `note` saying so.
  """
  chosen, tuning = {}, {}
  for name, grid in GRIDS.items():
    config = config_lib.RunConfig(**{
        **base.asdict(), 'aggregators': (name,), 'num_seeds': seeds,
        'target_epsilon': TUNE_EPSILON,
        'seed': base.seed + tuning_lib.TUNE_SEED_OFFSET,
        'eval_split': 'validation', 'eval_every': 10**6,
        'output_dir': os.path.join(base.output_dir, 'tune', name)})
    path = os.path.join(config.output_dir, f'tune_{name}.json')
    say = lambda line, n=name: log(f'[fashion_mnist] {n} tuning: {line}')

    def tune_grid(settings, config=config, path=path, say=say):
      if report_only:
        results = tuning_lib.stored_results(config, settings, path)
      else:
        os.makedirs(config.output_dir, exist_ok=True)
        results = tuning_lib.tune(config, settings, path, print_fn=say)
      return tuning_lib.choose(results, settings), results

    try:
      best, results, settings, added = tuning_lib.tune_past_edges(
          tune_grid, tuning_lib.parse_grid(grid), extensions,
          lambda c, step, say=say: say(
              f'best at the edge ({tuning_lib.key(c)}); trying '
              f'{tuning_lib.key(step)}') if not report_only else None)
    except tuning_lib.NotTrainedYet as e:
      tuning[name] = dict(note=str(e))
      continue
    chosen[name] = best if best is not None else {}
    tuning[name] = dict(
        validation={tuning_lib.key(s): results[tuning_lib.key(s)]['mean']
                    for s in settings},
        extended=[tuning_lib.key(s) for s in added],
        edges=tuning_lib.edges(best, settings) if best else [], seeds=seeds)
    log(f'[fashion_mnist] {name}: chose {tuning_lib.key(chosen[name])} on the '
        'validation split (' + _scores(tuning[name]) + ')')
  return chosen, tuning


def _scores(tuning) -> str:
  return ', '.join(f'{k}: {100 * v:.2f}'
                   for k, v in tuning['validation'].items())


def row_config(base, row: Row) -> config_lib.RunConfig:
  """The configuration of a row's runs (its control beside it)."""
  names = (row.aggregator,)
  if row.controls:
    names += (row.aggregator + registry.NO_NOISE_SUFFIX,)
  folder = os.path.join(base.output_dir, 'rows', row.name,
                        'nonprivate' if row.epsilon is None else
                        f'eps{row.epsilon:g}')
  return config_lib.RunConfig(**{
      **base.asdict(), **row.setting, 'aggregators': names,
      'target_epsilon': row.epsilon or base.target_epsilon,
      'output_dir': folder})


def _curves_path(config) -> str:
  return os.path.join(config.output_dir, TASK, 'curves.csv')


def train_row(base, row: Row, log) -> tuple:
  """(records, curves path) of one row; its control trains beside it."""
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  config = row_config(base, row)
  log(f'[fashion_mnist] {row.name} at epsilon {row.epsilon}: '
      f'{tuning_lib.key(row.setting) or "task defaults"}')
  records = training.run(config, print_fn=tuning_lib.warnings_only(log))
  return records, _curves_path(config)


def read_row(base, row: Row) -> tuple:
  """(finished records, curves path) of one row; trains nothing."""
  from experiments.runner import finished  # pylint: disable=g-import-not-at-top
  config = row_config(base, row)
  return finished.finished_records(config), _curves_path(config)



def paper_c_epsilons(task, base) -> callable:
  """c -> the proven (PLD) epsilon of DP-REC at c, 7 bits per tensor, at
  the run's rounds; and the paper-mode epsilon, for the table."""
  import warnings  # pylint: disable=g-import-not-at-top
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  config = config_lib.RunConfig(**{
      **base.asdict(), 'aggregators': ('dp_rec',),
      'target_epsilon': EPSILONS[0]}).resolved(task)
  groups = run_setup.calibrated_aggregator(
      task, config, 'dp_rec', False).params['num_groups']
  common = dict(population=task.population,
                clients_per_round=config.clients_per_round,
                rounds=config.rounds, delta=config.delta,
                bits=aggregator_builders.PAPER_BITS,
                num_groups=groups)

  def epsilons(c):
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', accounting.UnprovenPaperBoundWarning)
      claimed = accounting.dp_rec_epsilon(clip_ratio=c, accounting='paper',
                                          **common)
    return accounting.dp_rec_epsilon(clip_ratio=c, **common), claimed

  return epsilons


def run(output_dir: str, data_dir: str = 'data_cache',
        rounds: int = DEFAULT_ROUNDS, seeds: int = 2, log=print,
        report_only: bool = False, tuning_seeds: int = TUNING_SEEDS) -> list:
  """Tunes, trains every row, writes the table, CSV and curves.

  `seeds` seeds train each row on test, `tuning_seeds` each tuning setting
  on validation. `report_only` trains nothing: the table and curves hold
  the runs finished so far, and the table lists the rows with seeds still
  to train.

  Raises:
    ValueError: If `rounds` < 2, or `seeds` or `tuning_seeds` < 1.
  """
  if not isinstance(rounds, int) or rounds < 2:
    raise ValueError(f'rounds must be an integer >= 2, found {rounds!r}.')
  for value, arg in ((seeds, 'seeds'), (tuning_seeds, 'tuning_seeds')):
    if not isinstance(value, int) or value < 1:
      raise ValueError(f'{arg} must be a positive integer, found {value!r}.')
  from experiments.data import tasks  # pylint: disable=g-import-not-at-top
  task = tasks.create_task(TASK, data_dir)
  base = base_config(output_dir, data_dir, rounds, seeds)
  log(f'[fashion_mnist] {task.data_note}')
  chosen, tuning = tune_methods(base, log, report_only=report_only,
                                seeds=tuning_seeds)
  paper_c = paper_c_epsilons(task, base)
  rows = rows_for(chosen,
                  lambda c: calibration.round_up(paper_c(c)[0], 4))
  results, pending = [], []
  for row in rows:
    if not ready(row, chosen):
      pending.append(f'{_row_label(row)} (its tuning)')
      continue
    records, curves = (read_row(base, row) if report_only else
                       train_row(base, row, log))
    if len(records) < seeds * (2 if row.controls else 1):
      pending.append(f'{_row_label(row)} ({len(records)} runs finished)')
    if records:
      results.append((row, records, curves))
  table = summarize(results, paper_c)
  write(output_dir, table, results, chosen, tuning, pending)
  return cells(table)


def _row_label(row: Row) -> str:
  eps = 'no privacy' if row.epsilon is None else (
      f'epsilon {row.paper_epsilon or row.epsilon:g}')
  return f'{row.label}, {eps}'


def summarize(results, paper_c) -> list[dict]:
  """One line per trained aggregator (methods and their controls)."""
  lines = []
  for row, records, _ in results:
    for name, runs in report.group_by_aggregator(records).items():
      mean, se = stats.mean_se([r['final_metric'] for r in runs])
      control = registry.control_of(name) is not None
      line = dict(
          row=row.name + ('_no_noise' if control else ''), aggregator=name,
          label=row.label + (' no-noise control' if control else ''),
          target_epsilon=row.paper_epsilon or row.epsilon,
          accountant='-' if control else row.accountant,
          epsilon=_spent(runs, control),
          seeds=len(runs), mean=mean, se=se,
          lost_rounds=sum(r.get('lost_rounds', 0) for r in runs),
          upload_gb=_mean(runs, 'upload_gb'),
          download_gb=_mean(runs, 'download_gb'),
          seconds_per_round=_mean(runs, 'seconds_per_round'),
          params=runs[0].get('params', {}))
      if row.paper_epsilon is not None and not control:
        line['paper_mode_epsilon'] = paper_c(row.setting['clip_ratio'])[1]
      line['paper'] = _paper_metric(row, control)
      lines.append(line)
  return lines


def _spent(runs, control):
  spent = [r['epsilon'] for r in runs if r['epsilon'] is not None]
  return None if control or not spent else max(spent)


def _mean(runs, key):
  return sum(r[key] for r in runs) / len(runs)


def _paper_metric(row, control):
  """The paper's MNIST accuracy for the row (its DP-REC ran at its c)."""
  if control:
    return None
  return paper.metric_of('mnist', row.aggregator,
                         row.paper_epsilon or row.epsilon)


def gaps(table) -> list[dict]:
  """DP-REC minus DP-FedAvg and minus DDGauss16 at each epsilon, +- SE,
  beside the paper's MNIST gap (it has no DDGauss on MNIST)."""
  by = {(l['row'], l['target_epsilon']): l for l in table}
  out = []
  for eps in EPSILONS:
    rec = by.get(('dp_rec', eps))
    for other in ('dp_fedavg', 'ddgauss16'):
      base = by.get((other, eps))
      if rec is None or base is None:
        continue
      se = None
      if rec['se'] is not None and base['se'] is not None:
        se = (rec['se']**2 + base['se']**2)**0.5
      paper_gap = None
      if other == 'dp_fedavg':
        paper_gap = (paper.paper_value('mnist', 'metric', paper.DP_REC, eps) -
                     paper.paper_value('mnist', 'metric', paper.DP_FEDAVG,
                                       eps)) / 100
      out.append(dict(epsilon=eps, against=other,
                      gap=rec['mean'] - base['mean'], se=se,
                      paper_gap=paper_gap))
  return out


_LABELS = {'dp_fedavg': 'DP-FedAvg', 'ddgauss16': 'DDGauss16'}


def markdown(table, chosen, tuning=None, pending=()) -> str:
  """The table beside the paper's MNIST row, the gaps, then the tuning,
  then the rows still to train (`pending`)."""
  lines = [
      '| row | target epsilon | accountant | epsilon spent | accuracy (%) '
      "| paper's MNIST (%) | upload GB | download GB | s/round |",
      '|---|---|---|---|---|---|---|---|---|']
  for l in table:
    se = '' if l['se'] is None else f" ± {100 * l['se']:.2f}"
    spent = '-' if l['epsilon'] is None else f"{l['epsilon']:.3f}"
    if 'paper_mode_epsilon' in l:
      spent += (f" (the paper's accounting: "
                f"{l['paper_mode_epsilon']:.3f}, unproven)")
    target = '-' if l['target_epsilon'] is None else f"{l['target_epsilon']:g}"
    paper_value = '-' if l['paper'] is None else f"{l['paper']:.1f}"
    lines.append(
        f"| {l['label']} | {target} | {l['accountant']} | {spent} | "
        f"{100 * l['mean']:.2f}{se} ({l['seeds']} seeds{_lost(l)}) | "
        f"{paper_value} | "
        f"{l['upload_gb']:.3g} | {l['download_gb']:.3g} | "
        f"{l['seconds_per_round']:.2f} |")
  lines += ['', '| gap | epsilon | ours (points) | paper, MNIST (points) |',
            '|---|---|---|---|']
  for g in gaps(table):
    se = '' if g['se'] is None else f" ± {100 * g['se']:.2f}"
    paper_gap = ('-' if g['paper_gap'] is None else
                 f"{100 * g['paper_gap']:+.1f}")
    lines.append(f"| DP-REC - {_LABELS[g['against']]} | {g['epsilon']:g} | "
                 f"{100 * g['gap']:+.2f}{se} | {paper_gap} |")
  per_setting = _seeds_per_setting(tuning)
  lines += ['', f'Chosen on the validation split at epsilon 3{per_setting}: '
            + '; '.join(
      f'{name} {tuning_lib.key(s) or "task defaults"}'
      for name, s in chosen.items()) + '.']
  for name, t in (tuning or {}).items():
    if 'note' in t:
      lines.append(f"* {name}: {t['note']}.")
      continue
    grown = tuning_lib.grown_note(t['extended'])
    notes = [grown] if grown else []
    notes.append(f"at the edge: {'; '.join(t['edges'])}" if t['edges'] else
                 'inside the grid')
    lines.append(f"* {name}: {_scores(t)} ({', '.join(notes)}).")
  if pending:
    lines += ['', 'Not finished yet (rerun the command to train them): ' +
              '; '.join(pending) + '.']
  return '\n'.join(lines) + '\n'


def _lost(line) -> str:
  """'' or ', n round(s) lost': rounds lost to interruptions, summed over
  the seeds; counted as spent privacy, so a private seed at its budget
  trained that many rounds fewer."""
  lost = line['lost_rounds']
  return f", {lost} round{'s' * (lost != 1)} lost" if lost else ''


def write(output_dir, table, results, chosen, tuning=None,
          pending=()) -> list[str]:
  """fashion_mnist.md, fashion_mnist.csv and fashion_mnist_curves.png,
  each written whole or not at all."""
  os.makedirs(output_dir, exist_ok=True)
  md = atomic_files.write_text(os.path.join(output_dir, 'fashion_mnist.md'),
                               markdown(table, chosen, tuning, pending))
  path = atomic_files.write_csv(
      os.path.join(output_dir, 'fashion_mnist.csv'), table,
      leave_out=('params',))
  png = os.path.join(output_dir, 'fashion_mnist_curves.png')
  with atomic_files.replacing_path(png, suffix='.png') as tmp:
    plot_curves(tmp, results)
  return [md, path, png]


def plot_curves(path, results) -> None:
  """Test accuracy against round, mean over seeds, one panel per epsilon."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, len(EPSILONS), figsize=(13, 5.8), sharey=True)
  for ax, eps in zip(axes, EPSILONS):
    for row, _, curves_path in results:
      if row.epsilon is not None and (row.paper_epsilon or row.epsilon) != eps:
        continue
      for name, (rounds, mean) in _mean_curves(curves_path).items():
        control = registry.control_of(name) is not None
        ax.plot(rounds, [100 * m for m in mean], ls='--' if control else '-',
                lw=1 if control else 1.6, color=_COLORS[row.name],
                label=_curve_label(row, control))
    ax.set_title(f'epsilon {eps:g} (FedAvg: no privacy)', fontsize=10)
    ax.set_xlabel('round')
    ax.grid(alpha=0.3)
    # Below the panel, where it hides no curve.
    ax.legend(fontsize=7, loc='upper center', bbox_to_anchor=(0.5, -0.14),
              ncol=2, frameon=False)
  axes[0].set_ylabel('test accuracy (%), mean over seeds')
  fig.suptitle('Fashion-MNIST, the paper\'s MNIST protocol (B = 10, '
               'LeNet-5)', fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def _curve_label(row: Row, control: bool) -> str:
  """A curve's legend entry; a paper-c row names its proven epsilon."""
  if control:
    return row.label + ' (no noise)'
  if row.paper_epsilon is not None:
    return f'{row.label} (proven epsilon {row.epsilon:.3g})'
  return row.label


_COLORS = {'dp_fedavg': 'tab:orange', 'dp_rec': 'tab:blue',
           'dp_rec_paper_c': 'tab:purple', 'ddgauss16': 'tab:green',
           'fedavg': 'black'}


def _seeds_per_setting(tuning) -> str:
  """' (the mean of N seeds per setting)', or '' for old tuning records."""
  counts = sorted({t['seeds'] for t in (tuning or {}).values()
                   if 'seeds' in t})
  if not counts:
    return ''
  if counts == [1]:
    return ' (one seed per setting)'
  return f" (the mean of {' or '.join(map(str, counts))} seeds per setting)"


def _mean_curves(path) -> dict:
  """{aggregator: (rounds, mean metric)} from a run's curves.csv.

  A mean is drawn at the rounds every seed evaluated, and at the end: the
  mean of every seed's last point, at the latest of their rounds. A seed
  can end early (rounds lost to a kill count as spent privacy and shorten
  its run), and a mean over whichever seeds reached a round would jump.

  Args:
    path: The row's curves.csv (columns aggregator, seed, round, metric).
  """
  points = {}
  if not os.path.exists(path):  # No run of the row has finished yet.
    return points
  with open(path) as f:
    for r in csv.DictReader(f):
      points.setdefault(r['aggregator'], {}).setdefault(
          r['seed'], {})[int(r['round'])] = float(r['metric'])
  return {name: _mean_curve(list(by_seed.values()))
          for name, by_seed in points.items()}


def _mean_curve(seeds: list[dict]) -> tuple[list, list]:
  """(rounds, means) of per-seed {round: metric} curves, by
  `stats.mean_curve` (`_mean_curves`)."""
  curves = [[{'round': r, 'metric': m} for r, m in sorted(curve.items())]
            for curve in seeds]
  points = stats.mean_curve(curves, lambda point: point['metric'])
  return [x for x, _, _ in points], [mean for _, mean, _ in points]


def cells(table) -> list[dict]:
  """Reproduce cells for the rows beside a paper number."""
  out = []
  for l in table:
    if l['paper'] is None:
      continue
    out.append(dict(
        task='mnist', method=paper.METHODS[l['aggregator']],
        epsilon=l['target_epsilon'], quantity='metric', unit='%',
        paper=l['paper'], ours=100 * l['mean'],
        basis=f"real Fashion-MNIST (not MNIST), {l['label']}, "
              f"{l['seeds']} seeds, {l['accountant']}",
        note=f"epsilon spent {l['epsilon']:.3f}"
        if l['epsilon'] is not None else ''))
  return out
