"""Table 1's MNIST row attributed: the paper's protocol at its 1,000 rounds.

  python -m experiments.reproduce --part=attribution \
      --output_dir=results/attribution [--jobs=2] [--report_only]

Real Fashion-MNIST under the paper's MNIST protocol (`--task=fashion_mnist`:
100 clients, B = 10, LeNet-5, client SGD 0.01 for one epoch with batch 20,
server Adam 2e-3, delta = N^-1.1) at the paper's 1,000 rounds. Each row
prints the epsilon it spends under the library's default accountant next to
the epsilon it was meant to have. Rows, in the order they train (a budget
that stops early drops from the end):

1. Epsilon 3 (block `eps3`):
   * the paper's parameters: DP-FedAvg at clip 0.01 and z = 3.8; DP-REC at
     sigma = 0.005 and c = 0.545, its bits chosen from c (4, not the
     paper's 7: a 7-bit round costs twice as long), accounted at what it
     uses (its proven epsilon, above the paper's claim);
   * DP-REC's exact-sample control (`registry.EXACT_SAMPLE`: each drawn client
     an exact sample of N(clipped update, sigma^2 I), DP-REC's sampling) at
     the paper row's sigma and c, and at the proven row's;
   * proven and tight rows at epsilon 3: DP-FedAvg (PLD), DP-REC (PLD, bits
     from c), DDGauss16 (its authors' RDP), the DP-FedAvg (RDP) reference
     for DDGauss, FedAvg. Their free parameters are the 300-round study's
     validation choices (`results/fashion_mnist`: DP-FedAvg's clip 0.005,
     DP-REC's sigma 0.0025; DDGauss16 takes DP-FedAvg's clip), checked at
     1,000 rounds on validation against their grid neighbours (block
     `neighbours`, one seed per setting).
2. The paper's parameters at epsilon 6 (z = 2.15, c = 0.87).
3. The proven rows at epsilon 6.

Within a block the rows train seed by seed (every row's first seed, then
every row's second, ...), so a budget cut leaves every row with runs; with
`--jobs` > 1 a row's odd seed trains beside the next row's (`pack`).
DP-REC rows and their controls train `REC_SEEDS` seeds, the others
`OTHER_SEEDS`. Everything resumes: rerun the command and finished runs are
reused, unfinished ones continue from their checkpoints. `--report_only`
trains nothing and writes the report from the runs finished so far.

The rows are in `attribution_rows`, their schedule in
`attribution_schedule`, the report in `attribution_report`. Writes to the
output folder: attribution.md (the table, the gaps beside the
paper's, DP-REC minus its exact-sample control, the neighbour checks),
attribution.csv and attribution_curves.png.
"""

import os
from typing import Optional

from experiments.studies import attribution_report as report
from experiments.studies import attribution_rows as rows_lib
from experiments.studies import attribution_schedule as schedule


def run(output_dir: str, data_dir: str = 'data_cache',
        rounds: int = rows_lib.ROUNDS, jobs: int = 1, log=print,
        report_only: bool = False,
        reference_dir: Optional[str] = None) -> list[dict]:
  """Trains every row in order (module doc), then writes the report;
  `report_only` writes it from the runs finished so far. Returns the
  table's lines.

  Raises:
    ValueError: If `rounds` < 2 or `jobs` < 1, naming the value.
  """
  if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 2:
    raise ValueError(f'rounds must be an integer >= 2, found {rounds!r}.')
  if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
    raise ValueError(f'jobs must be a positive integer, found {jobs!r}.')
  from experiments.data import tasks  # pylint: disable=g-import-not-at-top
  # A report reads stored records: the model and clients, not the images.
  task = tasks.create_task(rows_lib.TASK, data_dir, model_only=report_only)
  base = rows_lib.base_config(output_dir, data_dir, rounds, jobs)
  log(f'[attribution] {task.data_note}')
  rows = rows_lib.all_rows()
  target = rows_lib.targets(rows, rows_lib.proven_epsilon_of_c(task, base))
  if not report_only:
    schedule.train(base, rows, target, log)
  records_by_row = schedule.finished_records(
      base, rows, target, task if report_only else None)
  table = report.summarize(rows, records_by_row)
  pending = [f"{r.label} at {r.block} ({len(records_by_row[r.key])} of "
             f'{r.seeds} seeds)' for r in rows
             if len(records_by_row[r.key]) < r.seeds]
  neighbours = schedule.check_neighbours(base, log, report_only=True)
  if reference_dir is None:
    reference_dir = os.path.join(os.path.dirname(
        os.path.abspath(output_dir)), 'fashion_mnist')
  report.write(output_dir, table, records_by_row, neighbours,
               report.reference_gap(reference_dir), pending)
  return table
