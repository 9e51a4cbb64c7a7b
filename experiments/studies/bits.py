r"""What more bits buy: DP-REC at one B with its bits from c, and with more.

  python -m experiments.bits --task=stackoverflow_lr --clients_per_round=2560

The paper's Figure 5 question on this task. At the frontier's point
(`experiments.frontier`: the same rounds, epsilon target and seeds), DP-REC
simulated in law (`dp_rec_in_law`; its decoded updates drawn exactly in law,
floats sent) trains three rows at the sigma chosen for the real codec's
point at that B (`--noise_stddev`, else read from the frontier's tuning in
`--frontier_dir`):

* `bits from c`: the bits chosen from its calibrated c (the frontier's rule):
  the frontier's own in-law point at that B, trained (or reused) in its
  folder under `--frontier_dir`;
* `more bits, same c`: `--bits` at the same c and sigma; more bits make each
  message less private, so its epsilon is computed (and reported), not held
  at the target;
* `more bits, same epsilon`: `--bits` with c calibrated to the target.

The other rows train `--num_seeds` seeds on the test split in
`<output_dir>/B<B>/<row>/`. Everything resumes. Writes `<output_dir>/<task>/`
`bits.md` and `bits.csv`: per row bits, c, epsilon, upload bits per client,
the metric +- SE with the rounds its seeds lost to interruptions, and each
row's difference to `bits from c`.
"""

import dataclasses
import math
import os

from absl import app
from absl import flags
# As in experiments.run: Keras models built after a TensorFlow import under
# `app.run` fail to build (empty inbound nodes).
import tensorflow as tf  # pylint: disable=unused-import  # noqa: F401

from experiments.infra import atomic_files
from experiments.runner import cli as cli_lib
from experiments.runner import config as config_lib
from experiments.runner import registry
from experiments.runner import stats
from experiments.studies import tuning
from experiments.studies import frontier_points
from tff_dprec import worker_reaper

ROWS = ('bits from c', 'more bits, same c', 'more bits, same epsilon')


@dataclasses.dataclass(frozen=True)
class Row:
  """One row: its name, folder and the run's configuration."""
  name: str
  folder: str
  config: config_lib.RunConfig


def frontier_sigma(task, base, clients, frontier_dir, print_fn=print):
  """The sigma the frontier chose for the real codec at `clients`.

  Raises:
    ValueError: If the frontier has not tuned that point yet.
  """
  grids = frontier_points.parse_grids(
      frontier_points.DEFAULT_GRIDS,
      frontier_points.parse_points(frontier_points.DEFAULT_POINTS))
  grid = grids.get(('dp_rec', clients))
  if grid is None:
    raise ValueError(f'--clients_per_round={clients}: the frontier does not '
                     'tune dp_rec there; give --noise_stddev.')
  frontier_base = dataclasses.replace(base, output_dir=frontier_dir)
  try:
    setting, _ = frontier_points.tune_with_extensions(
        task, frontier_base, 'dp_rec', clients, grid, 1, 2, print_fn,
        report_only=True)
  except frontier_points.tuning.NotTrainedYet as e:
    raise ValueError(f'the frontier has not tuned dp_rec at B = {clients} '
                     f'in {frontier_dir}: {e}') from None
  return setting['noise_stddev']


def rows(task, base, clients, sigma, more_bits, frontier_dir) -> list[Row]:
  """The three rows' configurations (c of `bits from c` calibrated here)."""
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  common = dict(base.asdict(), aggregators=(registry.DP_REC_IN_LAW,),
                clients_per_round=clients, noise_stddev=sigma)
  auto = config_lib.RunConfig(**common)
  params = run_setup.calibrated_aggregator(
      task, auto.resolved(task), registry.DP_REC_IN_LAW, False).params
  c = params['clip_ratio']
  same_c = dict(common, bits=more_bits, clip_ratio=c)
  epsilon = _epsilon(task, base, clients, c, more_bits, params['num_groups'])
  # Target: the epsilon these settings spend, rounded up (never below it).
  same_c['target_epsilon'] = math.ceil(epsilon * 1e4) / 1e4
  configs = (auto, config_lib.RunConfig(**same_c),
             config_lib.RunConfig(**dict(common, bits=more_bits)))
  setting = tuning.setting_name(dict(noise_stddev=sigma))
  folders = (os.path.join(frontier_dir, f'B{clients}', registry.DP_REC_IN_LAW,
                          setting.replace(' ', '_')),
             os.path.join(base.output_dir, f'B{clients}',
                          f'bits{more_bits}_same_c'),
             os.path.join(base.output_dir, f'B{clients}',
                          f'bits{more_bits}_same_epsilon'))
  return [Row(name, folder, dataclasses.replace(config, output_dir=folder))
          for name, folder, config in zip(ROWS, folders, configs)]


def _epsilon(task, base, clients, c, bits, num_groups) -> float:
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  resolved = base.resolved(task)
  return accounting.dp_rec_epsilon(
      clip_ratio=c, population=task.population, clients_per_round=clients,
      rounds=resolved.rounds, delta=resolved.delta, bits=bits,
      num_groups=num_groups, accounting=base.accounting)


def summarize(trained) -> list[dict]:
  """One dict per row from (Row, records) pairs; differences to the first."""
  out = []
  for row, records in trained:
    line = dict(row=row.name, seeds=len(records),
                lost_rounds=sum(r.get('lost_rounds', 0) for r in records))
    if records:
      mean, se = stats.mean_se([r['final_metric'] for r in records])
      params = records[0]['params']
      line.update(bits=params['bits'], clip_ratio=params['clip_ratio'],
                  noise_stddev=params['noise_stddev'],
                  epsilon=max(r['epsilon'] for r in records),
                  upload_bits=records[0]['upload_bits_per_client_round'],
                  mean=mean, se=se)
    out.append(line)
  first = out[0] if out and 'mean' in out[0] else None
  for line in out[1:]:
    if first is not None and 'mean' in line:
      line['difference'] = line['mean'] - first['mean']
      line['difference_se'] = (
          None if line['se'] is None or first['se'] is None
          else math.hypot(line['se'], first['se']))
  return out


def markdown(lines, clients, label) -> str:
  """The table, and each row's difference to `bits from c`."""
  table = [f'DP-REC simulated in law at B = {clients} ({registry.DP_REC_IN_LAW}'
           f': {registry.IN_LAW_NOTE}).', '',
           f'| row | bits | c | sigma | epsilon | upload bits per client | '
           f'{label} (%) | difference (points) |',
           '|---|---|---|---|---|---|---|---|']
  for line in lines:
    if 'mean' not in line:
      table.append(f"| {line['row']} | not trained yet | | | | | | |")
      continue
    se = '' if line['se'] is None else f" ± {100 * line['se']:.2f}"
    diff = ''
    if 'difference' in line:
      diff = f"{100 * line['difference']:+.2f}"
      if line['difference_se'] is not None:
        diff += f" ± {100 * line['difference_se']:.2f}"
    table.append(
        f"| {line['row']} | {line['bits']} | {line['clip_ratio']:.3f} | "
        f"{line['noise_stddev']:.4g} | {line['epsilon']:.3f} | "
        f"{line['upload_bits']} | {100 * line['mean']:.2f}{se} "
        f"({line['seeds']} seeds{_lost(line)}) | {diff} |")
  return '\n'.join(table) + '\n'


def _lost(line) -> str:
  """'' or ', n round(s) lost': rounds lost to interruptions, summed over
  the seeds; counted as spent privacy, so a private seed at its budget
  trained that many rounds fewer."""
  lost = line['lost_rounds']
  return f", {lost} round{'s' * (lost != 1)} lost" if lost else ''


def write(output_dir, lines, clients, label) -> list[str]:
  """Writes bits.md and bits.csv (each replaced whole)."""
  os.makedirs(output_dir, exist_ok=True)
  md_path = os.path.join(output_dir, 'bits.md')
  atomic_files.write_text(md_path, markdown(lines, clients, label))
  csv_path = atomic_files.write_csv(os.path.join(output_dir, 'bits.csv'),
                                    lines)
  return [md_path, csv_path]


def run_study(base, clients, sigma, more_bits, frontier_dir,
              report_only=False, print_fn=print):
  """Trains (or, `report_only`, reads) every row; returns (lines, label)."""
  from experiments.data import tasks as tasks_lib  # pylint: disable=g-import-not-at-top
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  from experiments.runner import finished  # pylint: disable=g-import-not-at-top
  task = tasks_lib.create_task(base.task, base.data_dir,
                               embedded_config=base.embedded_config,
                               population=base.population)
  if sigma is None:
    sigma = frontier_sigma(task, base, clients, frontier_dir, print_fn)
  trained, label = [], 'metric'
  for row in rows(task, base, clients, sigma, more_bits, frontier_dir):
    if report_only:
      records = finished.finished_records(row.config)
    else:
      print_fn(f'[bits] {row.name}: bits {row.config.bits or "from c"}, '
               f'sigma {sigma}')
      records = training.run(row.config,
                             print_fn=tuning.warnings_only(print_fn))
    if records:
      label = records[0]['metric_label']
    trained.append((row, records))
  return summarize(trained), label



def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  worker_reaper.install()
  cli_lib.quiet_logs()
  try:
    base = config_lib.RunConfig(
        task=_STUDY.task.value, aggregators=(registry.DP_REC_IN_LAW,),
        data_dir=_STUDY.data_dir.value, output_dir=_STUDY.output_dir.value,
        rounds=_ROUNDS.value, target_epsilon=_TARGET_EPSILON.value,
        num_seeds=_NUM_SEEDS.value, progress=False,
        population=_STUDY.population_value())
    lines, label = run_study(base, _CLIENTS.value, _SIGMA.value, _BITS.value,
                             _FRONTIER_DIR.value, _REPORT_ONLY.value)
  except (TypeError, ValueError) as e:
    cli_lib.fail(e)
  paths = write(os.path.join(_STUDY.output_dir.value, _STUDY.task.value),
                lines, _CLIENTS.value, label)
  print(markdown(lines, _CLIENTS.value, label))
  print('Wrote ' + ', '.join(paths) + '.')


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  # pylint: disable=global-statement
  global _STUDY, _CLIENTS, _BITS, _SIGMA, _ROUNDS, _TARGET_EPSILON
  global _NUM_SEEDS, _FRONTIER_DIR, _REPORT_ONLY
  _STUDY = cli_lib.define_study_flags('results/bits')
  _CLIENTS = flags.DEFINE_integer('clients_per_round', 2560,
                                  'Clients per round B.', lower_bound=1)
  _BITS = flags.DEFINE_integer('bits', 8, 'The larger bits per group.',
                               lower_bound=1, upper_bound=24)
  _SIGMA = flags.DEFINE_float(
      'noise_stddev', None, "DP-REC's sigma; default: the frontier's choice "
      'for the real codec at this B (from --frontier_dir).')
  _ROUNDS = flags.DEFINE_integer('rounds', None, 'Rounds (task default).')
  _TARGET_EPSILON = flags.DEFINE_float('target_epsilon', 1.0,
                                       'Privacy target.')
  _NUM_SEEDS = flags.DEFINE_integer('num_seeds', 3, 'Seeds per row.',
                                    lower_bound=1)
  _FRONTIER_DIR = flags.DEFINE_string(
      'frontier_dir', 'results/frontier',
      "The frontier's output folder, whose tuning gives the default sigma.")
  _REPORT_ONLY = flags.DEFINE_bool(
      'report_only', False,
      'Train nothing: write the table from the runs that have finished.')

