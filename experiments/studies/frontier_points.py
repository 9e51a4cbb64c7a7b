"""The frontier's points: which (method, B) to train, and how.

`parse_points` and `parse_grids` read `--points` and `--grids`;
`run_point` tunes one point on the validation split where it has a grid
(growing the grid past an edge, `tune_with_extensions`), or takes the
setting of the protocol it simulates in law (a cross-check), then trains
its seeds on the test split, or, with `report_only`, reads what finished.
"""

import os
import re

from experiments.runner import config as config_lib
from experiments.runner import registry
from experiments.studies import tuning

# DP-FedAvg (RDP), DDGauss's reference, splits it (`split_lines`).
DEFAULT_POINTS = ('dp_rec: 40,160,640,2560; '
                  'dp_rec_in_law: 640,2560,4096,10240; '
                  'dp_fedavg: 40,160,640,2560; '
                  'ddgauss16: 40,160,640; dp_fedavg_rdp: 40,640')
# Every point above B = 40 tunes its clip (DP-REC: its clip c sigma) on the
# validation split; B = 40 takes the task defaults, tuned there
# (docs/EXPERIMENTS.md, "The frontier", says why each grid is where it is).
DEFAULT_GRIDS = ('dp_rec@160: clip=0.01,0.02,0.05; '
                 'dp_rec@640: clip=0.025,0.05,0.1; '
                 'dp_rec@2560: clip=0.1,0.2,0.4; '
                 'dp_rec_in_law@4096: clip=0.2,0.4,0.8; '
                 'dp_rec_in_law@10240: clip=0.4,0.8,1.6; '
                 'dp_fedavg@160: l2_clip=0.2,0.5,1,2; '
                 'dp_fedavg@640: l2_clip=0.2,0.5,1,2; '
                 'dp_fedavg@2560: l2_clip=0.2,0.5,1; '
                 'ddgauss16@160: l2_clip=0.2,0.5,1,2; '
                 'ddgauss16@640: l2_clip=0.2,0.5,1,2; '
                 'dp_fedavg_rdp@640: l2_clip=0.2,0.5,1,2')
DP_REC_CLIP = 'clip'


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
      raise tuning.GridError(
          f'--grids: {part.strip()!r} is not "method@B: grid".')
    clients = parse_sizes([size], 'grids')[0]
    if clients not in points.get(name, ()):
      raise tuning.GridError(
          f'--grids: {head.strip()!r} is not a point of --points.')
    if (name, clients) in grids:
      raise tuning.GridError(f'--grids: {head.strip()!r} has two grids.')
    protocol = registry.protocol(name)
    if protocol != name and clients in points.get(protocol, ()):
      raise tuning.GridError(
          f'--grids: {head.strip()!r} trains the setting chosen for '
          f'{protocol}@{clients} (a cross-check of the two); it takes no '
          'grid of its own.')
    settings = _parse_settings(grid, name)
    grids[(name, clients)] = settings
  return grids


def _parse_settings(grid, name):
  """`experiments.tune`'s grid; DP-REC's `clip=` kept as the key 'clip'."""
  dp_rec = registry.protocol(name) == 'dp_rec'
  if dp_rec:  # Its l2_clip is c sigma: `clip=` names it.
    grid = re.sub(r'(^|\s)clip=', r'\1l2_clip=', grid)
  settings = tuning.parse_grid(grid)
  if dp_rec:
    settings = [{(DP_REC_CLIP if k == 'l2_clip' else k): v
                 for k, v in s.items()} for s in settings]
  for setting in settings:
    for field in ('target_epsilon', 'accounting', 'rounds',
                  'clients_per_round'):
      if field in setting:
        raise tuning.GridError(
            f'--grids: {name}: {field!r} defines the point; it cannot vary.')
  return settings


def sigma_for_clip(clip: float, clip_ratio: float) -> float:
  """DP-REC's prior sigma giving the clip `clip` at c: clip / c, 4 decimals."""
  sigma = round(clip / clip_ratio, 4)
  if sigma <= 0:
    raise ValueError(f'clip={clip} at c={clip_ratio:.4g} gives sigma '
                     f'{clip / clip_ratio:.3g}, below 0.0001.')
  return sigma


def point_settings(task, base, name, clients, grid) -> list:
  """The grid's settings as RunConfig fields (DP-REC's clips as sigmas)."""
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  if (registry.protocol(name) != 'dp_rec' or
      not any(DP_REC_CLIP in s for s in grid)):
    return [dict(s) for s in grid]
  config = config_lib.RunConfig(**{**base.asdict(), 'aggregators': (name,),
                                   'clients_per_round': clients})
  c = run_setup.calibrated_aggregator(task, config.resolved(task), name,
                        False).params['clip_ratio']
  return [{('noise_stddev' if k == DP_REC_CLIP else k):
           (sigma_for_clip(v, c) if k == DP_REC_CLIP else v)
           for k, v in s.items()} for s in grid]


def tune_point(base, name, clients, settings, tune_seeds, print_fn,
               report_only=False):
  """Tunes one point on the validation split; returns (setting, results).

  `report_only` trains nothing: it reads the stored results, and raises
  `tuning.NotTrainedYet` where some are missing.
  """
  tuning_config = config_lib.RunConfig(**{
      **base.asdict(), 'aggregators': (name,), 'clients_per_round': clients,
      'num_seeds': tune_seeds,
      'seed': base.seed + tuning.TUNE_SEED_OFFSET,
      'eval_split': 'validation', 'eval_every': 10**6,
      'output_dir': os.path.join(base.output_dir, 'tune', f'B{clients}',
                                 name)})
  path = os.path.join(tuning_config.output_dir, f'tune_{name}.json')
  if report_only:
    results = tuning.stored_results(tuning_config, settings, path)
  else:
    os.makedirs(tuning_config.output_dir, exist_ok=True)
    results = tuning.tune(
        tuning_config, settings, path,
        print_fn=lambda line: print_fn(f'[frontier] {name} B={clients} '
                                       f'tuning: {line}'))
  return tuning.choose(results, settings), results


def tune_with_extensions(task, base, name, clients, grid, tune_seeds,
                         extensions, print_fn, report_only=False):
  """Tunes a point, extending its grid past an edge up to `extensions` times.

  Returns (setting, info); setting is None when every setting diverged.
  """
  def announce(setting, step):
    if not report_only:
      print_fn(f'[frontier] {name} B={clients}: best at the edge '
               f'({tuning.key(setting)}); trying {tuning.key(step)}')

  setting, results, settings, added = tuning.tune_past_edges(
      lambda grid_: tune_point(base, name, clients, grid_, tune_seeds,
                               print_fn, report_only),
      point_settings(task, base, name, clients, grid), extensions, announce)
  info = dict(tuned=True,
              edges=tuning.edges(setting, settings) if setting else [],
              extended=[tuning.key(s) for s in added],
              tune_seconds=sum(results[tuning.key(s)].get('seconds', 0.0)
                               for s in settings), validation={
                  tuning.key(s): results[tuning.key(s)]['mean']
                  for s in settings})
  return setting, info


def run_point(task, base, name, clients, grid, tune_seeds, print_fn,
              extensions=0, report_only=False, shared=None):
  """Tunes (where there is a grid) and trains one point on the test split.

  A grid of one setting is trained as given, untuned (info['fixed']).
  Returns (records, info): info has the chosen setting, its validation
  scores, the settings added past an edge and the fields still at the edge
  of the grid. `report_only` trains nothing: it returns the finished runs
  (a note says what is missing). `shared` (a simulation in law at a B where
  the protocol it simulates has a point): that point's info, whose setting
  it trains as is, untuned, so that the two modes can be compared.
  """
  setting, info = {}, dict(tuned=False, edges=[], validation={})
  if shared is not None:
    if 'chosen' not in shared:
      return [], dict(info, note=f"{registry.protocol(name)}'s setting is "
                      'not chosen yet')
    setting = shared['chosen']
    info['shared_with'] = registry.protocol(name)
  elif grid and len(grid) == 1:
    # One setting: nothing to choose, so no validation run.
    setting = point_settings(task, base, name, clients, grid)[0]
    info['fixed'] = True
  elif grid:
    try:
      setting, info = tune_with_extensions(task, base, name, clients, grid,
                                           tune_seeds, extensions, print_fn,
                                           report_only)
    except tuning.NotTrainedYet as e:
      return [], dict(info, note=str(e))
    if setting is None:
      print_fn(f'[frontier] {name} B={clients}: every setting diverged.')
      return [], dict(info, note='every tuned setting diverged')
  name_of_setting = tuning.setting_name(setting)
  info['chosen'] = setting
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
  from experiments.runner import finished  # pylint: disable=g-import-not-at-top
  if report_only:
    return finished.finished_records(config), {}
  print_fn(f'[frontier] {name} B={clients}: {label}')
  captured = {}
  records = training.run(config, print_fn=tuning.warnings_only(print_fn),
                         context_out=captured)
  for r in records:
    print_fn(f"[frontier] {name} B={clients} seed {r['seed']}: "
             f"{100 * r['final_metric']:.2f}")
  return records, captured

