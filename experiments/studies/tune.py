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

import os

from absl import app
from absl import flags
# As in experiments.run: Keras models built after a TensorFlow import under
# `app.run` fail to build (empty inbound nodes).
import tensorflow as tf  # pylint: disable=unused-import  # noqa: F401

from experiments.runner import cli as cli_lib
from experiments.runner import config as config_lib
from experiments.studies import tuning
from tff_dprec import worker_reaper


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  # TFF's worker_binary dies with this process, even when only a report
  # (which evaluates the initial model) runs.
  worker_reaper.install()
  try:
    settings = tuning.parse_grid(_GRID.value)
    base = config_lib.RunConfig(
        task=_STUDY.task.value, aggregators=(_AGGREGATOR.value,),
        data_dir=_STUDY.data_dir.value, output_dir=_STUDY.output_dir.value,
        rounds=_ROUNDS.value, clients_per_round=_CLIENTS.value,
        target_epsilon=_EPSILON.value, num_seeds=_NUM_SEEDS.value,
        # Scored by the final evaluation only: no intermediate ones.
        eval_split='validation', eval_every=10**6, progress=False,
        population=_STUDY.population_value())
  except (tuning.GridError, TypeError, ValueError) as e:
    cli_lib.fail(e)
  cli_lib.quiet_logs()
  os.makedirs(os.path.join(base.output_dir, base.task), exist_ok=True)
  path = os.path.join(base.output_dir, base.task,
                      f'tune_{_AGGREGATOR.value}.json')
  results = tuning.tune(base, settings, path)
  fingerprint = tuning.base_fingerprint(base)
  ranked = sorted((r for r in results.values()
                   if tuning.ran_under(r, fingerprint)),
                  key=lambda r: -r['mean'])
  print(f'\n{_AGGREGATOR.value} on {base.task}, validation split '
        f'({base.num_seeds} seed(s) each), best first:')
  for r in ranked:
    print(f"  {100 * r['mean']:6.2f}%  {tuning.key(r['setting'])}  "
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

