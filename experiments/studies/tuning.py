"""Tuning on the validation split, shared by every study that tunes.

Grids (`parse_grid`: '|'-separated blocks of `name=v1,v2` products over
`RunConfig` fields), the settings' results stored with the configuration
they ran under (`tune`, `stored_results`), the choice rule (`choose`: the
best mean; a diverged setting or one outside the privacy idealisation is not
eligible), grids grown past an edge (`tune_past_edges`), setting names, the
seed offset of tuning runs, and a filter that keeps a run's warnings.
`python -m experiments.tune` is the command line (`experiments.studies.tune`).
"""

import itertools
import json
import math
import os
import time
from typing import Optional

from experiments.infra import atomic_files
from experiments.runner import config as config_lib
from tff_dprec import rec
from tff_dprec.accounting import accountings

# Tuning runs take seeds from here on: their client samples and noise are
# not the test runs' (seeds 0, 1, ...).
TUNE_SEED_OFFSET = 1000

_FLOAT_FIELDS = ('server_lr', 'client_lr', 'l2_clip', 'noise_stddev',
                 'server_momentum', 'target_epsilon')
_INT_FIELDS = ('bits', 'rounds', 'clients_per_round')
_STR_FIELDS = ('server_optimizer', 'accounting')


class GridError(ValueError):
  """The --grid text cannot be parsed."""


def parse_grid(text: str) -> list[dict]:
  """The settings of a grid text, in order (see the module doc)."""
  if not text or not text.strip():
    raise GridError('--grid is empty.')
  settings = []
  for block in text.split('|'):
    axes = []
    for item in block.split():
      name, sep, values = item.partition('=')
      if not sep or not values:
        raise GridError(f'--grid: {item!r} is not name=v1,v2,...')
      axes.append([(name, _value(name, v)) for v in values.split(',')])
    if not axes:
      raise GridError(f'--grid has an empty block in {text!r}.')
    settings.extend(dict(combo) for combo in itertools.product(*axes))
  return settings


def _value(name, text):
  try:
    if name in _FLOAT_FIELDS:
      return float(text)
    if name in _INT_FIELDS:
      return int(text)
  except ValueError:
    raise GridError(f'--grid: {name}={text!r} is not a number.') from None
  if name == 'grouping':
    return text if text in ('tensor', 'network') else int(text)
  if name in _STR_FIELDS:
    return text
  tunable = _FLOAT_FIELDS + _INT_FIELDS + _STR_FIELDS + ('grouping',)
  raise GridError(f'--grid: {name!r} cannot be tuned; choose from '
                  f'{tunable}.')


def key(setting: dict) -> str:
  return ' '.join(f'{k}={setting[k]}' for k in sorted(setting))


# Fields that do not change a result: where it is written, how it is spread
# over processes, and where the data lies (a run's own fingerprint names
# the data by task, source and population, `run_params.fingerprint_config`,
# so a study moved to another machine or folder reuses its runs).
_NEUTRAL = ('output_dir', 'progress', 'jobs', 'job_runs', 'data_dir')


def base_fingerprint(base: config_lib.RunConfig) -> dict:
  """What a stored result must have run under to be reused (JSON types)."""
  fields = {k: v for k, v in base.asdict().items() if k not in _NEUTRAL}
  return json.loads(json.dumps(fields, sort_keys=True, default=str))


def ran_under(result: dict, fingerprint: dict) -> bool:
  """Whether a stored result ran under `fingerprint` (results stored with
  a field `_NEUTRAL` now lists, such as `data_dir`, or with an accounting's
  earlier name, such as 'pld', still match)."""
  stored = result.get('base')
  if not isinstance(stored, dict):
    return False
  stored = {k: (accountings.renamed(v) if k == 'accounting' else v)
            for k, v in stored.items() if k not in _NEUTRAL}
  return stored == fingerprint


def read_results(results_path: str) -> dict:
  """The results stored at `results_path` ({} before the first)."""
  if not os.path.exists(results_path):
    return {}
  with open(results_path) as f:
    return json.load(f)


class NotTrainedYet(Exception):
  """A report-only call met settings that have no stored result yet."""


def stored_results(base: config_lib.RunConfig, settings: list,
                   results_path: str) -> dict:
  """The results `tune` stored for `settings` under `base`; trains nothing.

  Raises:
    NotTrainedYet: Naming how many settings have no result under `base`.
  """
  fingerprint = base_fingerprint(base)
  results = {k: v for k, v in read_results(results_path).items()
             if ran_under(v, fingerprint)}
  missing = [key(s) for s in settings if key(s) not in results]
  if missing:
    raise NotTrainedYet(f'{len(missing)} of {len(settings)} tuning settings '
                        f'not trained yet ({", ".join(missing)})')
  return results


def setting_config(base: config_lib.RunConfig,
                   setting: dict) -> config_lib.RunConfig:
  """The configuration `tune` trains `setting` with, in its own folder."""
  return config_lib.RunConfig(**{
      **base.asdict(), **setting,
      'output_dir': os.path.join(base.output_dir, 'runs',
                                 key(setting).replace(' ', '_'))})


def tune(base: config_lib.RunConfig, settings: list, results_path: str,
         print_fn=print) -> dict:
  """Trains every setting not yet in `results_path`; returns all results.

  A stored result is reused only if it ran under the same configuration
  (`base_fingerprint`); otherwise the setting is rerun and replaced.
  """
  # Imported here: TFF takes seconds to import, flag errors should not wait.
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  results = read_results(results_path)
  fingerprint = base_fingerprint(base)
  for setting in settings:
    name = key(setting)
    if name in results and ran_under(results[name], fingerprint):
      continue
    if name in results:
      print_fn(f'{name}: stored result ran under another configuration; '
               'rerunning.')
    start = time.time()
    records = training.run(setting_config(base, setting),
                           print_fn=lambda *a: None)
    metrics = [r['final_metric'] for r in records]
    results[name] = dict(setting=setting, metrics=metrics,
                         mean=sum(metrics) / len(metrics),
                         epsilon=max(r['epsilon'] or 0.0 for r in records),
                         params=records[0]['params'],
                         seconds=time.time() - start, base=fingerprint)
    print_fn(f'{name}: validation {100 * results[name]["mean"]:.2f}% '
             f'({time.time() - start:.0f} s)')
    atomic_files.write_json(results_path, results)
  return results


def _numbers(settings, field):
  """The sorted distinct values of `field`, or None unless every setting
  has it as a number (not a bool)."""
  values = [s.get(field) for s in settings]
  if any(isinstance(v, bool) or not isinstance(v, (int, float)) or v != v
         for v in values):
    return None
  return sorted(set(values))


def grown_note(added) -> str:
  """How `tune_past_edges` grew a grid, for a table: '' if it did not.

  `added` lists the settings' keys in the order they were added (each one
  geometric step past the edge the best value sat on).
  """
  if not added:
    return ''
  return 'grid grown past its edge to ' + ', then '.join(added)


def edges(chosen: dict, settings) -> list[str]:
  """The varied numeric fields of a grid whose chosen value is its smallest
  or largest ('noise_stddev (largest)'); [] inside the grid or untuned."""
  out = []
  for field in sorted(chosen):
    values = _numbers(settings, field)
    if values and len(values) > 1 and chosen[field] in (values[0],
                                                        values[-1]):
      side = 'smallest' if chosen[field] == values[0] else 'largest'
      out.append(f'{field} ({side})')
  return out


def beyond_edge(chosen: dict, settings):
  """One geometric step past the edge the chosen setting sits on, or None.

  Only for a grid that varies one field, in every setting, over positive
  numbers: with the values sorted, a chosen smallest v0 gives v0^2 / v1 and
  a chosen largest v gives v^2 / (the one before), to 4 significant digits
  (an int field's step is rounded to an int, at least one past the edge).
  None when the setting is inside the grid, the grid varies several fields,
  has one value or mixes types, or the step is not a new positive value.
  """
  varied = [f for f in chosen
            if len({repr(s.get(f)) for s in settings}) > 1]
  if len(varied) != 1:
    return None
  field = varied[0]
  values = _numbers(settings, field)
  if values is None or values[0] <= 0:
    return None
  if chosen[field] == values[0]:
    step, edge, way = values[0] ** 2 / values[1], values[0], -1
  elif chosen[field] == values[-1]:
    step, edge, way = values[-1] ** 2 / values[-2], values[-1], 1
  else:
    return None
  if all(isinstance(v, int) for v in values):
    step = int(round(step))
    step = edge + way if (step - edge) * way < 1 else step
  else:
    step = float(f'{step:.4g}')
  if step <= 0 or step in values:
    return None
  return {**chosen, field: step}


def tune_past_edges(tune_grid, settings: list, extensions: int,
                    announce=lambda chosen, step: None):
  """Tunes `settings`; grows the grid past an edge, `extensions` times at most.

  Args:
    tune_grid: settings -> (chosen setting or None, results by `key`); it
      reuses results it already has, so each call trains only new settings.
    settings: The grid.
    extensions: How many steps past an edge (`beyond_edge`) to add at most.
    announce: Called with (chosen, step) before each step is tried.

  Returns:
    (chosen, results, settings, added): the final choice and results, the
    grid with the added steps, and the added steps.
  """
  chosen, results = tune_grid(settings)
  added = []
  while chosen and len(added) < extensions:
    step = beyond_edge(chosen, settings)
    if step is None:
      break
    announce(chosen, step)
    settings, added = settings + [step], added + [step]
    chosen, results = tune_grid(settings)
  return chosen, results, settings, added


def choose(results: dict, settings) -> Optional[dict]:
  """The best-scoring setting of `settings` in tune `results` (first on ties).

  Settings whose calibrated clip ratio is outside the idealisation, and
  settings with a non-finite mean (a diverged run), are not eligible.
  Returns `{}` (the defaults) for an empty grid; None when no setting is
  eligible.
  """
  if not settings:
    return {}
  best, best_mean = None, -math.inf
  for setting in settings:
    result = results[key(setting)]
    if (outside_idealisation(result.get('params', {})) or
        not math.isfinite(result['mean'])):
      continue
    if result['mean'] > best_mean:
      best, best_mean = setting, result['mean']
  return best


def outside_idealisation(params) -> bool:
  """Whether params carry a clip ratio that is not below the limit (or NaN)."""
  c = params.get('clip_ratio')
  return c is not None and not c < rec.IDEALISED_CLIP_RATIO_LIMIT


def setting_name(setting: dict) -> str:
  """'l2_clip=0.2 server_lr=10.0', or 'task defaults' for no setting."""
  return key(setting) or 'task defaults'


def warnings_only(print_fn):
  """A print function that passes on only a run's WARNING lines."""
  def say(line='', *_):
    if 'WARNING' in str(line):
      print_fn(line)
  return say
