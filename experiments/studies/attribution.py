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
     uses (its sound epsilon, above the paper's claim);
   * DP-REC's exact-sample control (`registry.EXACT_SAMPLE`: each drawn client
     an exact sample of N(clipped update, sigma^2 I), DP-REC's sampling) at
     the paper row's sigma and c, and at the sound row's;
   * sound and tight rows at epsilon 3: DP-FedAvg (PLD), DP-REC (PLD, bits
     from c), DDGauss16 (its authors' RDP), the DP-FedAvg (RDP) reference
     for DDGauss, FedAvg. Their free parameters are the 300-round study's
     validation choices (`results/fashion_mnist`: DP-FedAvg's clip 0.005,
     DP-REC's sigma 0.0025; DDGauss16 takes DP-FedAvg's clip), checked at
     1,000 rounds on validation against their grid neighbours (block
     `neighbours`, one seed per setting).
2. The paper's parameters at epsilon 6 (z = 2.15, c = 0.87).
3. The sound rows at epsilon 6.

Within a block the rows train seed by seed (every row's first seed, then
every row's second, ...), so a budget cut leaves every row with runs; with
`--jobs` > 1 a row's odd seed trains beside the next row's (`pack`).
DP-REC rows and their controls train `REC_SEEDS` seeds, the others
`OTHER_SEEDS`. Everything resumes: rerun the command and finished runs are
reused, unfinished ones continue from their checkpoints. `--report_only`
trains nothing and writes the report from the runs finished so far.

Writes to the output folder: attribution.md (the table, the gaps beside the
paper's, DP-REC minus its exact-sample control, the neighbour checks),
attribution.csv and attribution_curves.png.
"""

import dataclasses
import math
import os
from typing import Optional

from experiments.runner import config as config_lib
from experiments.runner import registry
from experiments.studies import epsilon_sweep
from experiments.studies import paper
from experiments.studies import real_images
from experiments.studies import tune as tune_lib
from tff_dprec.plan import search as plan_search

TASK = real_images.TASK
ROUNDS = 1000  # The paper's (Appendix C).
EVAL_EVERY = 25
LAST_ROUNDS = 100  # The steadier figure: the mean of these rounds' points.
REC_SEEDS = 5  # DP-REC rows and their exact-sample controls.
OTHER_SEEDS = 3
# The 300-round study's validation choices (docs/figures/fashion_mnist_table.md).
CHOSEN_CLIP = 0.005  # DP-FedAvg's clip; DDGauss16 takes it too.
CHOSEN_SIGMA = 0.0025  # DP-REC's prior sigma.
NEIGHBOURS = {'dp_fedavg': ('l2_clip', (0.0025, 0.005, 0.01)),
              'dp_rec': ('noise_stddev', (0.00125, 0.0025, 0.005))}
BLOCKS = ('eps3', 'neighbours', 'eps6_paper', 'eps6_sound')


@dataclasses.dataclass(frozen=True)
class Row:
  """One table row: what it trains, at which target, and how it is named.

  `epsilon` is the epsilon the row is meant to have (the paper's claim for
  a paper row, the calibration target for a sound one; None for FedAvg).
  A paper DP-REC row and its control train at the sound epsilon of the
  paper's c (`target`), which the accountant then charges.
  """
  key: str
  aggregator: str
  label: str
  kind: str  # 'paper', 'sound', 'reference', 'control' or 'nonprivate'.
  epsilon: Optional[float]
  setting: dict
  seeds: int
  accountant: str
  block: str

  @property
  def uses_paper_c(self) -> bool:
    return 'clip_ratio' in self.setting


def _paper(quantity, method=None, eps=None):
  return paper.paper_value('mnist', quantity, method, eps)


def _paper_rows(eps, block) -> list[Row]:
  fedavg = dict(l2_clip=_paper('l2_clip', paper.DP_FEDAVG),
                noise_multiplier=_paper('noise_multiplier', paper.DP_FEDAVG,
                                        eps))
  rec = dict(noise_stddev=_paper('noise_stddev', paper.DP_REC),
             clip_ratio=_paper('clip_ratio', paper.DP_REC, eps))
  tag = f'eps{eps:g}'
  return [
      Row(f'paper_dp_fedavg_{tag}', 'dp_fedavg', "DP-FedAvg, paper's z",
          'paper', eps, fedavg, OTHER_SEEDS, 'PLD', block),
      Row(f'paper_dp_rec_{tag}', 'dp_rec', "DP-REC, paper's c", 'paper', eps,
          rec, REC_SEEDS, 'PLD (sound, bits from c)', block)]


def _exact_rows(eps, block) -> list[Row]:
  rec = dict(noise_stddev=_paper('noise_stddev', paper.DP_REC),
             clip_ratio=_paper('clip_ratio', paper.DP_REC, eps))
  tag = f'eps{eps:g}'
  return [
      Row(f'exact_paper_{tag}', registry.EXACT_SAMPLE,
          "DP-REC's exact-sample control at the paper's c", 'control', eps,
          rec, REC_SEEDS, '-', block),
      Row(f'exact_sound_{tag}', registry.EXACT_SAMPLE,
          "DP-REC's exact-sample control at the sound c", 'control', eps,
          dict(noise_stddev=CHOSEN_SIGMA), REC_SEEDS, '-', block)]


def _sound_rows(eps, block, reference: bool) -> list[Row]:
  tag = f'eps{eps:g}'
  clip = dict(l2_clip=CHOSEN_CLIP)
  rows = [
      Row(f'dp_fedavg_{tag}', 'dp_fedavg', 'DP-FedAvg', 'sound', eps, clip,
          OTHER_SEEDS, 'PLD', block),
      Row(f'dp_rec_{tag}', 'dp_rec', 'DP-REC', 'sound', eps,
          dict(noise_stddev=CHOSEN_SIGMA), REC_SEEDS, 'PLD (bits from c)',
          block),
      Row(f'ddgauss16_{tag}', 'ddgauss16', 'DDGauss16', 'sound', eps, clip,
          OTHER_SEEDS, 'RDP', block)]
  if reference:
    rows.append(Row(f'dp_fedavg_rdp_{tag}', 'dp_fedavg', 'DP-FedAvg (RDP)',
                    'reference', eps, dict(clip, accounting='rdp'),
                    OTHER_SEEDS, 'RDP', block))
  return rows


def all_rows() -> list[Row]:
  """Every row, in training order (module doc)."""
  return (_paper_rows(3.0, 'eps3') + _exact_rows(3.0, 'eps3') +
          _sound_rows(3.0, 'eps3', reference=True) +
          [Row('fedavg', 'fedavg', 'FedAvg', 'nonprivate', None, {},
               OTHER_SEEDS, '-', 'eps3')] +
          _paper_rows(6.0, 'eps6_paper') +
          _sound_rows(6.0, 'eps6_sound', reference=False))


def base_config(output_dir, data_dir, rounds=ROUNDS,
                jobs=1) -> config_lib.RunConfig:
  return config_lib.RunConfig(
      task=TASK, aggregators=('fedavg',), data_dir=data_dir,
      output_dir=output_dir, rounds=rounds, eval_every=EVAL_EVERY,
      progress=False, jobs=jobs)


def row_config(base, row: Row, target_epsilon: float, seed: int = 0,
               num_seeds: Optional[int] = None) -> config_lib.RunConfig:
  """The configuration of `row`'s seeds `seed`, ..., in its own folder."""
  return config_lib.RunConfig(**{
      **base.asdict(), **row.setting, 'aggregators': (row.aggregator,),
      'target_epsilon': target_epsilon, 'seed': seed,
      'num_seeds': row.seeds if num_seeds is None else num_seeds,
      'jobs': min(base.jobs, row.seeds if num_seeds is None else num_seeds),
      'output_dir': os.path.join(base.output_dir, 'rows', row.key)})


def sound_epsilon_of_c(task, base) -> callable:
  """c -> DP-REC's sound (PLD) epsilon at c, with the bits chosen from c,
  over the study's rounds: what the paper-c rows are accounted at."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  from tff_dprec.aggregators import dp_rec  # pylint: disable=g-import-not-at-top
  config = base.resolved(task)
  value_type = tff.learning.models.weights_type_from_model(
      task.baseline.model_fn).trainable

  def epsilon(c):
    bits = registry.auto_bits(lambda _: c)[0]
    groups = dp_rec.DPRecSumFactory(
        noise_stddev=1.0, l2_clip=1.0, bits=bits,
        grouping=config.grouping).num_groups(value_type)
    return accounting.dp_rec_epsilon(
        clip_ratio=c, bits=bits, num_groups=groups, rounds=config.rounds,
        population=task.population,
        clients_per_round=config.clients_per_round, delta=config.delta)

  return epsilon


def targets(rows, sound_epsilon) -> dict:
  """{row key: the target epsilon its runs are configured with}."""
  from tff_dprec.accounting import calibration  # pylint: disable=g-import-not-at-top
  out = {}
  for row in rows:
    if row.uses_paper_c:
      out[row.key] = calibration.round_up(
          sound_epsilon(row.setting['clip_ratio']), 4)
    else:
      out[row.key] = row.epsilon if row.epsilon is not None else 1.0
  return out


def neighbour_settings(name) -> list[dict]:
  field, values = NEIGHBOURS[name]
  return [{field: v} for v in values]


def neighbours_config(base, name) -> config_lib.RunConfig:
  """Validation runs of `name` at epsilon 3, one seed per setting."""
  return config_lib.RunConfig(**{
      **base.asdict(), 'aggregators': (name,), 'num_seeds': 1, 'jobs': 1,
      'target_epsilon': 3.0,
      'seed': base.seed + epsilon_sweep.TUNE_SEED_OFFSET,
      'eval_split': 'validation', 'eval_every': 10**6,
      'output_dir': os.path.join(base.output_dir, 'neighbours', name)})


def check_neighbours(base, log, report_only=False) -> dict:
  """{method: {setting: validation accuracy}} at 1,000 rounds (what has
  finished when `report_only`)."""
  if not report_only and base.jobs > 1:
    _neighbours_side_by_side(base, log)
  out = {}
  for name in NEIGHBOURS:
    config = neighbours_config(base, name)
    path = os.path.join(config.output_dir, f'tune_{name}.json')
    settings = neighbour_settings(name)
    if report_only:
      results = {k: v for k, v in tune_lib.read_results(path).items()
                 if tune_lib.ran_under(v, tune_lib.base_fingerprint(config))}
    else:
      os.makedirs(config.output_dir, exist_ok=True)
      results = tune_lib.tune(config, settings, path, print_fn=lambda line,
                              n=name: log(f'[attribution] {n}: {line}'))
    out[name] = {tune_lib.key(s): results[tune_lib.key(s)]['mean']
                 for s in settings if tune_lib.key(s) in results}
  return out


def _neighbours_side_by_side(base, log) -> None:
  """Trains the neighbour settings that have no stored result, `base.jobs`
  at a time, each in its own process; `tune_lib.tune` then finds their
  runs finished and stores their results."""
  from experiments.runner import jobs  # pylint: disable=g-import-not-at-top
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  units = []
  for name in NEIGHBOURS:
    config = neighbours_config(base, name)
    stored = tune_lib.read_results(os.path.join(config.output_dir,
                                                f'tune_{name}.json'))
    fingerprint = tune_lib.base_fingerprint(config)
    for setting in neighbour_settings(name):
      if tune_lib.ran_under(stored.get(tune_lib.key(setting), {}),
                            fingerprint):
        continue
      run_config = tune_lib.setting_config(config, setting)
      if not training.finished_runs(run_config):
        units.append((f'{name} {tune_lib.key(setting)}', run_config, 1))
  for group in pack(units, base.jobs):
    if len(group) > 1:  # One alone: `tune_lib.tune` trains it.
      log('[attribution] neighbours side by side: ' +
          '; '.join(label for label, _, _ in group))
      jobs.run_side_by_side([c for _, c, _ in group],
                            print_fn=_progress_only(log))


def train(base, rows, target, log, blocks=BLOCKS) -> None:
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
          config = row_config(base, row, target[row.key], first, count)
          left = count - len(training.finished_runs(config))
          if left:
            units.append((row, config, left))
    for group in pack(units, base.jobs):
      for row, config, _ in group:
        log(f'[attribution] {row.key}: seeds {config.seed}-'
            f'{config.seed + config.num_seeds - 1}, target epsilon '
            f'{target[row.key]:g}, '
            f'{tune_lib.key(row.setting) or "task defaults"}'
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


def finished(base, rows, target) -> dict:
  """{row key: records of its finished runs}; trains nothing."""
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  out = {}
  for row in rows:
    out[row.key] = [dict(done['record'], curve=done['curve']) for done in
                    training.finished_runs(row_config(base, row,
                                                      target[row.key]))]
  return out


def relative_noise(params: dict, clients_per_round: int) -> Optional[float]:
  """The planner's relative noise (noise sd on the mean update / clip)."""
  if params.get('noise_multiplier') is not None:
    return plan_search.gaussian_relative_noise(params['noise_multiplier'],
                                               clients_per_round)
  if params.get('clip_ratio') is not None:
    return plan_search.dp_rec_relative_noise(params['clip_ratio'],
                                             clients_per_round)
  return None


def last_rounds_mean(record, rounds=LAST_ROUNDS) -> float:
  """The mean of a run's evaluations after its last `rounds` rounds began."""
  curve = record['curve']
  end = max(p['round'] for p in curve)
  points = [p['metric'] for p in curve if p['round'] > end - rounds]
  return sum(points) / len(points)


def _mean_se(values):
  n = len(values)
  mean = sum(values) / n
  if n < 2:
    return mean, None
  var = sum((v - mean)**2 for v in values) / (n - 1)
  return mean, math.sqrt(var / n)


def summarize(rows, records_by_row) -> list[dict]:
  """One line per row that has finished runs."""
  lines = []
  for row in rows:
    runs = sorted(records_by_row.get(row.key, []), key=lambda r: r['seed'])
    if not runs:
      continue
    finals = [r['final_metric'] for r in runs]
    mean, se = _mean_se(finals)
    last_mean, last_se = _mean_se([last_rounds_mean(r) for r in runs])
    params = runs[0].get('params', {})
    spent = [r['epsilon'] for r in runs if r.get('epsilon') is not None]
    lines.append(dict(
        key=row.key, label=row.label, kind=row.kind, block=row.block,
        aggregator=row.aggregator, meant_epsilon=row.epsilon,
        accountant=row.accountant,
        spent_epsilon=max(spent) if spent else None,
        seeds=len(runs), mean=mean, se=se, per_seed=finals,
        last_mean=last_mean, last_se=last_se,
        lost_rounds=sum(r.get('lost_rounds', 0) for r in runs),
        relative_noise=relative_noise(params, runs[0]['clients_per_round']),
        clip=params.get('l2_clip'), clip_ratio=params.get('clip_ratio'),
        noise_multiplier=params.get('noise_multiplier'),
        bits=params.get('bits'),
        upload_gb=sum(r['upload_gb'] for r in runs) / len(runs),
        seconds_per_round=sum(r['seconds_per_round'] for r in runs) /
        len(runs),
        paper=_paper_metric(row)))
  return lines


def _paper_metric(row):
  if row.kind not in ('paper', 'sound') or row.aggregator == 'ddgauss16':
    return None
  method = paper.DP_FEDAVG if row.aggregator == 'dp_fedavg' else paper.DP_REC
  return _paper('metric', method, row.epsilon)


def difference(a: dict, b: dict) -> dict:
  """a - b in accuracy, with the SE of two independent means."""
  se = None
  if a['se'] is not None and b['se'] is not None:
    se = math.hypot(a['se'], b['se'])
  return dict(gap=a['mean'] - b['mean'], se=se,
              last_gap=a['last_mean'] - b['last_mean'])


# (name, minuend row key, subtrahend row key, the paper's gap or None) at
# each epsilon.
def comparisons(eps) -> list[tuple]:
  tag = f'eps{eps:g}'
  paper_gap = _paper('metric', paper.DP_REC, eps) - _paper(
      'metric', paper.DP_FEDAVG, eps)
  return [
      ("DP-REC - DP-FedAvg, the paper's parameters",
       f'paper_dp_rec_{tag}', f'paper_dp_fedavg_{tag}', paper_gap),
      ('DP-REC - DP-FedAvg, sound and tight', f'dp_rec_{tag}',
       f'dp_fedavg_{tag}', paper_gap),
      ("DP-REC - its exact-sample control, the paper's c (REC's cost under "
       'noise)', f'paper_dp_rec_{tag}', f'exact_paper_{tag}', None),
      ('DP-REC - its exact-sample control, the sound c (REC\'s cost under '
       'noise)', f'dp_rec_{tag}', f'exact_sound_{tag}', None),
      ('DDGauss16 - DP-FedAvg (RDP): the mechanism and its subsampling '
       'bound', f'ddgauss16_{tag}', f'dp_fedavg_rdp_{tag}', None),
      ('DP-FedAvg (RDP) - DP-FedAvg (PLD): the accountant',
       f'dp_fedavg_rdp_{tag}', f'dp_fedavg_{tag}', None)]


def gaps(table) -> list[dict]:
  by = {l['key']: l for l in table}
  out = []
  for eps in (3.0, 6.0):
    for name, a, b, paper_gap in comparisons(eps):
      if a in by and b in by:
        out.append(dict(name=name, epsilon=eps, paper_gap=paper_gap,
                        **difference(by[a], by[b])))
  return out


def reference_gap(reference_dir) -> Optional[dict]:
  """The 300-round study's sound DP-REC - DP-FedAvg at epsilon 3, from its
  records under `reference_dir` (None where they are not there)."""
  import glob  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  lines = {}
  for name in ('dp_rec', 'dp_fedavg'):
    pattern = os.path.join(reference_dir, 'rows', name, 'eps3', TASK, name,
                           'seed*', 'record.json')
    records = []
    for path in sorted(glob.glob(pattern)):
      with open(path) as f:
        saved = json.load(f)
      records.append(dict(saved['record'], curve=saved['curve']))
    if not records:
      return None
    mean, se = _mean_se([r['final_metric'] for r in records])
    last, _ = _mean_se([last_rounds_mean(r) for r in records])
    lines[name] = dict(mean=mean, se=se, last_mean=last)
  return difference(lines['dp_rec'], lines['dp_fedavg'])


def attribution(table, reference) -> list[str]:
  """The 300-round gap at epsilon 3 split into run length, accounting and
  what is left against the paper's gap; REC's own cost beside it."""
  by = {g['name']: g for g in gaps(table) if g['epsilon'] == 3.0}
  names = [c[0] for c in comparisons(3.0)]
  paper_gap, sound, rec_paper, rec_sound = (
      by.get(names[0]), by.get(names[1]), by.get(names[2]), by.get(names[3]))
  lines = []
  fmt = lambda g: _points(g['gap'], g['se'])
  if reference is not None:
    lines.append(f'* 300 rounds, sound and tight: {fmt(reference)}.')
  if reference is not None and sound is not None:
    lines.append(
        '* Run length (1,000 rounds against 300, both sound): '
        f"{100 * (sound['gap'] - reference['gap']):+.2f} points "
        f"(to {fmt(sound)}).")
  if sound is not None and paper_gap is not None:
    lines.append(
        "* Accounting (the paper's parameters against sound, tight ones, "
        f"1,000 rounds): {100 * (paper_gap['gap'] - sound['gap']):+.2f} "
        f"points (to {fmt(paper_gap)}).")
  if paper_gap is not None:
    lines.append(
        "* Left against the paper's MNIST gap "
        f"({paper_gap['paper_gap']:+.1f}): "
        f"{100 * paper_gap['gap'] - paper_gap['paper_gap']:+.2f} points "
        '(data: Fashion-MNIST, not MNIST; seeds; the rest).')
  for g, c in ((rec_paper, "the paper's c"), (rec_sound, 'the sound c')):
    if g is not None:
      lines.append(f'* REC against exact samples at {c}: {fmt(g)} (the '
                   'part that would be a defect of the coding).')
  return lines


def _points(value, se):
  return f'{100 * value:+.2f}' + ('' if se is None else f' ± {100 * se:.2f}')


def _seeds(n):
  return f'{n} seed' + ('' if n == 1 else 's')


def _eps(value):
  return '-' if value is None else f'{value:.3f}'


def markdown(table, neighbours, reference, pending) -> str:
  """The table, the gaps, the attribution, the neighbour checks."""
  lines = [
      '| row | epsilon meant | accountant | epsilon spent | accuracy (%) | '
      'per seed | last 100 rounds (%) | relative noise | clip | bits | '
      "paper's MNIST (%) | s/round |",
      '|---|---|---|---|---|---|---|---|---|---|---|---|']
  for l in table:
    meant = '-' if l['meant_epsilon'] is None else f"{l['meant_epsilon']:g}"
    if l['kind'] == 'paper':
      meant += " (the paper's claim)"
    noise = ('-' if l['relative_noise'] is None else
             f"{l['relative_noise']:.3g}")
    lost = (f", {l['lost_rounds']} round{'s' * (l['lost_rounds'] != 1)} lost"
            if l['lost_rounds'] else '')
    lines.append(
        f"| {l['label']} | {meant} | {l['accountant']} | "
        f"{_eps(l['spent_epsilon'])} | {_points(l['mean'], l['se'])[1:]} "
        f"({_seeds(l['seeds'])}{lost}) | "
        + ', '.join(f'{100 * v:.2f}' for v in l['per_seed']) + ' | '
        f"{_points(l['last_mean'], l['last_se'])[1:]} | {noise} | "
        f"{'-' if l['clip'] is None else format(l['clip'], '.4g')} | "
        f"{l['bits'] or '-'} | "
        f"{'-' if l['paper'] is None else format(l['paper'], '.1f')} | "
        f"{l['seconds_per_round']:.2f} |")
  lines += ['', '| difference | epsilon | final (points) | last 100 rounds '
            "(points) | paper, MNIST (points) |", '|---|---|---|---|---|']
  for g in gaps(table):
    paper_gap = '-' if g['paper_gap'] is None else f"{g['paper_gap']:+.1f}"
    lines.append(f"| {g['name']} | {g['epsilon']:g} | "
                 f"{_points(g['gap'], g['se'])} | "
                 f"{100 * g['last_gap']:+.2f} | {paper_gap} |")
  lines += ['', 'Attribution of the 300-round gap at epsilon 3:', '']
  lines += attribution(table, reference) or ['* (rows not trained yet)']
  lines += ['', _neighbour_note(neighbours)]
  if pending:
    lines += ['', 'Not finished yet (rerun the command to train them): ' +
              '; '.join(pending) + '.']
  return '\n'.join(lines) + '\n'


def _neighbour_note(neighbours) -> str:
  parts = [f'{name} ' + (', '.join(f'{k}: {100 * v:.2f}' for k, v in
                                   scores.items()) or 'not trained yet') +
           _verdict(name, scores) for name, scores in neighbours.items()]
  return ('Free parameters: the 300-round study\'s validation choices '
          f'(DP-FedAvg clip {CHOSEN_CLIP}, DP-REC sigma {CHOSEN_SIGMA}), '
          'checked at 1,000 rounds on the validation split against their '
          'grid neighbours, one seed each: ' + '; '.join(parts) + '.')


def _verdict(name, scores) -> str:
  """A finished grid's best setting, its margin, and whether on an edge."""
  field, values = NEIGHBOURS[name]
  if len(scores) < len(values):
    return ''
  chosen = f'{field}={CHOSEN_CLIP if name == "dp_fedavg" else CHOSEN_SIGMA}'
  best = max(scores, key=scores.get)
  where = ("on the grid's edge" if best in {f'{field}={v}' for v in (
      min(values), max(values))} else 'inside the grid')
  if best != chosen:
    return f' (best: {best}, {where}; the rows keep the 300-round choice)'
  margin = scores[best] - max(v for k, v in scores.items() if k != best)
  return f' (the choice is best, by {100 * margin:.2f} points, {where})'


def write(output_dir, table, records_by_row, neighbours, reference,
          pending) -> list[str]:
  """attribution.md, .csv and _curves.png, each whole or not at all."""
  import csv  # pylint: disable=g-import-not-at-top
  from experiments.infra import atomic_files  # pylint: disable=g-import-not-at-top
  os.makedirs(output_dir, exist_ok=True)
  md = atomic_files.write_text(
      os.path.join(output_dir, 'attribution.md'),
      markdown(table, neighbours, reference, pending))
  path = os.path.join(output_dir, 'attribution.csv')
  fields = list(dict.fromkeys(k for l in table for k in l))
  with atomic_files.replacing(path, newline='') as f:
    writer = csv.DictWriter(f, fieldnames=fields)
    writer.writeheader()
    writer.writerows(dict(l, per_seed=' '.join(f'{v:.4f}' for v in
                                               l['per_seed'])) for l in table)
  png = os.path.join(output_dir, 'attribution_curves.png')
  with atomic_files.replacing_path(png, suffix='.png') as tmp:
    plot_curves(tmp, table, records_by_row)
  return [md, path, png]


def mean_band(records) -> tuple[list, list, list]:
  """(rounds, mean, SE) over seeds at the rounds every seed evaluated."""
  curves = [{p['round']: p['metric'] for p in r['curve']} for r in records]
  rounds = sorted(set.intersection(*(set(c) for c in curves)))
  stats = [_mean_se([c[x] for c in curves]) for x in rounds]
  return rounds, [m for m, _ in stats], [s or 0.0 for _, s in stats]


_STYLE = {'paper': '-', 'sound': '-', 'reference': '-.', 'control': ':',
          'nonprivate': '--'}


def plot_curves(path, table, records_by_row) -> None:
  """Test accuracy against round, mean over seeds +- SE, one panel per
  epsilon (FedAvg beside the private rows of each; a row keeps its colour
  in both)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(14, 6.4), sharex=True,
                           sharey=True)
  colors = plt.get_cmap('tab10')
  color = {l['key']: colors(i % 10) for i, l in enumerate(table)}
  for ax, eps in zip(axes, (3.0, 6.0)):
    shown = [l for l in table if l['meant_epsilon'] == eps]
    # FedAvg, the ceiling, beside a panel's private rows (not alone).
    shown += [l for l in table if shown and l['meant_epsilon'] is None]
    for l in shown:
      rounds, mean, se = mean_band(records_by_row[l['key']])
      low = [100 * (m - s) for m, s in zip(mean, se)]
      high = [100 * (m + s) for m, s in zip(mean, se)]
      ax.plot(rounds, [100 * m for m in mean], _STYLE[l['kind']],
              color=color[l['key']], lw=1.4,
              label=f"{l['label']} ({_seeds(l['seeds'])})")
      ax.fill_between(rounds, low, high, color=color[l['key']], alpha=0.15,
                      lw=0)
    ax.set_title(f'epsilon {eps:g} (FedAvg: no privacy)', fontsize=10)
    ax.set_xlabel('round')
    ax.grid(alpha=0.3)
    if shown:
      ax.legend(fontsize=7, loc='upper center', bbox_to_anchor=(0.5, -0.12),
                ncol=2, frameon=False)
    else:
      ax.text(0.5, 0.5, 'no runs finished yet', ha='center',
              transform=ax.transAxes, color='grey')
  axes[0].set_ylabel('test accuracy (%), mean over seeds ± SE')
  fig.suptitle("Fashion-MNIST, the paper's MNIST protocol at its 1,000 "
               'rounds (B = 10, LeNet-5)', fontsize=11)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def run(output_dir: str, data_dir: str = 'data_cache', rounds: int = ROUNDS,
        jobs: int = 1, log=print, report_only: bool = False,
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
  task = tasks.create_task(TASK, data_dir)
  base = base_config(output_dir, data_dir, rounds, jobs)
  log(f'[attribution] {task.data_note}')
  rows = all_rows()
  target = targets(rows, sound_epsilon_of_c(task, base))
  if not report_only:
    train(base, rows, target, log)
  records_by_row = finished(base, rows, target)
  table = summarize(rows, records_by_row)
  pending = [f"{r.label} at {r.block} ({len(records_by_row[r.key])} of "
             f'{r.seeds} seeds)' for r in rows
             if len(records_by_row[r.key]) < r.seeds]
  neighbours = check_neighbours(base, log, report_only=True)
  if reference_dir is None:
    reference_dir = os.path.join(os.path.dirname(
        os.path.abspath(output_dir)), 'fashion_mnist')
  write(output_dir, table, records_by_row, neighbours,
        reference_gap(reference_dir), pending)
  return table
