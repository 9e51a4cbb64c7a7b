"""The attribution study's schedule: the neighbour checks, and the rows
trained block by block, seed by seed, side by side where `--jobs` allows
(`pack`)."""

import os

from experiments.runner import finished
from experiments.studies import attribution_rows as rows_lib
from experiments.studies import tuning


def check_neighbours(base, log, report_only=False) -> dict:
  """{method: {setting: validation accuracy}} at 1,000 rounds (what has
  finished when `report_only`)."""
  if not report_only and base.jobs > 1:
    _neighbours_side_by_side(base, log)
  out = {}
  for name in rows_lib.NEIGHBOURS:
    config = rows_lib.neighbours_config(base, name)
    path = os.path.join(config.output_dir, f'tune_{name}.json')
    settings = rows_lib.neighbour_settings(name)
    if report_only:
      results = {k: v for k, v in tuning.read_results(path).items()
                 if tuning.ran_under(v, tuning.base_fingerprint(config))}
    else:
      os.makedirs(config.output_dir, exist_ok=True)
      results = tuning.tune(config, settings, path, print_fn=lambda line,
                              n=name: log(f'[attribution] {n}: {line}'))
    out[name] = {tuning.key(s): results[tuning.key(s)]['mean']
                 for s in settings if tuning.key(s) in results}
  return out


def _neighbours_side_by_side(base, log) -> None:
  """Trains the neighbour settings that have no stored result, `base.jobs`
  at a time, each in its own process; `tuning.tune` then finds their
  runs finished and stores their results."""
  from experiments.runner import jobs  # pylint: disable=g-import-not-at-top
  units = []
  for name in rows_lib.NEIGHBOURS:
    config = rows_lib.neighbours_config(base, name)
    stored = tuning.read_results(os.path.join(config.output_dir,
                                                f'tune_{name}.json'))
    fingerprint = tuning.base_fingerprint(config)
    for setting in rows_lib.neighbour_settings(name):
      if tuning.ran_under(stored.get(tuning.key(setting), {}),
                            fingerprint):
        continue
      run_config = tuning.setting_config(config, setting)
      if not finished.finished_runs(run_config):
        units.append((f'{name} {tuning.key(setting)}', run_config, 1))
  for group in pack(units, base.jobs):
    if len(group) > 1:  # One alone: `tuning.tune` trains it.
      log('[attribution] neighbours side by side: ' +
          '; '.join(label for label, _, _ in group))
      jobs.run_side_by_side([c for _, c, _ in group],
                            print_fn=_progress_only(log))


def train(base, rows, target, log, blocks=rows_lib.BLOCKS) -> None:
  """Trains the rows of `blocks` in order, seed by seed within a block
  (`base.jobs` seeds of a row at a time; a row's last odd seed beside the
  next row's, `pack`)."""
  from experiments.runner import jobs  # pylint: disable=g-import-not-at-top
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  for block in blocks:
    if block == 'neighbours':
      check_neighbours(base, log)
      continue
    units = []
    for first in range(0, max(r.seeds for r in rows if r.block == block),
                       base.jobs):
      for row in (r for r in rows if r.block == block):
        count = min(base.jobs, row.seeds - first)
        if count > 0:
          config = rows_lib.row_config(base, row, target[row.key], first, count)
          left = count - len(finished.finished_runs(config))
          if left:
            units.append((row, config, left))
    for group in pack(units, base.jobs):
      for row, config, _ in group:
        log(f'[attribution] {row.key}: seeds {config.seed}-'
            f'{config.seed + config.num_seeds - 1}, target epsilon '
            f'{target[row.key]:g}, '
            f'{tuning.key(row.setting) or "task defaults"}'
            f'{" (side by side)" if len(group) > 1 else ""}')
      configs = [config for _, config, _ in group]
      if len(configs) > 1:
        jobs.run_side_by_side(configs, print_fn=_progress_only(log))
      else:
        # `training.run` trains in this process; `jobs.run` spreads the
        # seeds over `config.jobs` processes.
        (jobs.run if configs[0].jobs > 1 else training.run)(
            configs[0], print_fn=_progress_only(log))


def pack(units, jobs: int) -> list:
  """Groups (row or label, config, runs left) units, in order, into groups
  of at most `jobs` runs: each group takes the first unit left and then the
  next ones that still fit (a row's odd seed beside the next row's)."""
  left, groups = list(units), []
  while left:
    group = [left.pop(0)]
    room = jobs - group[0][2]
    i = 0
    while room > 0 and i < len(left):
      if left[i][2] <= room:
        room -= left[i][2]
        group.append(left.pop(i))
      else:
        i += 1
    groups.append(group)
  return groups


def _progress_only(log):
  """A run's lines that tell how a study goes: warnings, resumes, lost
  rounds and each seed's final line."""
  keep = ('WARNING', 'resuming after', 'lost', ': final ', 'continues at')

  def say(line='', *_):
    if any(k in str(line) for k in keep):
      log(line)
  return say


def finished_records(base, rows, target, task=None) -> dict:
  """{row key: records (with their curves) of its finished runs}; trains
  nothing (`task`: see `finished.finished_runs`)."""
  out = {}
  for row in rows:
    config = rows_lib.row_config(base, row, target[row.key])
    out[row.key] = [dict(done['record'], curve=done['curve'])
                    for done in finished.finished_runs(config, task)]
  return out
