r"""When does DP-REC pay? Utility against clients per round and traffic.

  python -m experiments.frontier --task=stackoverflow_lr --num_seeds=3

At one privacy target (epsilon 1) and the same rounds T, trains each method
at each of its clients per round B (`--points`, default DP-REC and
DP-FedAvg at 40, 160, 640 and 2560, DDGauss16 at 40, 160 and 640, and
DP-FedAvg under RDP, DDGauss's reference, at 40 and 640), each calibrated
to the target at its own B. DP-REC's noise on the averaged
update, over its clip, is 1 / (c sqrt(B)); DP-FedAvg's is z / B; c barely
falls with B, so at some B DP-REC's noise meets DP-FedAvg's at B = 40
(`python -m tff_dprec.plan` predicts where), for a fraction of its upload.

Each point's free parameters are chosen on the validation split where
`--grids` names the point (`method@B: grid`, `experiments.tune`'s syntax;
DP-REC's grid may be in `clip=` values, its clip c sigma, turned into
`noise_stddev = clip / c(B)` rounded to 4 decimals at the point's own c:
the clip is what matters once B is large, since the noise over the clip is
fixed by c and B). Tuning runs train `--tune_seeds` seeds from
`epsilon_sweep.TUNE_SEED_OFFSET` on, scored on the validation split, in
`<output_dir>/tune/B<B>/<method>/`; the best mean wins. When it is the
grid's smallest or largest value, the grid grows one geometric step past
that edge and the new setting is tried, up to `--extend_edges` times. A
point without a grid uses the task's defaults (tuned at B = 40 on
validation, docs/EXPERIMENTS.md): every method at B = 40.

Then each point trains `--num_seeds` seeds (0, 1, ...) scored on the test
split, in `<output_dir>/B<B>/<method>/<setting>/`. Everything resumes:
finished tuning settings and runs are reused when their configuration is
unchanged, a run cut short continues from its checkpoint. `--report_only`
trains nothing and writes the outputs from the runs that have finished, so
a study can be looked at while it runs.

Writes `<output_dir>/<task>/`: `frontier.csv`, `frontier.md` (per point:
the setting and whether it is at the edge of its grid, c or z, the
planner's relative noise, metric +- standard error, upload, download and
total GB per run, s/round; then, against DP-FedAvg at B = 40, each DP-REC
point's gap with its SE and traffic ratios, the B where DP-REC's recall
reaches it or its gap at the largest B, and the planner's predicted B';
then DDGauss16 - DP-FedAvg as mechanism plus accountant, `split_lines`)
and `frontier.png` (the metric against upload GB, total GB and B, log x,
with standard-error bands and DP-FedAvg's B = 40 level).
"""

import csv
import math
import os
import re
import time

from absl import app
from absl import flags
# As in experiments.run: Keras models built after a TensorFlow import under
# `app.run` fail to build (empty inbound nodes).
import tensorflow as tf  # pylint: disable=unused-import

from experiments.infra import atomic_files
from experiments.infra import worker_reaper
from experiments.runner import cli as cli_lib
from experiments.runner import config as config_lib
from experiments.runner import registry
from experiments.runner import report
from experiments.studies import epsilon_sweep
from experiments.studies import tune as tune_lib
from tff_dprec import plan as plan_lib

# DP-FedAvg (RDP), DDGauss's reference, splits it (`split_lines`).
DEFAULT_POINTS = ('dp_rec: 40,160,640,2560; dp_fedavg: 40,160,640,2560; '
                  'ddgauss16: 40,160,640; dp_fedavg_rdp: 40,640')
# DP-REC's clip at each B > 40 (at B = 40 its default, sigma 0.006, is
# tuned). DP-FedAvg's B = 40 clip and rate (0.2, 10) were a rule for every B
# until its check at B = 2560 failed (clip 0.2: 56.00% on validation, 2.0:
# 81.14%), so its clip is tuned at every B > 40; DDGauss16's clip and its
# RDP reference's are tuned where DP-FedAvg's is, on the same grid.
DEFAULT_GRIDS = ('dp_rec@160: clip=0.01,0.02,0.05; '
                 'dp_rec@640: clip=0.025,0.05,0.1; '
                 'dp_rec@2560: clip=0.1,0.2,0.4; '
                 'dp_fedavg@160: l2_clip=0.2,0.5,1,2; '
                 'dp_fedavg@640: l2_clip=0.2,0.5,1,2; '
                 'dp_fedavg@2560: l2_clip=0.2,0.5,1; '
                 'ddgauss16@160: l2_clip=0.2,0.5,1,2; '
                 'ddgauss16@640: l2_clip=0.2,0.5,1,2; '
                 'dp_fedavg_rdp@640: l2_clip=0.2,0.5,1,2')
DP_REC_CLIP = 'clip'
REFERENCE = ('dp_fedavg', 40)


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


def parse_points(text: str) -> dict:
  """'method: B,B; method: B' -> {method: [B, ...]} (ValueError names it)."""
  points = {}
  for part in (text or '').split(';'):
    if not part.strip():
      continue
    name, sep, sizes = part.partition(':')
    name = name.strip()
    if not sep:
      raise ValueError(f'--points: {part.strip()!r} is not "method: B,B".')
    if name not in registry.private_names():
      raise ValueError(f'--points: {name!r} is not a private aggregator; '
                       f'choose from {registry.private_names()}.')
    if name in points:
      raise ValueError(f'--points: {name!r} is listed twice.')
    points[name] = parse_sizes([s.strip() for s in sizes.split(',')],
                               f'points ({name})')
  if not points:
    raise ValueError('--points is empty.')
  return points


def parse_grids(text: str, points: dict) -> dict:
  """'method@B: grid; ...' -> {(method, B): [setting, ...]}.

  A grid for a point not in `points` is an error (it would never run), as
  is a field that defines the point rather than its free parameters.
  """
  grids = {}
  for part in (text or '').split(';'):
    if not part.strip():
      continue
    head, sep, grid = part.partition(':')
    name, at, size = head.strip().partition('@')
    if not sep or not at:
      raise tune_lib.GridError(
          f'--grids: {part.strip()!r} is not "method@B: grid".')
    clients = parse_sizes([size], 'grids')[0]
    if clients not in points.get(name, ()):
      raise tune_lib.GridError(
          f'--grids: {head.strip()!r} is not a point of --points.')
    if (name, clients) in grids:
      raise tune_lib.GridError(f'--grids: {head.strip()!r} has two grids.')
    settings = _parse_settings(grid, name)
    grids[(name, clients)] = settings
  return grids


def _parse_settings(grid, name):
  """`experiments.tune`'s grid; DP-REC's `clip=` kept as the key 'clip'."""
  if name == 'dp_rec':  # Its l2_clip is c sigma: `clip=` names it.
    grid = re.sub(r'(^|\s)clip=', r'\1l2_clip=', grid)
  settings = tune_lib.parse_grid(grid)
  if name == 'dp_rec':
    settings = [{(DP_REC_CLIP if k == 'l2_clip' else k): v
                 for k, v in s.items()} for s in settings]
  for setting in settings:
    for field in ('target_epsilon', 'accounting', 'rounds',
                  'clients_per_round'):
      if field in setting:
        raise tune_lib.GridError(
            f'--grids: {name}: {field!r} defines the point; it cannot vary.')
  return settings


def sigma_for_clip(clip: float, clip_ratio: float) -> float:
  """DP-REC's prior sigma giving the clip `clip` at c: clip / c, 4 decimals."""
  sigma = round(clip / clip_ratio, 4)
  if sigma <= 0:
    raise ValueError(f'clip={clip} at c={clip_ratio:.4g} gives sigma '
                     f'{clip / clip_ratio:.3g}, below 0.0001.')
  return sigma


def relative_noise(record: dict):
  """The planner's relative noise of a run from its parameters, or None."""
  params, b = record.get('params', {}), record['clients_per_round']
  if params.get('clip_ratio'):
    return plan_lib.dp_rec_relative_noise(params['clip_ratio'], b)
  if params.get('noise_multiplier'):
    return plan_lib.gaussian_relative_noise(params['noise_multiplier'], b)
  return None


def point_settings(task, base, name, clients, grid) -> list:
  """The grid's settings as RunConfig fields (DP-REC's clips as sigmas)."""
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  if name != 'dp_rec' or not any(DP_REC_CLIP in s for s in grid):
    return [dict(s) for s in grid]
  config = config_lib.RunConfig(**{**base.asdict(), 'aggregators': (name,),
                                   'clients_per_round': clients})
  c = training.calibrated_aggregator(task, config.resolved(task), name,
                        False).params['clip_ratio']
  return [{('noise_stddev' if k == DP_REC_CLIP else k):
           (sigma_for_clip(v, c) if k == DP_REC_CLIP else v)
           for k, v in s.items()} for s in grid]


def tune_point(base, name, clients, settings, tune_seeds, print_fn,
               report_only=False):
  """Tunes one point on the validation split; returns (setting, results).

  `report_only` trains nothing: it reads the stored results, and raises
  `tune_lib.NotTrainedYet` where some are missing.
  """
  tuning = config_lib.RunConfig(**{
      **base.asdict(), 'aggregators': (name,), 'clients_per_round': clients,
      'num_seeds': tune_seeds,
      'seed': base.seed + epsilon_sweep.TUNE_SEED_OFFSET,
      'eval_split': 'validation', 'eval_every': 10**6,
      'output_dir': os.path.join(base.output_dir, 'tune', f'B{clients}',
                                 name)})
  path = os.path.join(tuning.output_dir, f'tune_{name}.json')
  if report_only:
    results = tune_lib.stored_results(tuning, settings, path)
  else:
    os.makedirs(tuning.output_dir, exist_ok=True)
    results = tune_lib.tune(
        tuning, settings, path,
        print_fn=lambda line: print_fn(f'[frontier] {name} B={clients} '
                                       f'tuning: {line}'))
  return epsilon_sweep.choose(results, settings), results


def tune_with_extensions(task, base, name, clients, grid, tune_seeds,
                         extensions, print_fn, report_only=False):
  """Tunes a point, extending its grid past an edge up to `extensions` times.

  Returns (setting, info); setting is None when every setting diverged.
  """
  def announce(setting, step):
    if not report_only:
      print_fn(f'[frontier] {name} B={clients}: best at the edge '
               f'({tune_lib.key(setting)}); trying {tune_lib.key(step)}')

  setting, results, settings, added = tune_lib.tune_past_edges(
      lambda grid_: tune_point(base, name, clients, grid_, tune_seeds,
                               print_fn, report_only),
      point_settings(task, base, name, clients, grid), extensions, announce)
  info = dict(tuned=True,
              edges=tune_lib.edges(setting, settings) if setting else [],
              extended=[tune_lib.key(s) for s in added],
              tune_seconds=sum(results[tune_lib.key(s)].get('seconds', 0.0)
                               for s in settings), validation={
                  tune_lib.key(s): results[tune_lib.key(s)]['mean']
                  for s in settings})
  return setting, info


def run_point(task, base, name, clients, grid, tune_seeds, print_fn,
              extensions=0, report_only=False):
  """Tunes (where there is a grid) and trains one point on the test split.

  Returns (records, info): info has the chosen setting, its validation
  scores, the settings added past an edge and the fields still at the edge
  of the grid. `report_only` trains nothing: it returns the finished runs
  (a note says what is missing).
  """
  setting, info = {}, dict(tuned=False, edges=[], validation={})
  if grid:
    try:
      setting, info = tune_with_extensions(task, base, name, clients, grid,
                                           tune_seeds, extensions, print_fn,
                                           report_only)
    except tune_lib.NotTrainedYet as e:
      return [], dict(info, note=str(e))
    if setting is None:
      print_fn(f'[frontier] {name} B={clients}: every setting diverged.')
      return [], dict(info, note='every tuned setting diverged')
  name_of_setting = epsilon_sweep.setting_name(setting)
  config = config_lib.RunConfig(**{
      **base.asdict(), **setting, 'aggregators': (name,),
      'clients_per_round': clients,
      'output_dir': os.path.join(base.output_dir, f'B{clients}', name,
                                 name_of_setting.replace(' ', '_'))})
  records, captured = _train_or_read(config, name, clients, name_of_setting,
                                     print_fn, report_only)
  info = dict(info, setting=name_of_setting, context=captured)
  if report_only and len(records) < base.num_seeds:
    info['note'] = (f'{name_of_setting}: {len(records)} of {base.num_seeds} '
                    'seeds finished')
  return records, info


def _train_or_read(config, name, clients, label, print_fn, report_only):
  """(records, context) of a point's test runs: trained, or read back."""
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  if report_only:
    return training.finished_records(config), {}
  print_fn(f'[frontier] {name} B={clients}: {label}')
  captured = {}
  records = training.run(config, print_fn=_warnings_only(print_fn),
                         context_out=captured)
  for r in records:
    print_fn(f"[frontier] {name} B={clients} seed {r['seed']}: "
             f"{100 * r['final_metric']:.2f}")
  return records, captured


def _warnings_only(print_fn):
  def say(line='', *_):
    if 'WARNING' in str(line):
      print_fn(line)
  return say


def summarize(points) -> list[dict]:
  """One row per point from (method, B, records, info) tuples."""
  rows = []
  for name, clients, records, info in points:
    row = dict(aggregator=name, clients_per_round=clients,
               setting=info.get('setting', ''), tuned=info.get('tuned', False),
               edge='; '.join(info.get('edges', [])),
               extended='; '.join(info.get('extended', [])),
               note=info.get('note', ''), seeds=len(records))
    if records:
      mean, se = report.mean_se([r['final_metric'] for r in records])
      params = records[0].get('params', {})
      upload = sum(r['upload_gb'] for r in records) / len(records)
      download = sum(r['download_gb'] for r in records) / len(records)
      row.update(
          rounds=max(r['rounds'] for r in records),
          epsilon=max(r['epsilon'] or 0.0 for r in records),
          parameter=_parameter(params),
          relative_noise=relative_noise(records[0]), mean=mean, se=se,
          upload_gb=upload, download_gb=download, total_gb=upload + download,
          seconds_per_round=sum(r['seconds_per_round'] for r in records) /
          len(records),
          train_seconds=sum(r['seconds_per_round'] * r['rounds']
                            for r in records))
    row['tune_seconds'] = info.get('tune_seconds', 0.0)
    rows.append(row)
  return rows


def _parameter(params) -> str:
  if 'clip_ratio' in params:
    return (f"c {params['clip_ratio']:.3f}, sigma {params['noise_stddev']:.4g}"
            f", clip {params['l2_clip']:.3g}")
  if 'noise_multiplier' in params:
    return f"z {params['noise_multiplier']:.3f}, clip {params['l2_clip']:.3g}"
  return ''


def markdown(rows, context: dict, label: str) -> str:
  """The frontier table (one row per point, then the reference rows)."""
  lines = [f'| method | B | setting (validation) | c or z | relative noise '
           f'(x {REFERENCE[0]} at B={REFERENCE[1]}) | {label} (%) | upload '
           'GB | download GB | total GB | s/round |',
           '|---|---|---|---|---|---|---|---|---|---|']
  reference = [r for r in rows if 'mean' in r and
               (r['aggregator'], r['clients_per_round']) == REFERENCE]
  scale = reference[0]['relative_noise'] if reference else None
  for r in rows:
    if 'mean' not in r:
      lines.append(f"| {r['aggregator']} | {r['clients_per_round']} | "
                   f"{r['note']} | | | | | | | |")
      continue
    se = '' if r['se'] is None else f" ± {100 * r['se']:.2f}"
    setting = r['note'] or r['setting']
    if r['tuned']:
      grown = tune_lib.grown_note(
          [k for k in (r.get('extended') or '').split('; ') if k])
      notes = ['tuned'] + ([grown] if grown else [])
      notes += [f"edge: {r['edge']}"] if r['edge'] else []
      setting += ' (' + ', '.join(notes) + ')'
    lines.append(
        f"| {r['aggregator']} | {r['clients_per_round']} | {setting} | "
        f"{r['parameter']} | {_noise(r['relative_noise'], scale)} | "
        f"{100 * r['mean']:.2f}{se} ({r['seeds']} seeds) | "
        f"{r['upload_gb']:.3g} | {r['download_gb']:.3g} | "
        f"{r['total_gb']:.3g} | {r['seconds_per_round']:.2f} |")
  for key, name in (('frequent_tags', report.FREQUENT_TAGS_LABEL),
                    ('initial_metric', report.INITIAL_MODEL_LABEL)):
    if context.get(key) is not None:
      lines.append(f'| {name} | | | | | {100 * context[key]:.2f} | | | | |')
  return '\n'.join(lines) + '\n'


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

  Per DP-REC point: its gap to the reference (SE from both points' SEs,
  independent seeds; none unless both have one), and its upload and total
  traffic as multiples of the reference's. Then the measured break-even:
  the first B whose mean reaches the reference's, with a log-linear
  interpolation between the points that straddle it, or the gap at the
  largest B; then the planner's `predicted` B' (None: not computed).
  Points with a non-finite mean (diverged) are named and left out.
  """
  reference = [r for r in rows if 'mean' in r and
               (r['aggregator'], r['clients_per_round']) == REFERENCE]
  ours = sorted((r for r in rows if r['aggregator'] == 'dp_rec' and
                 'mean' in r), key=lambda r: r['clients_per_round'])
  if not reference or not ours or not math.isfinite(reference[0]['mean']):
    return []
  ref = reference[0]
  name = f'{REFERENCE[0]} at B = {REFERENCE[1]}'
  lines = [f'Against {name} ({100 * ref["mean"]:.2f}%, '
           f'{ref["seeds"]} seeds):', '']
  for r in ours:
    head = f"* dp_rec at B = {r['clients_per_round']} ({r['seeds']} seeds): "
    if not math.isfinite(r['mean']):
      lines.append(head + 'diverged; left out.')
      continue
    lines.append(
        head + f"{_gap(r, ref)} points; upload "
        f"x{r['upload_gb'] / ref['upload_gb']:.3g}, total traffic "
        f"x{r['total_gb'] / ref['total_gb']:.3g}.")
  finite = [r for r in ours if math.isfinite(r['mean'])]
  if finite:
    lines += ['', _measured_break_even(finite, ref, name, label)]
  if predicted is not None:
    lines.append(f'The planner predicted B\' = {predicted:,} (equal noise '
                 'over the clip).')
  return lines


def _gap(row, ref) -> str:
  gap = 100 * (row['mean'] - ref['mean'])
  if row['se'] is None or ref['se'] is None:
    return f'{gap:+.2f}'
  return f"{gap:+.2f} ± {100 * math.hypot(row['se'], ref['se']):.2f}"


def _measured_break_even(ours, ref, name, label) -> str:
  """The measured B at which DP-REC's mean first reaches the reference's."""
  below = None
  for r in ours:
    if r['mean'] >= ref['mean']:
      b = r['clients_per_round']
      if below is None:
        return f'Measured: dp_rec reaches {name} at B = {b} already.'
      b0, m0 = below['clients_per_round'], below['mean']
      t = (ref['mean'] - m0) / (r['mean'] - m0)
      estimate = math.exp(math.log(b0) + t * (math.log(b) - math.log(b0)))
      return (f'Measured: dp_rec reaches {name} between B = {b0} and {b} '
              f'(about {estimate:,.0f}, interpolating its {label} linearly '
              'in log B).')
    below = r
  return (f"Measured: dp_rec stays below {name} up to B = "
          f"{ours[-1]['clients_per_round']}, by {_gap(ours[-1], ref)} points.")


def _noise(value, scale) -> str:
  if value is None:
    return '-'
  return f'{value:.4g}' + ('' if not scale else f' ({value / scale:.2f}x)')


def write(output_dir: str, rows, context: dict, label: str) -> list[str]:
  """Writes frontier.csv, frontier.md (the table and `verdict`) and, once a
  point has finished, frontier.png; each replaced whole (written aside,
  then renamed), so a reader never sees half a file."""
  os.makedirs(output_dir, exist_ok=True)
  csv_path = os.path.join(output_dir, 'frontier.csv')
  fields = list(dict.fromkeys(k for r in rows for k in r))
  with atomic_files.replacing(csv_path, newline='') as f:
    writer = csv.DictWriter(f, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
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
      line, = ax.plot(x, y, marker='o', label=name, color=_COLORS.get(name))
      ax.fill_between(x, [a - b for a, b in zip(y, se)],
                      [a + b for a, b in zip(y, se)],
                      color=line.get_color(), alpha=0.2)
      if key != 'clients_per_round':
        for r in mine:
          ax.annotate(f"B={r['clients_per_round']}", (r[key], 100 * r['mean']),
                      textcoords='offset points', xytext=(4, -10), fontsize=7)
    _reference_lines(ax, reference, context)
    ax.set_xscale('log')
    if key == 'clients_per_round':  # The sizes trained, as plain numbers.
      sizes = sorted({r[key] for r in rows})
      ax.set_xticks(sizes, [str(b) for b in sizes])
      ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.grid(alpha=0.3)
  axes[0].set_ylabel(f'final {label} (%), test split')
  axes[0].legend(fontsize=8, loc='upper left')
  epsilon = max(r['epsilon'] for r in rows)
  fig.suptitle(f'{label} at epsilon {epsilon:.2g}: mean ± SE over seeds',
               fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


# The colours of the other studies' figures (studies.real_images).
_COLORS = {'dp_fedavg': 'tab:orange', 'dp_rec': 'tab:blue',
           'ddgauss16': 'tab:green', 'dp_fedavg_rdp': 'tab:gray'}


def _reference_lines(ax, reference, context):
  if reference:
    ax.axhline(100 * reference[0]['mean'], color=_COLORS[REFERENCE[0]],
               ls='--',
               lw=1, label=f'dp_fedavg at B={REFERENCE[1]}')
  if context.get('frequent_tags') is not None:
    ax.axhline(100 * context['frequent_tags'], color='black', ls=':', lw=1,
               label='frequent tags')


def run_frontier(base, points, grids, tune_seeds, print_fn=print,
                 extensions=0, report_only=False):
  """Every point, cheapest first; returns (points, context, label).

  A tuned grid whose best value sits at an edge is extended one geometric
  step past it, up to `extensions` times (`beyond_edge`). `report_only`
  trains nothing: every point reports the runs that have finished.
  """
  from experiments.data import tasks as tasks_lib  # pylint: disable=g-import-not-at-top
  task = tasks_lib.create_task(base.task, base.data_dir,
                               embedded_config=base.embedded_config,
                               population=base.population)
  order = sorted(((clients, name) for name, sizes in points.items()
                  for clients in sizes),
                 key=lambda p: (p[0], registry.get(p[1]).relative_cost))
  done, context, label = [], {}, 'metric'
  for clients, name in order:
    records, info = run_point(task, base, name, clients,
                              grids.get((name, clients)), tune_seeds,
                              print_fn, extensions, report_only)
    if records:
      context, label = dict(info['context']), records[0]['metric_label']
    done.append((name, clients, records, info))
  if report_only:
    from experiments.runner import training  # pylint: disable=g-import-not-at-top
    context = training.reference_context(task, base)
  if 'dp_rec' in points and REFERENCE[1] in points.get(REFERENCE[0], ()):
    context['predicted_break_even'] = predicted_break_even(task, base,
                                                           print_fn)
  return done, context, label


def predicted_break_even(task, base, print_fn=print):
  """The planner's DP-REC break-even B' against the reference, or None.

  At the reference's B with DP-REC's defaults there (bits from c), through
  the run's calibration cache (`experiments.runner.planning`).
  """
  from experiments.runner import planning  # pylint: disable=g-import-not-at-top
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  config = config_lib.RunConfig(**{
      **base.asdict(), 'aggregators': ('dp_rec',),
      'clients_per_round': REFERENCE[1]}).resolved(task)
  try:
    dp_rec_plan = training.calibrated_aggregator(task, config, 'dp_rec', False)
    result = planning.plan_for_run(task, config, dp_rec_plan)
  except ValueError as e:
    print_fn(f'[frontier] the planner could not plan B = {REFERENCE[1]}: {e}')
    return None
  found = result.dp_rec.break_even
  return None if found is None else found.clients_per_round


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  # TFF's worker_binary dies with this process, even when only a report
  # (which evaluates the initial model) runs.
  worker_reaper.install()
  start = time.time()
  cli_lib.quiet_logs()
  try:
    points = parse_points(_POINTS.value)
    grids = parse_grids(_GRIDS.value, points)
    if _TUNE_SEEDS.value < 1:
      raise ValueError(f'--tune_seeds must be at least 1, found '
                       f'{_TUNE_SEEDS.value}.')
    base = config_lib.RunConfig(
        task=_STUDY.task.value, aggregators=tuple(points),
        data_dir=_STUDY.data_dir.value, output_dir=_STUDY.output_dir.value,
        rounds=_ROUNDS.value, target_epsilon=_TARGET_EPSILON.value,
        num_seeds=_NUM_SEEDS.value, progress=False,
        population=_STUDY.population_value())
    if _EXTEND_EDGES.value < 0:
      raise ValueError(f'--extend_edges must be at least 0, found '
                       f'{_EXTEND_EDGES.value}.')
  except (TypeError, ValueError) as e:
    cli_lib.fail(e)
  done, context, label = run_frontier(base, points, grids, _TUNE_SEEDS.value,
                                      extensions=_EXTEND_EDGES.value,
                                      report_only=_REPORT_ONLY.value)
  rows = summarize(done)
  paths = write(os.path.join(_STUDY.output_dir.value, _STUDY.task.value),
                rows, context, label)
  print(report_text(rows, context, label))
  print('Wrote ' + ', '.join(paths) +
        f'; wall time {time.time() - start:.0f} s.')


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _STUDY, _POINTS, _GRIDS, _ROUNDS, _TARGET_EPSILON, _NUM_SEEDS
  global _TUNE_SEEDS, _EXTEND_EDGES, _REPORT_ONLY
  cli_lib.define_verbose_flag()
  _STUDY = cli_lib.define_study_flags('results/frontier')
  _POINTS = flags.DEFINE_string(
      'points', DEFAULT_POINTS,
      "Each method's clients per round: 'method: B,B; method: B'.")
  _GRIDS = flags.DEFINE_string(
      'grids', DEFAULT_GRIDS,
      "Points tuned on the validation split: 'method@B: grid; ...' "
      "(experiments.tune's syntax; DP-REC also takes clip=...). '' tunes "
      'nothing.')
  _ROUNDS = flags.DEFINE_integer('rounds', None,
                                 'Rounds, the same for all (task default).')
  _TARGET_EPSILON = flags.DEFINE_float('target_epsilon', 1.0,
                                       'Privacy target.')
  _NUM_SEEDS = flags.DEFINE_integer('num_seeds', 3, 'Seeds per point.')
  _TUNE_SEEDS = flags.DEFINE_integer('tune_seeds', 1,
                                     'Seeds per tuned setting.')
  _EXTEND_EDGES = flags.DEFINE_integer(
      'extend_edges', 2,
      'How many times a tuned grid whose best value is its smallest or '
      'largest is extended one geometric step past that edge.')
  _REPORT_ONLY = flags.DEFINE_bool(
      'report_only', False,
      'Train nothing: write the table and figure from the runs that have '
      'finished (safe while another invocation is training; give it the '
      'same --points, --grids and --extend_edges).')


def cli():
  """The command line: `python -m experiments.frontier`."""
  _define_flags()
  with cli_lib.one_line_write_failures():  # A full disk: one line.
    app.run(main)


if __name__ == '__main__':
  cli()
