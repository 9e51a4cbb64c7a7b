"""Trains a federated task with DP-REC and baselines at one privacy budget.

  python -m experiments.run --task=stackoverflow_lr

runs DP-REC, DDGauss (16 bits) and DP-FedAvg calibrated to epsilon = 1 at
delta = N^-1.1, each with its no-noise control, and FedAvg, on the embedded
StackOverflow data (342,477 training clients made on demand; or the real data
when it is in --data_dir), and writes per-round metrics, summary.json,
table.md and plots to --output_dir.
"""

import os
import sys
from typing import Optional

from absl import flags
# Imported before absl parses flags: Keras models built after a late
# TensorFlow import under `app.run` fail to build (empty inbound nodes).
import tensorflow as tf  # pylint: disable=unused-import  # noqa: F401

from experiments.runner import cli as cli_lib
from experiments.runner import config as config_lib
from tff_dprec.accounting import accountings


class FlagError(ValueError):
  """A bad flag value (reported in one line, exit code 2)."""


def validate_flags():
  """Raises FlagError for flag text that cannot be parsed.

  Every value is checked once, by `RunConfig` (`config_from_flags`).
  """
  parse_population(_POPULATION.value)
  if _GROUPING.value is not None:
    parse_grouping(_GROUPING.value)


def parse_population(text):
  try:
    return config_lib.parse_population(text)
  except ValueError as e:
    raise FlagError(str(e)) from None


def parse_grouping(text):
  if text in ('tensor', 'network'):
    return text
  try:
    return int(text)
  except ValueError:
    raise FlagError(  # pylint: disable=raise-missing-from
        f"--grouping must be 'tensor', 'network' or an int, found {text!r}.")


def config_from_flags():
  """The run's `RunConfig`, built once from the flags."""
  from experiments.runner import config  # pylint: disable=g-import-not-at-top
  return config.RunConfig(
      task=_TASK.value, aggregators=tuple(_AGGREGATORS.value),
      data_dir=_DATA_DIR.value, output_dir=_OUTPUT_DIR.value,
      rounds=_ROUNDS.value, clients_per_round=_CLIENTS_PER_ROUND.value,
      bits=_BITS.value,
      grouping=None if _GROUPING.value is None else parse_grouping(
          _GROUPING.value),
      noise_stddev=_NOISE_STDDEV.value, l2_clip=_L2_CLIP.value,
      noise_multiplier=_NOISE_MULTIPLIER.value, clip_ratio=_CLIP_RATIO.value,
      target_epsilon=_TARGET_EPSILON.value, delta=_DELTA.value,
      seed=_SEED.value, num_seeds=_NUM_SEEDS.value,
      eval_every=_EVAL_EVERY.value,
      eval_examples=_EVAL_EXAMPLES.value, client_lr=_CLIENT_LR.value,
      server_lr=_SERVER_LR.value, server_optimizer=_SERVER_OPTIMIZER.value,
      server_momentum=_SERVER_MOMENTUM.value, progress=_PROGRESS.value,
      downlink=_DOWNLINK.value, verify_clients=_VERIFY_CLIENTS.value,
      resume=_RESUME.value, insecure_test_seed=_INSECURE_TEST_SEED.value,
      workers=_WORKERS.value, jobs=jobs_from_flags(),
      accounting=_accounting_from_flag(),
      population=parse_population(_POPULATION.value))


def _accounting_from_flag() -> str:
  """--accounting, an earlier name mapped to today's with a `note:` line."""
  value = _ACCOUNTING.value
  if value in accountings.RENAMED:
    print('note: ' + accountings.renamed_notice(value, '--accounting'))
  return accountings.renamed(value)


def jobs_from_flags() -> int:
  """--jobs, else one process per core, at most one per run
  (`config.default_jobs`)."""
  if _JOBS.value is not None:
    return _JOBS.value
  return config_lib.default_jobs(len(_AGGREGATORS.value) * _NUM_SEEDS.value,
                                 workers=_WORKERS.value)


def _fail(error):
  """One line on stderr and exit code 2: no traceback, no help dump."""
  sys.stdout.flush()
  print(f'error: {error}', file=sys.stderr)
  sys.stderr.flush()
  # os._exit: TFF objects' __del__ at interpreter exit would print noise.
  os._exit(2)  # pylint: disable=protected-access


def execute(config, fail=None) -> Optional[str]:
  """Runs `config` as the command does; the one-line error of a refusal
  (missing data, another run's files, the budget, a full disk), else None.

  `fail`, if given, gets that line inside the handler, while the error's
  frames still live (the command's `_fail` exits there, before any of
  their `__del__` could print). Tests call `execute` in their own process
  (`tests.support.run_in_process`).
  """
  from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
  worker_reaper.install()
  from experiments.runner import checkpoints  # pylint: disable=g-import-not-at-top
  from experiments.runner import ledger  # pylint: disable=g-import-not-at-top
  from experiments.runner import aggregator_builders  # pylint: disable=g-import-not-at-top
  from experiments.data import task_types  # pylint: disable=g-import-not-at-top
  from experiments.runner import jobs  # pylint: disable=g-import-not-at-top
  from experiments.runner import training  # pylint: disable=g-import-not-at-top
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  try:
    if config.jobs > 1:
      jobs.run(config, print_plan=_PLAN.value)
    else:
      training.run(config, print_plan=_PLAN.value)
  except (task_types.MissingDataError,
          checkpoints.CheckpointConfigMismatchError,
          ledger.PrivacyLedgerError, ledger.LedgerConfigMismatchError,
          run_setup.OutputDirError, aggregator_builders.OverBudgetError,
          jobs.JobError) as e:
    return _refused(str(e), fail)
  except OSError as e:  # A full disk, say: one line naming the file.
    return _refused(cli_lib.write_failure(e), fail)
  return None


def _refused(message: str, fail) -> str:
  """Reaps TFF's workers; hands `message` to `fail` (if any), returns it."""
  from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
  worker_reaper.reap()
  if fail is not None:
    fail(message)
  return message


def main(argv):
  try:
    if len(argv) > 1:
      raise FlagError(f'Unexpected arguments: {argv[1:]}')
    validate_flags()
    config = config_from_flags()
  except (TypeError, ValueError) as e:
    _fail(e)
  cli_lib.quiet_logs()
  execute(config, fail=_fail)


def _define_flags():
  """Defined only when run as a program (tests import this module)."""
  _define_training_flags()
  _define_privacy_flags()
  _define_execution_flags()


def _define_training_flags():
  """What trains: the task, its data, aggregators, rounds and optimizers."""
  # pylint: disable=global-statement
  global _TASK, _AGGREGATORS, _ROUNDS, _CLIENTS_PER_ROUND, _SEED, _NUM_SEEDS
  global _DATA_DIR, _POPULATION, _OUTPUT_DIR, _EVAL_EVERY, _EVAL_EXAMPLES
  global _CLIENT_LR, _SERVER_LR, _SERVER_OPTIMIZER, _SERVER_MOMENTUM
  _TASK = flags.DEFINE_string(
      'task', 'stackoverflow_lr',
      'stackoverflow_lr, emnist, shakespeare, mnist or digits.')
  _AGGREGATORS = flags.DEFINE_list(
      'aggregators', list(config_lib.DEFAULT_AGGREGATORS),
      'Comma-separated: dp_rec, rec, dp_fedavg, dp_fedavg_rdp (DP-FedAvg '
      'under RDP, the reference for DDGauss), ddgauss16, ddgauss12, fedavg, '
      'dp_rec_exact_sample (DP-REC\'s exact-sample control), and <private '
      'method>_no_noise: the method\'s clip and sampling without noise (a '
      'control row: the cost of clipping apart from privacy).')
  _ROUNDS = flags.DEFINE_integer('rounds', None, 'Rounds (task default).')
  _CLIENTS_PER_ROUND = flags.DEFINE_integer('clients_per_round', None,
                                            'Clients per round (task default).')
  _SEED = flags.DEFINE_integer(
      'seed', 0, 'First seed (initial model, client sampling).')
  _NUM_SEEDS = flags.DEFINE_integer(
      'num_seeds', 3, 'Runs per aggregator, with seeds seed, seed+1, ...; the '
      'table gives mean +- standard error.')
  _DATA_DIR = flags.DEFINE_string(
      'data_dir', os.path.join('data_cache'),
      'Dataset directory (real data files, or where embedded data is cached).')
  _POPULATION = flags.DEFINE_string('population', None,
                                    config_lib.POPULATION_HELP)
  _OUTPUT_DIR = flags.DEFINE_string('output_dir', 'output',
                                    'Results directory (per task subfolder).')
  _EVAL_EVERY = flags.DEFINE_integer('eval_every', None,
                                     'Evaluate every N rounds (task default).')
  _EVAL_EXAMPLES = flags.DEFINE_integer(
      'eval_examples', None, 'Test examples for intermediate evaluations '
      '(default: the whole test set); the final evaluation always uses the '
      'whole test set.')
  _CLIENT_LR = flags.DEFINE_float('client_lr', None,
                                  'Client SGD learning rate.')
  _SERVER_LR = flags.DEFINE_float('server_lr', None, 'Server learning rate.')
  _SERVER_OPTIMIZER = flags.DEFINE_enum(
      'server_optimizer', None, ['adam', 'sgdm'],
      'Server optimizer (task default; the paper used sgdm for SO-LR).')
  _SERVER_MOMENTUM = flags.DEFINE_float(
      'server_momentum', None, 'Server SGD momentum (sgdm; task default).')


def _define_privacy_flags():
  """The aggregators' settings and the privacy budget."""
  # pylint: disable=global-statement
  global _BITS, _GROUPING, _NOISE_STDDEV, _L2_CLIP, _NOISE_MULTIPLIER
  global _CLIP_RATIO, _TARGET_EPSILON, _DELTA, _ACCOUNTING
  global _INSECURE_TEST_SEED
  _BITS = flags.DEFINE_integer('bits', None, 'DP-REC index bits per group.')
  _GROUPING = flags.DEFINE_string(
      'grouping', None, "DP-REC grouping: 'tensor', 'network' or an int.")
  _NOISE_STDDEV = flags.DEFINE_float('noise_stddev', None,
                                     'DP-REC prior stddev (task default).')
  _L2_CLIP = flags.DEFINE_float('l2_clip', None,
                                'DP-FedAvg / DDGauss clip (task default).')
  _NOISE_MULTIPLIER = flags.DEFINE_float(
      'noise_multiplier', None, 'DP-FedAvg only: this noise multiplier instead '
      'of the calibrated one (its epsilon must be within --target_epsilon).')
  _CLIP_RATIO = flags.DEFINE_float(
      'clip_ratio', None, 'DP-REC only: this clip ratio c = clip / '
      'noise_stddev instead of the calibrated one (its epsilon must be '
      'within --target_epsilon).')
  _TARGET_EPSILON = flags.DEFINE_float('target_epsilon', 1.0,
                                       'Privacy budget after all rounds.')
  _DELTA = flags.DEFINE_float('delta', None, 'Delta (default N^-1.1).')
  _ACCOUNTING = flags.DEFINE_enum(
      'accounting', accountings.DEFAULT_ACCOUNTING,
      list(accountings.ACCOUNTINGS) + list(accountings.RENAMED),
      "Privacy accounting of DP-REC and DP-FedAvg: 'min_pld_rdp' (default: "
      "the smaller of the certified PLD and RDP epsilons; 'pld' is its "
      "earlier name), 'rdp' (the RDP epsilon), both "
      "proven (docs/PRIVACY.md); or, for DP-REC, 'paper' (the paper's "
      "Theorem 1, unproven for grouped messages; DP-FedAvg then uses RDP). "
      "DDGauss has an RDP accountant only.")
  _INSECURE_TEST_SEED = flags.DEFINE_integer(
      'insecure_test_seed', None,
      'TESTS ONLY, NOT PRIVATE: DP-REC client seeds become deterministic '
      'functions of this value and the update, so reruns are reproducible.')


def _define_execution_flags():
  """How it runs: progress, the planner's lines, downlinks, resumption,
  processes."""
  # pylint: disable=global-statement
  global _PROGRESS, _PLAN, _DOWNLINK, _RESUME, _WORKERS, _JOBS
  global _VERIFY_CLIENTS
  _PROGRESS = flags.DEFINE_bool('progress', True, 'Show a progress bar.')
  _PLAN = flags.DEFINE_bool(
      'plan', True,
      "Print the planner's lines (python -m tff_dprec.plan at this setting: "
      'DP-REC against the baselines, its break-even) before training; '
      '--noplan skips them.')
  _DOWNLINK = flags.DEFINE_enum(
      'downlink', 'auto', ['auto', 'history', 'full'],
      'Server-to-client: history = the messages since a client last took part '
      '(or the full state when smaller; REC-based aggregators only), full = '
      'the model; auto = history for dp_rec and rec, full for the others.')
  _RESUME = flags.DEFINE_bool(
      'resume', True,
      'Continue from the newest valid checkpoint in --output_dir (rounds lost '
      'in a crash count as spent privacy); --noresume starts over and removes '
      'the old checkpoints.')
  _WORKERS = flags.DEFINE_integer(
      'workers', 0,
      'Run on this many TFF C++ worker processes on loopback (started and '
      'stopped by the run); 0 = the local execution context.')
  _JOBS = flags.DEFINE_integer(
      'jobs', None,
      'Train the (aggregator, seed) runs in this many processes side by side '
      '(default: one per core, at most one per run; 1 with --workers): one '
      'TFF process keeps one to two cores busy, and a run\'s fixed costs are '
      'serial. Each writes <output_dir>/<task>/jobs/job<j>.log, relayed '
      'line by line with a [job j] prefix, and the results are the same '
      'files as from one process. --jobs=1 trains in this process. s/round '
      'then counts the sharing of cores.')
  _VERIFY_CLIENTS = flags.DEFINE_integer(
      'verify_replay_clients', 3,
      'With history downlinks, replay this many clients and check their model '
      'equals the server\'s bit for bit.')


if __name__ == '__main__':
  cli_lib.run_main(_define_flags, main, __doc__)
