"""Reproduces the DP-REC paper's Table 1 side by side with our numbers.

  python -m experiments.reproduce --output_dir=D \
      [--part=privacy,communication,utility,ablations] [--quick]

writes D/reproduce.json, a list of cells `{task, method, epsilon, quantity,
unit, paper, ours, basis, note}` (quantity: epsilon, clip_ratio,
noise_multiplier, total_comm or metric; `basis` says how `ours` was obtained,
`paper` is null where the paper prints no number), and D/REPRODUCTION.md: the
paper's Table 1 with our number beside each paper number and why they differ,
then the details of each part.

Parts (the default is all four):
* privacy: for every DP-REC and DP-FedAvg setting of the paper's Appendix C,
  epsilon at the paper's c (DP-REC) or z (DP-FedAvg) under the paper's
  accounting (Theorem 1 with total_bits = M b; the classic RDP conversion)
  and under the library's default (proven, b bits in each of M groups;
  dp_accounting's conversion), and the c or z calibrated to the paper's
  epsilon under both. DDGauss: the noise multiplier our accountant calibrates
  at Kairouz et al.'s settings; their own noise is not published.
* communication: the paper's N, B, T and the parameter counts of Keras builds
  of the paper's models. DP-FedAvg and DDGauss are sums over rounds. DP-REC
  draws B clients with replacement per round and runs every downlink through
  `tff_dprec.history.HistoryServer` with placeholder message matrices (it
  counts rows only); the same draws then go through `size_only_traffic`,
  equal to HistoryServer for the library's protocol, to show each protocol
  choice as its own column.
* utility and ablations train (`experiments.studies.utility`), on the
  data available here (digits for MNIST, the embedded StackOverflow data;
  the real tasks when their files are in --data_dir) with the experiments'
  per-run budget, not the paper's rounds.

* fashion_mnist (opt-in, not in the default): real Fashion-MNIST under the
  paper's MNIST protocol, tuned on its validation split, beside the paper's
  MNIST row (`experiments.studies.real_images`; `--rounds`, 300 by
  default; hours on 2 cores, resumable): writes fashion_mnist.md, .csv and
  its curves in --output_dir.

* attribution (opt-in, not in the default): Table 1's MNIST row
  attributed, on real Fashion-MNIST at the paper's 1,000 rounds: the
  paper's parameters beside proven, tight ones, DP-REC's exact-sample
  control, the DP-FedAvg (RDP) reference for DDGauss
  (`experiments.studies.attribution`; `--jobs` runs side by side; about
  6 hours on 2 cores, resumable): writes attribution.md, .csv and its
  curves in --output_dir.

--quick gives a version for the tests (about 2 minutes): privacy for MNIST
without calibration, communication at full scale with one sampling seed, and
toy training runs on tiny embedded data.

Every number attributed to the paper comes from `PAPER`, one entry per number
with the line of the paper's LaTeX source (arXiv:2111.05454) it is printed on
(tests/experiments/reproduce_test.py checks each against the .tex).
"""

import os
import time
import types

from absl import app
from absl import flags

from experiments.runner import cli as cli_lib
from experiments.infra import atomic_files
from experiments.studies import communication
from experiments.studies import paper
from experiments.studies import privacy_rows
from experiments.studies import rendering
from experiments.studies import utility


def reproduce(config: paper.ReproduceConfig, log=print) -> list:
  """Runs the selected parts; writes reproduce.json and REPRODUCTION.md."""
  os.makedirs(config.output_dir, exist_ok=True)
  cells, runs, seconds, ablations = [], {}, {}, None
  for part in paper.PARTS:
    if part not in config.parts:
      continue
    start = time.time()
    if part == 'privacy':
      part_cells = privacy_rows.privacy_cells(config, log)
    elif part == 'communication':
      part_cells, runs = communication.communication_cells(config, log)
    elif part == 'utility':
      part_cells = utility.utility_cells(config, log)
    else:
      part_cells, ablations = utility.ablation_cells(config, log)
      utility.write_json(config.output_dir, ablations)
      utility.write_plots(config.output_dir, ablations)
    cells.extend(part_cells)
    seconds[part] = time.time() - start
    # What is done so far is written after every part.
    _write(config, cells, runs, seconds, ablations)
  return cells


def _write(config, cells, runs, seconds, ablations):
  rendering.write_json(os.path.join(config.output_dir, 'reproduce.json'), cells)
  atomic_files.write_text(
      os.path.join(config.output_dir, 'REPRODUCTION.md'),
      rendering.render_markdown(config, cells, runs, seconds, ablations))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'Unexpected arguments: {argv[1:]}')
  args = types.SimpleNamespace(**{name: holder.value
                                  for name, holder in _FLAGS.items()})
  parts = tuple(p for p in args.part.split(',') if p)
  real_data = tuple(p for p in parts if p in REAL_DATA_PARTS)
  parts = tuple(p for p in parts if p not in REAL_DATA_PARTS)
  try:
    config = _checked_config(args, parts, real_data)
  except ValueError as e:
    cli_lib.fail(e)
  cli_lib.quiet_logs()
  start = time.time()

  def log(text):
    print(text, flush=True)

  if config is not None:
    reproduce(config, log=log)
    print(f'Wrote {config.output_dir}/reproduce.json and REPRODUCTION.md in '
          f'{time.time() - start:.1f} s.')
  for part in real_data:
    _real_data(args, log, part)


def _checked_config(args, parts, real_data):
  """The ReproduceConfig of the non-real-data parts (None if none); raises
  ValueError naming the flag and value for a combination that does not
  apply."""
  config = None
  if args.report_only and (parts or not real_data):
    raise ValueError(f'--report_only applies to --part=fashion_mnist or '
                     f'attribution alone, found --part={args.part}.')
  if args.jobs is not None and (
      'attribution' not in real_data or args.jobs < 1):
    raise ValueError(f'--jobs applies to --part=attribution and must be '
                     f'at least 1, found --jobs={args.jobs} with '
                     f'--part={args.part}.')
  if 'attribution' in real_data and args.training_seeds is not None:
    raise ValueError('--training_seeds does not apply to '
                     '--part=attribution (its rows have fixed seeds: 5 '
                     f'for DP-REC and its controls, 3 for the others), '
                     f'found --training_seeds={args.training_seeds}.')
  if args.tuning_seeds is not None and REAL_DATA_PART not in real_data:
    raise ValueError(f'--tuning_seeds applies to --part=fashion_mnist, '
                     f'found --part={args.part}.')
  if args.tuning_seeds is not None and args.tuning_seeds < 1:
    raise ValueError(f'--tuning_seeds must be at least 1, found '
                     f'{args.tuning_seeds}.')
  if args.rounds is not None and args.rounds < 2:
    raise ValueError(f'--rounds must be at least 2, found {args.rounds}.')
  if parts or not real_data:
    config = paper.ReproduceConfig(
        output_dir=args.output_dir, parts=parts, quick=args.quick,
        data_dir=args.data_dir, sampling_seeds=args.sampling_seeds,
        training_seeds=args.training_seeds or 3)
  return config


REAL_DATA_PART = 'fashion_mnist'
ATTRIBUTION_PART = 'attribution'
REAL_DATA_PARTS = (REAL_DATA_PART, ATTRIBUTION_PART)


def _real_data(args, log, part):
  """A real-data part; a missing dataset is one line, exit 2."""
  from experiments.data import task_types  # pylint: disable=g-import-not-at-top
  from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
  worker_reaper.install()
  start = time.time()
  try:
    if part == ATTRIBUTION_PART:
      from experiments.studies import attribution  # pylint: disable=g-import-not-at-top
      from experiments.studies import attribution_rows  # pylint: disable=g-import-not-at-top
      attribution.run(args.output_dir, args.data_dir,
                      rounds=args.rounds or attribution_rows.ROUNDS,
                      jobs=args.jobs or 1, log=log,
                      report_only=args.report_only)
    else:
      from experiments.studies import real_images  # pylint: disable=g-import-not-at-top
      real_images.run(args.output_dir, args.data_dir,
                      rounds=args.rounds or real_images.DEFAULT_ROUNDS,
                      seeds=args.training_seeds or 2, log=log,
                      report_only=args.report_only,
                      tuning_seeds=(args.tuning_seeds or
                                    real_images.TUNING_SEEDS))
  except task_types.MissingDataError as e:
    worker_reaper.reap()
    cli_lib.fail(e)
  finally:
    worker_reaper.reap_context_workers()
  print(f'Wrote {args.output_dir}/{part}.md, {part}.csv and '
        f'{part}_curves.png; wall time {time.time() - start:.0f} s.')


# The command's flags by name (`_define_flags`); `main` reads them as the
# namespace `_checked_config` and `_real_data` take.
_FLAGS = {}


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  _FLAGS.update(
      output_dir=flags.DEFINE_string(
          'output_dir', None, 'Where reproduce.json, REPRODUCTION.md and '
          "the parts' files go (required)."),
      part=flags.DEFINE_string(
          'part', ','.join(paper.DEFAULT_PARTS), 'Comma-separated subset of '
          f'{",".join(paper.PARTS + REAL_DATA_PARTS)}.'),
      quick=flags.DEFINE_bool(
          'quick', False,
          'A version for the tests (about 2 minutes: toy training).'),
      data_dir=flags.DEFINE_string('data_dir', 'data_cache',
                                   'Data for --part=utility,ablations.'),
      sampling_seeds=flags.DEFINE_integer(
          'sampling_seeds', 3, 'Communication: client-sampling seeds.'),
      training_seeds=flags.DEFINE_integer(
          'training_seeds', None, 'Utility, ablations: 3; fashion_mnist: 2.'),
      rounds=flags.DEFINE_integer(
          'rounds', None,
          'Rounds per run: fashion_mnist 300, attribution 1000.'),
      tuning_seeds=flags.DEFINE_integer(
          'tuning_seeds', None,
          'fashion_mnist only: seeds per tuning setting (2).'),
      report_only=flags.DEFINE_bool(
          'report_only', False,
          'fashion_mnist, attribution: train nothing; write the table and '
          'curves from the runs finished so far.'),
      jobs=flags.DEFINE_integer(
          'jobs', None, 'attribution only: seeds of a row trained side by '
          'side in processes (1).'))
  flags.mark_flag_as_required('output_dir')
