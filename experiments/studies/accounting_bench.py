"""`python -m experiments.bench accounting`: where accounting spends its time.

Measured, each in a fresh process (no calibration cache, nothing kept from
another measurement):

* a cold DP-REC calibration (`calibrate_clip_ratio`, default accounting)
  at the main job's setting (N = 342,477, B = 40, T = 50, epsilon 1, delta
  N^-1.1, one group, the 5 bits the planner chooses from c there) and at
  Fashion-MNIST's (N = 100, B = 10, T = 1,000, epsilon 3, 10 groups, 3
  bits), split into phases: the Renyi bounds of the channel, the
  subsampling and Renyi conversion, the privacy profiles, their convex
  hull, the PLD's construction, its composition (FFT), its epsilon, and
  the rest (the search, its bookkeeping), with the number of epsilons the
  search evaluated;
* the planner's cold start at the main job's setting (`python -m
  tff_dprec.plan ... --json`, a fresh process, imports included);
* the main job's planner lines (`experiments.runner.planning.print_plan`,
  through an empty calibration cache), after the run's own calibrations of
  its aggregators (`run_setup.calibrate`, not timed), as the main job
  prints them before it trains;
* a run's epsilon after each of 1,000 rounds at Fashion-MNIST's setting
  (what `registry`'s `epsilon_after` costs a round).

`--baseline_root=PATH` measures the same in a checkout of another version
of the code (its `tff_dprec` first on the path), side by side, with the
speed-up. A phase is the time inside its functions, not counting the
other phases' functions they call; where a version has no such function
the phase is empty there. Timings are wall times of one run each: compare
them on a quiet machine.
"""

import json
import os
import subprocess
import sys
import time

from absl import app
from absl import flags

# (module, attribute, phase); 'Class.method' patches a method. Functions of
# either version; a missing one is skipped.
_PHASES = (
    ('tff_dprec.accounting.channel', '_log_laplace_k', 'channel bounds'),
    ('tff_dprec.accounting.channel', '_psi', 'channel bounds'),
    ('tff_dprec.accounting.channel', '_reverse', 'channel bounds'),
    ('tff_dprec.accounting.channel', '_substitution_rdp', 'channel bounds'),
    ('tff_dprec.accounting.channel', '_message_rdp', 'channel bounds'),
    ('tff_dprec.accounting.rdp_bounds', 'zhu_wang_upper_bound',
     'subsampling, RDP to epsilon'),
    ('dp_accounting.rdp.rdp_privacy_accountant', 'compute_epsilon',
     'subsampling, RDP to epsilon'),
    ('tff_dprec.accounting.profile', 'from_rdp', 'profiles'),
    ('tff_dprec.accounting.profile', 'triangle', 'profiles'),
    ('tff_dprec.accounting.profile', 'minimum', 'profiles'),
    ('tff_dprec.accounting.profile', 'subsampled', 'profiles'),
    ('tff_dprec.accounting.profile', 'convex_upper', 'convex hull'),
    ('tff_dprec.accounting.loss_pmf', 'connect_dots', 'PLD construction'),
    ('dp_accounting.pld.pld_pmf',
     'create_pmf_pessimistic_connect_dots_fixed_gap', 'PLD construction'),
    ('tff_dprec.accounting.loss_pmf', 'SelfComposer.__init__',
     'composition (FFT)'),
    ('tff_dprec.accounting.loss_pmf', 'SelfComposer.compose',
     'composition (FFT)'),
    ('tff_dprec.accounting.loss_pmf', 'LossPmf.compose', 'composition (FFT)'),
    ('dp_accounting.pld.privacy_loss_distribution',
     'PrivacyLossDistribution.self_compose', 'composition (FFT)'),
    ('dp_accounting.pld.privacy_loss_distribution',
     'PrivacyLossDistribution.compose', 'composition (FFT)'),
    ('tff_dprec.accounting.loss_pmf', 'LossPmf.epsilon_for_delta',
     'epsilon from the PLD'),
    ('dp_accounting.pld.privacy_loss_distribution',
     'PrivacyLossDistribution.get_epsilon_for_delta', 'epsilon from the PLD'),
)
PHASE_ORDER = ('channel bounds', 'subsampling, RDP to epsilon', 'profiles',
               'convex hull', 'PLD construction', 'composition (FFT)',
               'epsilon from the PLD', 'search and the rest')
CALIBRATIONS = {
    'main job': dict(population=342477, clients_per_round=40, rounds=50,
                     target_epsilon=1.0, bits=5, num_groups=1),
    'Fashion-MNIST': dict(population=100, clients_per_round=10, rounds=1000,
                          target_epsilon=3.0, bits=3, num_groups=10),
}
PLAN_ARGS = ('--population=342477', '--clients_per_round=40', '--rounds=50',
             '--target_epsilon=1', '--dimension=50050', '--json')
# A Fashion-MNIST run's epsilon per round: its calibrated c, bits, groups.
ROUNDS_RUN = dict(clip_ratio=0.381057, bits=3, num_groups=10, population=100,
                  clients_per_round=10)
ROUNDS = 1000
# The measurements a child process makes (`run_child`).
CHILDREN = ('calibration', 'planner_lines', 'rounds')


class _PhaseTimer:
  """Exclusive wall time per phase of the patched functions."""

  def __init__(self):
    self.seconds = {}
    self._stack = []  # [phase, start, time in nested patched calls]
    self._installed = []  # (owner, name, original)

  def wrap(self, fn, phase):
    def timed(*args, **kwargs):
      self._stack.append([phase, time.perf_counter(), 0.0])
      try:
        return fn(*args, **kwargs)
      finally:
        name, start, nested = self._stack.pop()
        spent = time.perf_counter() - start
        self.seconds[name] = self.seconds.get(name, 0.0) + spent - nested
        if self._stack:
          self._stack[-1][2] += spent
    timed.__wrapped__ = fn
    return timed

  def install(self):
    """Wraps every function of `_PHASES` this version has."""
    import importlib  # pylint: disable=g-import-not-at-top
    for module_name, attribute, phase in _PHASES:
      try:
        owner = importlib.import_module(module_name)
      except ImportError:
        continue
      *path, name = attribute.split('.')
      for part in path:
        owner = getattr(owner, part, None)
      if owner is not None and hasattr(owner, name):
        original = getattr(owner, name)
        self._installed.append((owner, name, original))
        setattr(owner, name, self.wrap(original, phase))

  def uninstall(self):
    while self._installed:
      owner, name, original = self._installed.pop()
      setattr(owner, name, original)


def child_calibration(name: str) -> dict:
  """One cold calibration, by phase (run in a fresh process)."""
  timer = _PhaseTimer()
  timer.install()
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  from tff_dprec.accounting import dp_rec_accountant  # pylint: disable=g-import-not-at-top
  evaluations = []
  epsilon = dp_rec_accountant.dp_rec_epsilon

  def counted(**kwargs):
    evaluations.append(kwargs.get('accounting', 'min_pld_rdp'))
    return epsilon(**kwargs)

  dp_rec_accountant.dp_rec_epsilon = counted
  setting = dict(CALIBRATIONS[name])
  start = time.perf_counter()
  c = accounting.calibrate_clip_ratio(
      delta=accounting.default_delta(setting['population']), **setting)
  total = time.perf_counter() - start
  phases = dict(timer.seconds)
  phases['search and the rest'] = total - sum(phases.values())
  return dict(total=total, phases=phases, clip_ratio=c,
              evaluations=len(evaluations),
              pld_evaluations=evaluations.count('min_pld_rdp'))


def child_rounds(sample: int) -> dict:
  """A run's epsilon after each round: every round where the code keeps
  its composition from round to round (`DpRecEpsilonCurve`), else every
  `sample`-th round (each composed from scratch)."""
  from tff_dprec import accounting  # pylint: disable=g-import-not-at-top
  kwargs = dict(ROUNDS_RUN, delta=accounting.default_delta(
      ROUNDS_RUN['population']))
  start = time.perf_counter()
  if hasattr(accounting, 'DpRecEpsilonCurve'):
    curve = accounting.DpRecEpsilonCurve(**kwargs)
    values = [curve.epsilon(r) for r in range(1, ROUNDS + 1)]
  else:
    values = [accounting.dp_rec_epsilon(rounds=r, **kwargs)
              for r in range(1, ROUNDS + 1, sample)]
  total = time.perf_counter() - start
  return dict(rounds=len(values), per_round=total / len(values),
              last=values[-1])


def child_planner_lines() -> dict:
  """The main job's planner lines after the run's calibrations, cold."""
  import tempfile  # pylint: disable=g-import-not-at-top
  os.environ['TFF_DPREC_CALIBRATION_CACHE'] = tempfile.mkdtemp()
  try:
    from tff_dprec import worker_reaper  # pylint: disable=g-import-not-at-top
  except ImportError:  # A --baseline_root from before it moved there.
    from experiments.infra import worker_reaper  # pylint: disable=g-import-not-at-top
  worker_reaper.install()
  from experiments.runner import config as config_lib  # pylint: disable=g-import-not-at-top
  from experiments.runner import planning  # pylint: disable=g-import-not-at-top
  from experiments.runner import run_setup  # pylint: disable=g-import-not-at-top
  # As the main job (`python -m experiments.run --task=stackoverflow_lr`):
  # its task, its calibrations (not timed), then its planner lines.
  # A --baseline_root from before the constant: its calibrated rows.
  rows = getattr(config_lib, 'DEFAULT_AGGREGATORS',
                 ('dp_rec', 'ddgauss16', 'dp_fedavg', 'dp_fedavg_rdp'))
  config = config_lib.RunConfig(task='stackoverflow_lr', aggregators=rows)
  task = run_setup.create_task(config)
  config = config.resolved(task)
  calibrated = run_setup.calibrate(task, config)
  start = time.perf_counter()
  planning.print_plan(task, config, calibrated['dp_rec'],
                      print_fn=lambda line: None)
  seconds = time.perf_counter() - start
  worker_reaper.reap()
  return dict(seconds=seconds)


def _run_child(root, *args):
  """JSON of this module's child mode in a fresh process on `root`."""
  env = dict(os.environ, PYTHONPATH=root, TFF_DPREC_CALIBRATION_CACHE='off')
  out = subprocess.run([sys.executable, os.path.abspath(__file__), *args],
                       cwd=root, env=env, check=True, capture_output=True,
                       text=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def _plan_seconds(root):
  env = dict(os.environ, PYTHONPATH=root, TFF_DPREC_CALIBRATION_CACHE='off')
  start = time.perf_counter()
  subprocess.run([sys.executable, '-m', 'tff_dprec.plan', *PLAN_ARGS],
                 cwd=root, env=env, check=True, capture_output=True)
  return time.perf_counter() - start


def measure(root, rounds_sample):
  """Every measurement on the code at `root`."""
  out = {name: _run_child(root, '--child=calibration', f'--name={name}')
         for name in CALIBRATIONS}
  out['plan'] = _plan_seconds(root)
  out['planner_lines'] = _run_child(root, '--child=planner_lines')['seconds']
  out['rounds'] = _run_child(root, '--child=rounds',
                             f'--sample={rounds_sample}')
  return out


def report(new, old=None):
  """The measurements as lines of text (`old`: the baseline's, or None)."""
  lines = []

  def row(label, value, before=None, unit='s'):
    text = f'{label:<34} {value:>9.3f} {unit}'
    if before is not None:
      text += (f'   baseline {before:>9.3f} {unit}   speed-up '
               f'{before / value:>6.1f}x')
    lines.append(text)

  for name in CALIBRATIONS:
    got, was = new[name], (old or {}).get(name)
    lines.append(f'Cold calibration at the {name} setting: c = '
                 f'{got["clip_ratio"]!r}, {got["evaluations"]} epsilons '
                 f'({got["pld_evaluations"]} with the PLD)' + (
                     '' if was is None else
                     f'; baseline c = {was["clip_ratio"]!r}, '
                     f'{was["evaluations"]} epsilons'))
    for phase in PHASE_ORDER:
      value = got['phases'].get(phase, 0.0)
      share = f'({100 * value / got["total"]:4.1f}%)'
      before = None if was is None else was['phases'].get(phase, 0.0)
      text = f'  {phase:<30} {value:>7.3f} s {share}'
      if before is not None:
        share = 100 * before / was['total']
        text += f'   baseline {before:>7.3f} s ({share:4.1f}%)'
      lines.append(text)
    row('  total', got['total'], None if was is None else was['total'])
  row('Planner, cold start (main job)', new['plan'],
      None if old is None else old['plan'])
  row("Main job's planner lines, cold", new['planner_lines'],
      None if old is None else old['planner_lines'])
  row(f'Epsilon per round, {ROUNDS}-round run', new['rounds']['per_round'] *
      1e3, None if old is None else old['rounds']['per_round'] * 1e3, 'ms')
  return lines


def main(baseline_root=None, rounds_sample: int = 50) -> None:
  """`experiments.bench accounting`: this checkout's figures, and those of
  the checkout at `baseline_root` beside them (its per-round cost from
  every `rounds_sample`-th round where it composes each round from
  scratch, `child_rounds`)."""
  root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  new = measure(root, 1)
  old = None
  if baseline_root:
    old = measure(os.path.abspath(baseline_root), rounds_sample)
  print('\n'.join(report(new, old)))


def run_child(child: str, name=None, sample: int = 1) -> dict:
  """One measurement of a child process (`_run_child`), as JSON prints it.

  Args:
    child: 'calibration', 'planner_lines' or 'rounds' (`CHILDREN`).
    name: For 'calibration', the setting (a key of `CALIBRATIONS`).
    sample: For 'rounds', measure every `sample`-th round.
  """
  if child == 'calibration':
    return child_calibration(name)
  if child == 'planner_lines':
    return child_planner_lines()
  return child_rounds(sample)


def _define_child_flags() -> None:
  """A child's flags (defined only when this file runs as a program)."""
  flags.DEFINE_enum('child', None, CHILDREN, 'The measurement.')
  flags.DEFINE_enum('name', None, list(CALIBRATIONS),
                    '--child=calibration: the setting.')
  flags.DEFINE_integer('sample', 1, '--child=rounds: every sample-th round.',
                       lower_bound=1)
  flags.mark_flag_as_required('child')
  flags.register_multi_flags_validator(
      ['child', 'name'], lambda values: values['child'] != 'calibration' or (
          values['name'] is not None), '--child=calibration needs --name')


def _parse_child_flags(argv):
  """`app.run`'s parser: absl's flags, a bad one refused in one line, exit
  code 2, as `experiments.runner.cli.parse_flags` does (not imported here:
  it loads TensorFlow, and a baseline checkout may predate it)."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    _child_fail(' '.join(str(e).split()))


def _child_main(argv):
  if len(argv) > 1:
    _child_fail(f'Unexpected arguments: {argv[1:]}')
  print(json.dumps(run_child(flags.FLAGS.child, flags.FLAGS.name,
                             flags.FLAGS.sample)))


def _child_fail(error):
  print(f'error: {error}', file=sys.stderr)
  sys.exit(2)


if __name__ == '__main__':
  # Run as a script: its folder is not a package root (the code measured
  # comes from PYTHONPATH).
  if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(
      os.path.abspath(__file__)):
    sys.path.pop(0)
  _define_child_flags()
  app.run(_child_main, flags_parser=_parse_child_flags)
