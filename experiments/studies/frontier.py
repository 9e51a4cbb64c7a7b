r"""When does DP-REC pay? Utility against clients per round and traffic.

  python -m experiments.frontier --task=stackoverflow_lr --num_seeds=3

At one privacy target (epsilon 1) and the same rounds T, trains each method
at each of its clients per round B (`--points`, default DP-REC and
DP-FedAvg at 40, 160, 640 and 2560, DDGauss16 at 40, 160 and 640,
DP-FedAvg under RDP, DDGauss's reference, at 40 and 640, and DP-REC
simulated in law (`dp_rec_in_law`: its decoded updates drawn exactly in
law, floats sent, at about DP-FedAvg's cost) at 640, 2560, 4096 and 10240),
each calibrated to the target at its own B. Where the real codec has a
point at the same B, the in-law point trains the real codec's chosen
setting as is: a cross-check of the two modes (`verdict`). DP-REC's noise on the
averaged update, over its clip, is 1 / (c sqrt(B)); DP-FedAvg's is z / B; c
barely falls with B, so at some B DP-REC's noise meets DP-FedAvg's at B = 40
(`python -m tff_dprec.plan` predicts where), for a fraction of its upload.

Each point's free parameters are chosen on the validation split where
`--grids` names the point (`method@B: grid`, `experiments.tune`'s syntax;
DP-REC's grid may be in `clip=` values, its clip c sigma, turned into
`noise_stddev = clip / c(B)` rounded to 4 decimals at the point's own c:
the clip is what matters once B is large, since the noise over the clip is
fixed by c and B). A grid of one setting is not tuned: the point trains
it as given, and the table says so. Tuning runs train `--tune_seeds` seeds from
`tuning.TUNE_SEED_OFFSET` on, scored on the validation split, in
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
planner's relative noise, metric +- standard error, the fewest rounds a
seed trained and the rounds its seeds lost to interruptions, upload,
download and total GB per run, s/round; then, against DP-FedAvg at B =
40, each DP-REC point's gap with its SE and traffic ratios, the
cross-checks of the two modes, the measured break-even over DP-REC's
points (`break_even`), and the planner's predicted B'; then DDGauss16 -
DP-FedAvg as mechanism plus accountant, `split_lines`)
and `frontier.png` (the metric against upload GB, total GB and B, log x,
with standard-error bands and DP-FedAvg's B = 40 level).
"""

import os
import time

from absl import app
from absl import flags
# As in experiments.run: Keras models built after a TensorFlow import under
# `app.run` fail to build (empty inbound nodes).
import tensorflow as tf  # pylint: disable=unused-import  # noqa: F401

from experiments.runner import cli as cli_lib
from experiments.runner import config as config_lib
from experiments.runner import registry
from experiments.studies import frontier_points as points_lib
from experiments.studies import frontier_report as report_lib
from tff_dprec import worker_reaper


def run_frontier(base, points, grids, tune_seeds, print_fn=print,
                 extensions=0, report_only=False):
  """Every point, cheapest first; returns (points, context, label).

  A tuned grid whose best value sits at an edge is extended one geometric
  step past it, up to `extensions` times (`beyond_edge`). `report_only`
  trains nothing: every point reports the runs that have finished.
  """
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  from experiments.data import tasks as tasks_lib  # pylint: disable=g-import-not-at-top
  task = tasks_lib.create_task(base.task, base.data_dir,
                               embedded_config=base.embedded_config,
                               population=base.population)
  order = sorted(((clients, name) for name, sizes in points.items()
                  for clients in sizes),
                 key=lambda p: (p[0], registry.get(p[1]).in_law,
                                registry.get(p[1]).relative_cost))
  done, context, label = [], {}, 'metric'
  infos = {}
  for clients, name in order:
    shared = infos.get((registry.protocol(name), clients)) if (
        registry.get(name).in_law) else None
    records, info = points_lib.run_point(
        task, base, name, clients, grids.get((name, clients)), tune_seeds,
        print_fn, extensions, report_only, shared)
    infos[(name, clients)] = info
    if records:
      context, label = dict(info['context']), records[0]['metric_label']
    done.append((name, clients, records, info))
  if report_only:
    context = run_setup.reference_context(task, base)
  reference_name, reference_clients = report_lib.REFERENCE
  if 'dp_rec' in points and reference_clients in points.get(reference_name,
                                                            ()):
    context['predicted_break_even'] = predicted_break_even(task, base,
                                                           print_fn)
  return done, context, label


def predicted_break_even(task, base, print_fn=print):
  """The planner's DP-REC break-even B' against the reference, or None.

  At the reference's B with DP-REC's defaults there (bits from c), through
  the run's calibration cache (`experiments.runner.planning`).
  """
  from experiments.runner import planning  # pylint: disable=g-import-not-at-top
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  clients = report_lib.REFERENCE[1]
  config = config_lib.RunConfig(**{
      **base.asdict(), 'aggregators': ('dp_rec',),
      'clients_per_round': clients}).resolved(task)
  try:
    dp_rec_aggregator = run_setup.calibrated_aggregator(
        task, config, 'dp_rec', False)
    result = planning.plan_for_run(task, config, dp_rec_aggregator)
  except ValueError as e:
    print_fn(f'[frontier] the planner could not plan B = {clients}: {e}')
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
    points = points_lib.parse_points(_POINTS.value)
    grids = points_lib.parse_grids(_GRIDS.value, points)
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
  rows = report_lib.summarize(done)
  paths = report_lib.write(
      os.path.join(_STUDY.output_dir.value, _STUDY.task.value), rows, context,
      label)
  print(report_lib.report_text(rows, context, label))
  print('Wrote ' + ', '.join(paths) +
        f'; wall time {time.time() - start:.0f} s.')


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _STUDY, _POINTS, _GRIDS, _ROUNDS, _TARGET_EPSILON, _NUM_SEEDS
  global _TUNE_SEEDS, _EXTEND_EDGES, _REPORT_ONLY
  _STUDY = cli_lib.define_study_flags('results/frontier')
  _POINTS = flags.DEFINE_string(
      'points', points_lib.DEFAULT_POINTS,
      "Each method's clients per round: 'method: B,B; method: B'.")
  _GRIDS = flags.DEFINE_string(
      'grids', points_lib.DEFAULT_GRIDS,
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

