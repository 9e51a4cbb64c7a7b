r"""Grid search of an aggregator's free parameters on the validation split.

  python -m experiments.tune --task=stackoverflow_lr --aggregator=dp_fedavg \
      --grid='server_optimizer=sgdm server_lr=0.3,1,3 | server_optimizer=adam
              server_lr=0.01,0.03' --rounds=20 --clients_per_round=50

A grid is one or more '|'-separated blocks; each block is the product of its
`name=v1,v2,...` settings (any `RunConfig` field: server_lr, server_optimizer,
server_momentum, client_lr, l2_clip, noise_stddev, bits, grouping, ...). Every
setting trains `--num_seeds` seeds at the same privacy target as the main job
and is scored by the final metric on the task's *validation* split (SO-LR's
held-out clients, digits' 180 held-out examples), never the test split; the
test split is used only by `experiments.run`.

Writes `<output_dir>/<task>/tune_<aggregator>.json` (every setting's validation
metric per seed, and the configuration it ran under) and prints the ranking.
Settings already in that file under the same configuration (population,
rounds, clients per round, epsilon, seeds, ...) are not rerun; a setting found
under another configuration is rerun and replaced.

Privacy cost of tuning: each setting is a separate private training run on the
same training clients, so publishing the chosen model spends the privacy of
every run tried (basic composition: k settings at epsilon each cost k * epsilon
in total), unless the selection itself is made private (Abadi et al. 2016,
App. D; Papernot and Steinke 2022). The DP-REC paper also tuned on its
validation data without accounting for it. docs/EXPERIMENTS.md says what the
main job's defaults were tuned with.
"""

import itertools
import json
import os
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
  raise GridError(f'--grid: {name!r} cannot be tuned; choose from '
                  f'{_FLOAT_FIELDS + _INT_FIELDS + _STR_FIELDS + ("grouping",)}.')


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
  a field `_NEUTRAL` now lists, such as `data_dir`, still match)."""
  stored = result.get('base')
  if not isinstance(stored, dict):
    return False
  return {k: v for k, v in stored.items() if k not in _NEUTRAL} == fingerprint


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


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  # TFF's worker_binary dies with this process, even when only a report
  # (which evaluates the initial model) runs.
  worker_reaper.install()
  try:
    settings = parse_grid(_GRID.value)
    base = config_lib.RunConfig(
        task=_STUDY.task.value, aggregators=(_AGGREGATOR.value,),
        data_dir=_STUDY.data_dir.value, output_dir=_STUDY.output_dir.value,
        rounds=_ROUNDS.value, clients_per_round=_CLIENTS.value,
        target_epsilon=_EPSILON.value, num_seeds=_NUM_SEEDS.value,
        # Scored by the final evaluation only: no intermediate ones.
        eval_split='validation', eval_every=10**6, progress=False,
        population=_STUDY.population_value())
  except (GridError, TypeError, ValueError) as e:
    cli_lib.fail(e)
  cli_lib.quiet_logs()
  os.makedirs(os.path.join(base.output_dir, base.task), exist_ok=True)
  path = os.path.join(base.output_dir, base.task,
                      f'tune_{_AGGREGATOR.value}.json')
  results = tune(base, settings, path)
  fingerprint = base_fingerprint(base)
  ranked = sorted((r for r in results.values()
                   if ran_under(r, fingerprint)), key=lambda r: -r['mean'])
  print(f'\n{_AGGREGATOR.value} on {base.task}, validation split '
        f'({base.num_seeds} seed(s) each), best first:')
  for r in ranked:
    print(f"  {100 * r['mean']:6.2f}%  {key(r['setting'])}  "
          f"params={r['params']}")
  print(f'Results in {path}. Tuning spent the privacy of {len(results)} '
        'runs on the training clients (module doc).')


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _STUDY, _AGGREGATOR, _GRID, _ROUNDS, _CLIENTS, _EPSILON, _NUM_SEEDS
  _STUDY = cli_lib.define_study_flags('output/tune')
  _AGGREGATOR = flags.DEFINE_string('aggregator', 'dp_fedavg',
                                    'The aggregator to tune.')
  _GRID = flags.DEFINE_string('grid', None, 'The grid (see the module doc).')
  _ROUNDS = flags.DEFINE_integer('rounds', None, 'Rounds (task default).')
  _CLIENTS = flags.DEFINE_integer('clients_per_round', None,
                                  'Clients per round (task default).')
  _EPSILON = flags.DEFINE_float('target_epsilon', 1.0, 'Privacy target.')
  _NUM_SEEDS = flags.DEFINE_integer('num_seeds', 1, 'Seeds per setting.')

