"""The training parts of the reproduction: utility and the two ablations.

`experiments.studies.reproduce` calls these for `--part=utility` and
`--part=ablations`. They train with `experiments.runner.training.run` on the
data available here, NOT the paper's datasets, and with the experiments'
task defaults as the budget of each run (`experiments.data.tasks`: digits 60
rounds of 10 clients), except where a task pins the setting the committed
reproduction ran (`TaskSpec.reproduction`; the embedded SO-LR's: the 4,000
stored clients, 10 rounds of 40, not the paper's rounds, 1000 to 4000,
which take hours per run on this machine).

* Utility: DP-REC, DP-FedAvg, DDG16 and DDG12 at each epsilon of the paper's
  Table 1 for the task the data stands for, `training_seeds` seeds each,
  mean +- standard error:
  - digits (scikit-learn's 8x8 digits, always available) for MNIST,
  - stackoverflow_lr (TFF's data when its sqlite is in data_dir, else the
    embedded data) for SO-LR,
  - mnist, emnist (FEMNIST) and shakespeare when their files are in data_dir.
* Ablations, on stackoverflow_lr:
  - bit width (the paper's Figure 2): DP-REC's clip ratio c is calibrated
    for epsilon 3 at 7 bits (the paper's setting) and then kept fixed, so the
    Renyi bound of the Gaussian it approximates is fixed, as in the paper;
    each width gets its own (proven) epsilon, computed for 1 to `max(EPSILON_
    BITS)` bits and trained for `BITS`.
  - local DP (the paper's Section 5): at central epsilon 1 and 3, DP-REC's
    epsilon of one participation without amplification (its local epsilon)
    is matched by DP-FedAvg, with noise on the sum (the paper's reading)
    and with noise on each client's update (`_local_dp`). Each DP-FedAvg's
    central epsilon at its noise is reported too.

A setting that two parts share (the local-DP ablation's central runs and
the utility's on SO-LR) is trained once per process (`_train`). Every run
resumes from its checkpoints under `output_dir/runs/`, so an
interrupted reproduction continues where it stopped.
"""

import dataclasses
import math
import os
from typing import Callable, Optional, Sequence

from experiments.infra import atomic_files
from experiments.runner import report
from experiments.runner import stats
from experiments.studies import paper
from tff_dprec.accounting import calibration

# Paper task -> the experiments' task on the paper's data.
REAL_TASKS = (('mnist', 'mnist'), ('emnist', 'emnist'),
              ('shakespeare', 'shakespeare'))
# Always available: (paper task, experiments' task).
STAND_INS = (('stackoverflow_lr', 'stackoverflow_lr'), ('mnist', 'digits'))
UTILITY_METHODS = (paper.DP_REC, paper.DP_FEDAVG, paper.DDG16, paper.DDG12)
ABLATION_TASK = 'stackoverflow_lr'
# The paper's Figure 2: epsilon 3, 7 bits.
REFERENCE_EPSILON = 3.0
REFERENCE_BITS = 7
BITS = (1, 2, 4, 7)  # Trained (the cost of a run grows as 2^bits).
EPSILON_BITS = tuple(range(1, 13))  # Accounted only.
LOCAL_DP_EPSILONS = (1.0, 3.0)  # The paper's local-DP comparison.
# DP-FedAvg at DP-REC's local epsilon, two ways (see `_local_dp`).
DP_FEDAVG_SUM_NOISE = "DP-FedAvg, sum noise at REC's local eps"
DP_FEDAVG_CLIENT_NOISE = "DP-FedAvg, client noise at REC's local eps"

# --quick: toy runs on tiny embedded StackOverflow data (code path only).
QUICK_TRAINING = dict(rounds=2, clients_per_round=4, eval_every=10,
                      embedded_config=dict(
                          seed=3, train_clients=40, heldout_clients=5,
                          test_clients=15, num_words=300, num_tags=30,
                          num_topics=6, mean_examples=12.0,
                          std_examples=30.0, max_examples=200))
QUICK_BITS = (1, 2)


@dataclasses.dataclass
class Runs:
  """What one `training.run` call trained: records of every seed."""
  records: list
  setting: str  # The budget, e.g. '10 rounds x 40 clients, 3 seeds'.
  context: dict  # Reference rows (initial model, frequent tags), in %.
  rounds: int  # As configured (a run may stop earlier, see its record).

  def references(self) -> str:
    return '; '.join(f'{name} {100 * value:.2f}'
                     for name, value in report.baselines(self.context))

  def of(self, aggregator: str) -> list:
    return [r for r in self.records if r['aggregator'] == aggregator]


# Runs this process trained, by setting (`_setting_key`): a part that asks
# for runs another part trained at the same setting takes their records
# (the local-DP ablation's central runs are the utility's on SO-LR).
_TRAINED = {}


def _setting_key(config, run_config) -> tuple:
  """The reproduction's folder, and everything a run depends on but its
  aggregators and its own folder."""
  return config.output_dir, repr(sorted(
      (k, v) for k, v in run_config.asdict().items()
      if k not in ('aggregators', 'output_dir')))


def _train(config, task: str, name: str, aggregators: Sequence[str],
           **overrides) -> Runs:
  """Trains `aggregators` for `config.training_seeds` seeds (resumable).

  Runs of the same setting that this process trained before (under another
  part's `name`) are taken from there, not trained again.
  """
  from experiments.runner import config as config_lib  # pylint: disable=g-import-not-at-top
  from experiments.data import task_registry  # pylint: disable=g-import-not-at-top
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  seeds = min(2, config.training_seeds) if config.quick else (
      config.training_seeds)
  kwargs = dict(data_dir=config.data_dir)
  kwargs.update(task_registry.get(task).reproduction)
  if config.quick:
    # Its own data directory: the tiny data must not replace data_cache's.
    kwargs.update(QUICK_TRAINING,
                  data_dir=os.path.join(config.output_dir, 'quick_data'))
  kwargs.update(overrides)
  run_config = config_lib.RunConfig(
      task=task, aggregators=tuple(aggregators), num_seeds=seeds,
      output_dir=os.path.join(config.output_dir, 'runs', name),
      progress=False, **kwargs)
  earlier = _TRAINED.get(_setting_key(config, run_config))
  if earlier is not None and set(aggregators) <= {
      r['aggregator'] for r in earlier.records}:
    return dataclasses.replace(earlier, records=[
        r for r in earlier.records if r['aggregator'] in aggregators])
  context = {}
  records = training.run(run_config, print_fn=lambda *args: None,
                         context_out=context)
  rounds = run_config.rounds or task_registry.get(task).defaults.rounds
  first = records[0]
  runs = Runs(records, f'{rounds} rounds x {first["clients_per_round"]} '
                       f'clients, {seeds} seeds', context, rounds)
  _TRAINED[_setting_key(config, run_config)] = runs
  return runs


def _metric(records) -> tuple:
  """(mean %, SE %) over seeds; SE None for one seed."""
  return stats.mean_se([100.0 * r['final_metric'] for r in records])


def _note(records, quick, extra='') -> str:
  mean, se = _metric(records)
  se_text = 'no SE (1 seed)' if se is None else f'+- {se:.2f} (SE)'
  note = (f"{records[0]['data_source']} data; mean {mean:.2f} {se_text} over "
          f'{len(records)} seeds: ' +
          ', '.join(f"{100 * r['final_metric']:.2f}" for r in records) + '.')
  if extra:
    note += ' ' + extra
  if quick:
    note = 'TOY RUN (--quick), not comparable. ' + note
  return note


def _epsilons(config, paper_task) -> list:
  if config.quick:
    return [1.0]
  return sorted({e.epsilon for e in paper.PAPER
                 if e.task == paper_task and e.quantity == 'metric' and
                 e.epsilon is not None})


def utility_cells(config, log: Callable[[str], None]) -> list:
  """Table 1's accuracies on the data we have; see the module docstring."""
  from experiments.data import task_types  # pylint: disable=g-import-not-at-top
  settings = ((('stackoverflow_lr', 'stackoverflow_lr'),) if config.quick
              else REAL_TASKS + STAND_INS)
  methods = (paper.DP_REC, paper.DP_FEDAVG) if config.quick else UTILITY_METHODS
  cells = []
  for paper_task, task in settings:
    stand_in = task != paper_task  # The digits for MNIST.
    epsilons = _epsilons(config, paper_task)
    for k, epsilon in enumerate(epsilons):
      try:
        runs = _train(config, task, f'utility/{task}/eps{epsilon:g}',
                      [paper.AGGREGATORS[m] for m in methods],
                      target_epsilon=epsilon)
      except task_types.MissingDataError as e:
        cells.extend(paper.paper_cell(paper_task, method, missing, 'metric',
                                   None, f'{task}: not run', f'no data: {e}')
                     for missing in epsilons[k:] for method in methods)
        log(f'utility {task}: no data')
        break
      source = runs.records[0]['data_source']
      basis = (f'{task}, {source} data' +
               (f' (stand-in for {paper_task})' if stand_in else '') +
               f', {runs.setting}')
      for method in methods:
        records = runs.of(paper.AGGREGATORS[method])
        cells.append(paper.paper_cell(
            paper_task, method, epsilon, 'metric', _metric(records)[0],
            basis, _note(records, config.quick, runs.references() + '.')))
      log(f'utility {task} epsilon={epsilon:g}: ' + ', '.join(
          f'{m} {_metric(runs.of(paper.AGGREGATORS[m]))[0]:.2f}'
          for m in methods))
  return cells


@dataclasses.dataclass
class Ablations:
  """The ablations' measurements, for the cells and the plots."""
  clip_ratio: float = math.nan
  reference_bits: int = REFERENCE_BITS
  context: dict = dataclasses.field(default_factory=dict)  # Reference rows.
  # What dp_rec_epsilon needs besides c and bits (population, rounds, ...).
  common: dict = dataclasses.field(default_factory=dict)
  bits_epsilon: dict = dataclasses.field(default_factory=dict)  # b -> eps
  bits_metric: dict = dataclasses.field(default_factory=dict)  # b -> records
  local: list = dataclasses.field(default_factory=list)  # dicts per epsilon


  def to_dict(self) -> dict:
    """ablations.json: every measurement, each run by seed."""
    def runs(records):
      return [dict(seed=r['seed'], final_metric=r['final_metric'],
                   epsilon=r['epsilon'], params=r['params'])
              for r in records]
    return dict(
        task=ABLATION_TASK, clip_ratio=self.clip_ratio,
        reference_bits=self.reference_bits,
        reference_epsilon=REFERENCE_EPSILON, accounting_setting=self.common,
        context=self.context,
        bits_epsilon={str(b): e for b, e in self.bits_epsilon.items()},
        bits_runs={str(b): runs(r) for b, r in self.bits_metric.items()},
        local=[dict({k: v for k, v in e.items() if k != 'records'},
                    runs={m: runs(r) for m, r in e['records'].items()})
               for e in self.local])


def ablation_cells(config, log: Callable[[str], None]) -> tuple:
  """(cells, Ablations): the bit-width and local-DP ablations."""
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  result, cells = Ablations(), []
  bits_list = QUICK_BITS if config.quick else BITS
  reference_bits = max(bits_list) if config.quick else REFERENCE_BITS
  reference = _train(config, ABLATION_TASK, f'ablation_bits/b{reference_bits}',
                     ['dp_rec'], target_epsilon=REFERENCE_EPSILON,
                     bits=reference_bits)
  first = reference.records[0]
  c = first['params']['clip_ratio']
  result.clip_ratio, result.reference_bits = c, reference_bits
  result.context = reference.context
  common = dict(population=first['population'],
                clients_per_round=first['clients_per_round'],
                rounds=reference.rounds, delta=first['delta'],
                num_groups=first['params']['num_groups'])
  result.common = common
  for bits in sorted(set(EPSILON_BITS) | set(bits_list)):
    result.bits_epsilon[bits] = accounting.dp_rec_epsilon(
        clip_ratio=c, bits=bits, **common)
  for bits in bits_list:
    if bits == reference_bits:
      runs = reference
    else:
      runs = _train(config, ABLATION_TASK, f'ablation_bits/b{bits}',
                    ['dp_rec'], bits=bits, clip_ratio=c,
                    target_epsilon=calibration.round_up(
                        result.bits_epsilon[bits]))
    records = runs.of('dp_rec')
    result.bits_metric[bits] = records
    cells.append(paper.Cell(
        ABLATION_TASK, paper.DP_REC, records[0]['epsilon'], 'metric', None,
        _metric(records)[0],
        f'ablation: bit width, {bits} bit{"s" if bits > 1 else ""} per '
        f'group, c = {c:.4g} fixed '
        f'(calibrated for epsilon {REFERENCE_EPSILON:g} at '
        f'{reference_bits} bits); {runs.setting}',
        _note(records, config.quick, reference.references() + '.')))
    log(f'ablation bits={bits}: epsilon={records[0]["epsilon"]:.3g} '
        f'metric={_metric(records)[0]:.2f}')
  for epsilon in ((1.0,) if config.quick else LOCAL_DP_EPSILONS):
    cells.extend(_local_dp(config, epsilon, result, log))
  return cells, result


def _local_dp(config, epsilon, result, log) -> list:
  """DP-REC and DP-FedAvg at central `epsilon`, and DP-FedAvg at REC's local.

  DP-REC's local epsilon (one participation, no amplification, against a
  server that sees its message) is matched two ways; both use the smallest
  noise multiplier z whose single Gaussian release of one update (q = 1,
  one step) has at most that epsilon at the same delta:
  * sum noise (the paper's reading): TFF's DP-FedAvg with noise z C on the
    sum. Its guarantee per participation holds only against a server that
    sees the noisy sum alone (secure aggregation), not individual updates.
  * client noise: every client adds N(0, (z C)^2) to its clipped update, a
    guarantee against a server that sees every update, like DP-REC's. The
    sum of B such noises is one Gaussian of stddev sqrt(B) z C, so the
    simulation runs DP-FedAvg at noise multiplier sqrt(B) z.
  Both report their central epsilon at the noise they add to the sum.
  """
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  central = _train(config, ABLATION_TASK, f'ablation_local/eps{epsilon:g}',
                   ['dp_rec', 'dp_fedavg'], target_epsilon=epsilon)
  rec = central.of('dp_rec')
  first = rec[0]
  delta = first['delta']
  local = first['local_epsilon_per_participation']
  z, fedavg_local_epsilon = _one_release_noise(local, delta)
  federation = dict(population=first['population'],
                    clients_per_round=first['clients_per_round'],
                    rounds=central.rounds, delta=delta)
  client_z = z * math.sqrt(first['clients_per_round'])
  variants = {}
  for method, suffix, noise in ((DP_FEDAVG_SUM_NOISE, 'fedavg_local', z),
                                (DP_FEDAVG_CLIENT_NOISE, 'fedavg_client_noise',
                                 client_z)):
    central_epsilon = accounting.dp_fedavg_epsilon(noise_multiplier=noise,
                                                   **federation)
    runs = _train(config, ABLATION_TASK,
                  f'ablation_local/eps{epsilon:g}_{suffix}', ['dp_fedavg'],
                  noise_multiplier=noise,
                  target_epsilon=calibration.round_up(central_epsilon))
    variants[method] = (noise, central_epsilon, runs.of('dp_fedavg'))
  entry = dict(epsilon=epsilon, local_epsilon=local, noise_multiplier=z,
               context=central.context,
               fedavg_local_epsilon=fedavg_local_epsilon,
               fedavg_central_epsilon=variants[DP_FEDAVG_SUM_NOISE][1],
               client_noise_multiplier=client_z,
               client_noise_central_epsilon=variants[
                   DP_FEDAVG_CLIENT_NOISE][1],
               fedavg_central_noise=central.of('dp_fedavg')[0]['params'][
                   'noise_multiplier'],
               records={paper.DP_REC: rec,
                        paper.DP_FEDAVG: central.of('dp_fedavg'),
                        **{m: v[2] for m, v in variants.items()}})
  result.local.append(entry)
  log(f'ablation local DP epsilon={epsilon:g}: local {local:.3g}, z={z:.3g}, '
      + ', '.join(f'{m} {_metric(r)[0]:.2f}'
                  for m, r in entry['records'].items()))
  return _local_dp_cells(config, entry, central)


def _one_release_noise(local_epsilon: float, delta: float):
  """(z, its epsilon): the smallest z whose one Gaussian release meets it."""
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  one_release = dict(population=1, clients_per_round=1, rounds=1,
                     delta=delta)
  z = accounting.calibrate_dp_fedavg_noise(target_epsilon=local_epsilon,
                                           **one_release)
  return z, accounting.dp_fedavg_epsilon(noise_multiplier=z, **one_release)


def _local_dp_cells(config, entry, central) -> list:
  """The four cells of one `_local_dp` entry, with how each was matched."""
  local, z = entry['local_epsilon'], entry['noise_multiplier']
  client_z = entry['client_noise_multiplier']
  basis = (f'ablation: local DP at central epsilon {entry["epsilon"]:g}; '
           f'{central.setting}')
  references = central.references() + '.'
  matched = (f'z = {z:.4g}: one release of one update has epsilon '
             f'{entry["fedavg_local_epsilon"]:.4g} <= {local:.4g}')
  cells = []
  for method, note in (
      (paper.DP_REC, f'local epsilon per participation {local:.4g}.'),
      (paper.DP_FEDAVG, 'z calibrated to the central epsilon: '
                     f"{entry['fedavg_central_noise']:.4g}."),
      (DP_FEDAVG_SUM_NOISE,
       f'{matched}, noise z C on the sum (holds against a server that sees '
       'only the noisy sum); its central epsilon is '
       f"{entry['fedavg_central_epsilon']:.4g}."),
      (DP_FEDAVG_CLIENT_NOISE,
       f'{matched}, noise z C on each update (sum noise sqrt(B) z = '
       f'{client_z:.4g}); its central epsilon is '
       f"{entry['client_noise_central_epsilon']:.4g}.")):
    records = entry['records'][method]
    cells.append(paper.Cell(ABLATION_TASK, method, records[0]['epsilon'],
                         'metric', None, _metric(records)[0], basis,
                         _note(records, config.quick, f'{note} {references}')))
  return cells


def write_json(output_dir: str, result: Ablations) -> str:
  return atomic_files.write_json(
      os.path.join(output_dir, 'ablations.json'), result.to_dict())


def write_plots(output_dir: str, result: Ablations) -> list:
  """ablation_bits.png and ablation_local_dp.png; their paths."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  paths = []
  if result.bits_metric:
    paths.append(_plot_bits(output_dir, result))
  if result.local:
    paths.append(_plot_local_dp(output_dir, result))
  return paths


def _save(fig, path):
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  with atomic_files.replacing_path(path, suffix='.png') as tmp:
    fig.savefig(tmp)
  plt.close(fig)
  return path


def _plot_bits(output_dir, result):
  """Recall and epsilon against the bit width at fixed c."""
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, left = plt.subplots(figsize=(5.5, 4), dpi=120)
  bits = sorted(result.bits_metric)
  stats = [_metric(result.bits_metric[b]) for b in bits]
  means = [m for m, _ in stats]
  errors = [0.0 if se is None else se for _, se in stats]
  left.errorbar(bits, means, yerr=errors, marker='o', capsize=3,
                color='C0', label='DP-REC R@5 (mean +- SE)')
  left.set_xlabel('index bits per group')
  left.set_ylabel('recall@5 (%)', color='C0')
  right = left.twinx()
  eps_bits = sorted(result.bits_epsilon)
  right.plot(eps_bits, [result.bits_epsilon[b] for b in eps_bits],
             marker='s', linestyle='--', color='C3',
             label='epsilon (PLD accounting)')
  right.set_ylabel('epsilon (PLD accounting)', color='C3')
  right.set_ylim(bottom=0)
  for k, (name, value) in enumerate(report.baselines(result.context)):
    left.axhline(100 * value, color='0.5', linestyle=(':', '-.')[k % 2],
                 linewidth=1, label=name)
  left.set_ylim(bottom=0)
  left.set_title(f'{ABLATION_TASK}: bit width at fixed c = '
                 f'{result.clip_ratio:.3g}')
  handles = (left.get_legend_handles_labels()[0] +
             right.get_legend_handles_labels()[0])
  labels = (left.get_legend_handles_labels()[1] +
            right.get_legend_handles_labels()[1])
  left.legend(handles, labels, loc='lower right', fontsize='small')
  fig.tight_layout()
  return _save(fig, os.path.join(output_dir, 'ablation_bits.png'))


def _plot_local_dp(output_dir, result):
  """DP-REC against DP-FedAvg at DP-REC's local epsilon, as bars."""
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6.8, 4), dpi=120)
  methods = list(result.local[0]['records'])
  width = 0.8 / len(methods)
  for k, method in enumerate(methods):
    stats = [_metric(e['records'][method]) for e in result.local]
    ax.bar([i + (k - (len(methods) - 1) / 2) * width
            for i in range(len(result.local))],
           [m for m, _ in stats], width,
           yerr=[0.0 if se is None else se for _, se in stats], capsize=3,
           label=method, color=f'C{k}')
  ax.set_xticks(range(len(result.local)))
  ax.set_xticklabels([f"central eps {e['epsilon']:g}\n(DP-REC local eps "
                      f"{e['local_epsilon']:.2f})" for e in result.local])
  for k, (name, value) in enumerate(report.baselines(
      result.local[0]['context'])):
    ax.axhline(100 * value, color='0.5', linestyle=(':', '-.')[k % 2],
               linewidth=1, label=name)
  ax.set_ylabel('recall@5 (%)')
  ax.set_title(f'{ABLATION_TASK}: DP-FedAvg at DP-REC\'s local epsilon')
  # Room above the bars for the legend.
  ax.set_ylim(0, 1.6 * ax.get_ylim()[1])
  ax.legend(fontsize='small', loc='upper left', ncol=2)
  fig.tight_layout()
  return _save(fig, os.path.join(output_dir, 'ablation_local_dp.png'))


def markdown(result: Optional[Ablations]) -> list:
  """The ablations' tables of epsilon per width and of the local match."""
  if result is None:
    return []
  lines = []
  if result.bits_epsilon:
    lines += [f'Bit width: c = {result.clip_ratio:.6g} (calibrated for '
              f'epsilon {REFERENCE_EPSILON:g} at {result.reference_bits} '
              'bits, '
              'PLD accounting), epsilon per width at that c:', '',
              '| bits per group | ' + ' | '.join(
                  str(b) for b in sorted(result.bits_epsilon)) + ' |',
              '|---|' + '---|' * len(result.bits_epsilon),
              '| epsilon | ' + ' | '.join(
                  f'{result.bits_epsilon[b]:.4g}'
                  for b in sorted(result.bits_epsilon)) + ' |', '',
              '![bit width](ablation_bits.png)', '']
  if result.local:
    lines += ['Local DP: z is the smallest noise multiplier whose single '
              'Gaussian release of one update has at most DP-REC\'s local '
              'epsilon (same delta, dp_accounting\'s RDP conversion for '
              'both). "Sum noise" adds z C to the sum (the paper\'s '
              'reading; the guarantee holds only against a server that '
              'sees the noisy sum alone); "client noise" adds z C to each '
              'update (a guarantee against a server that sees every update, '
              'as DP-REC\'s), simulated as sqrt(B) z on the sum. The central '
              'epsilon of each is at the noise on the sum.', '',
              '| central eps | DP-REC local eps | z | its local eps | '
              'central eps, sum noise | sqrt(B) z | central eps, client '
              'noise | z (central calibration) |',
              '|---|---|---|---|---|---|---|---|']
    for e in result.local:
      lines.append(f"| {e['epsilon']:g} | {e['local_epsilon']:.4g} | "
                   f"{e['noise_multiplier']:.4g} | "
                   f"{e['fedavg_local_epsilon']:.4g} | "
                   f"{e['fedavg_central_epsilon']:.4g} | "
                   f"{e['client_noise_multiplier']:.4g} | "
                   f"{e['client_noise_central_epsilon']:.4g} | "
                   f"{e['fedavg_central_noise']:.4g} |")
    lines += ['', '![local DP](ablation_local_dp.png)', '']
  return lines
