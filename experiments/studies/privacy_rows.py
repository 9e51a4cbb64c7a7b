"""Privacy rows of Table 1: epsilon at the paper's parameters and the
parameters calibrated to the paper's epsilon, under each accounting."""

import math
import warnings

from scipy import special

from experiments.studies import communication
from experiments.studies import paper
from experiments.studies import paper_models
from tff_dprec import accounting


def _delta(population):
  return population**-paper.paper_value('*', 'delta_exponent')


def _attempt(fn):
  """(value, '') or (None, why) for the accountant's domain failures."""
  try:
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', accounting.UnprovenPaperBoundWarning)
      return fn(), ''
  except accounting.OverheadExceedsDeltaError as e:
    return None, f'unreachable: {e}'
  except accounting.TargetUnreachableError as e:
    return None, f'unreachable: {e}'


def _rows(method, quantity, tasks):
  for entry in paper.PAPER:
    if (entry.method, entry.quantity) == (method, quantity) and (
        entry.task in tasks):
      yield entry.task, entry.epsilon, entry.value


def dp_rec_privacy_cells(task, epsilon, c, calibrate) -> list:
  """Epsilon at the paper's c, and c at the paper's epsilon, both ways."""
  fed = communication.federation(task, paper.DP_REC)
  common = dict(fed, delta=_delta(fed['population']))
  bits = paper.paper_int('*', 'bits', paper.DP_REC)
  groups = paper_models.model_stats(task).num_groups
  modes = (
      ('paper accounting (Theorem 1, total_bits = M b)',
       dict(total_bits=bits * groups, accounting='paper'),
       f'M = {groups} groups x {bits} bits as one index of {bits * groups} '
       'bits; for M > 1 this rests on an unproven step (docs/PRIVACY.md '
       's. 6). '),
      ('RDP accounting (proven, docs/PRIVACY.md s. 2-3)',
       dict(bits=bits, num_groups=groups, accounting='rdp'),
       f'{groups} groups x {bits} bits; what it bounds and assumes: '
       'docs/PRIVACY.md. '),
      ('PLD accounting (library default, docs/PRIVACY.md s. 9)',
       dict(bits=bits, num_groups=groups, accounting='min_pld_rdp'),
       f'{groups} groups x {bits} bits; the smaller of the PLD and RDP '
       'epsilons. '))
  cells = []
  for basis, kwargs, why in modes:
    eps, error = _attempt(lambda kw=kwargs: accounting.dp_rec_epsilon(
        clip_ratio=c, **kw, **common))
    cells.append(paper.paper_cell(task, paper.DP_REC, epsilon, 'epsilon', eps,
                            f'{basis} at the paper\'s c', why + error))
    if calibrate:
      cal, error = _attempt(lambda kw=kwargs: accounting.calibrate_clip_ratio(
          target_epsilon=epsilon, tol=1e-4, **kw, **common))
      cells.append(paper.paper_cell(
          task, paper.DP_REC, epsilon, 'clip_ratio', cal,
          f'{basis}, calibrated to the paper\'s epsilon', why + error))
  return cells


def dp_fedavg_privacy_cells(task, epsilon, z, calibrate) -> list:
  fed = communication.federation(task, paper.DP_FEDAVG)
  common = dict(fed, delta=_delta(fed['population']))
  modes = (('paper accounting (classic RDP conversion)',
            dict(conversion='classic', accounting='rdp')),
           ("RDP (dp_accounting's conversion)",
            dict(conversion='tight', accounting='rdp')),
           ("PLD (library default, dp_accounting's pessimistic PLD)",
            dict(accounting='min_pld_rdp')))
  cells = []
  for basis, options in modes:
    eps = accounting.dp_fedavg_epsilon(noise_multiplier=z, **options,
                                       **common)
    cells.append(paper.paper_cell(
        task, paper.DP_FEDAVG, epsilon, 'epsilon', eps,
        f'{basis} at the paper\'s z',
        'Poisson-subsampled Gaussian, q = B/N; the paper does not state its '
        'RDP orders.'))
    if calibrate:
      cal = accounting.calibrate_dp_fedavg_noise(
          target_epsilon=epsilon, tol=1e-4, **options, **common)
      cells.append(paper.paper_cell(
          task, paper.DP_FEDAVG, epsilon, 'noise_multiplier', cal,
          f'{basis}, calibrated to the paper\'s epsilon'))
  return cells


# Kairouz, Liu, Steinke (ICML 2021) as their published code sets DDGauss up
# (google-research/federated, distributed_dp): delta = 1/N, conditional
# rounding beta = exp(-0.5), k = 4 standard deviations for modular clipping,
# the randomized Hadamard rotation (padding to a power of 2), and their EMNIST
# CNN. Not published: the noise of each run (their code derives it from
# epsilon) and the clip; we use the DP-REC paper's DP-FedAvg clip.
DDGAUSS_BETA = math.exp(-0.5)
DDGAUSS_K_STDDEVS = 4.0
DDGAUSS_MODELS = {'emnist': paper_models.FEMNIST_CANDIDATES[0],
                  'stackoverflow_lr': paper_models.MODELS['stackoverflow_lr']}
# Where Kairouz et al.'s population is not the DP-REC paper's.
DDGAUSS_POPULATION_METHOD = {'emnist': 'DDGauss'}


def ddgauss_privacy_cells(task, epsilon, bits) -> list:
  """Our noise multiplier for DDGauss at Kairouz et al.'s settings."""
  method = f'DDG{bits}'
  population = paper.paper_int(task, 'population',
                               DDGAUSS_POPULATION_METHOD.get(task))
  dimension, _ = paper_models.keras_params(DDGAUSS_MODELS[task])
  settings = dict(
      l2_clip=paper.paper_value(task, 'l2_clip', paper.DP_FEDAVG), bits=bits,
      clients_per_round=paper.paper_int(task, 'clients_per_round'),
      population=population,
      rounds=paper.paper_int(task, 'rounds', paper.DP_FEDAVG),
      delta=1.0 / population, dimension=dimension, beta=DDGAUSS_BETA,
      modclip_prob=float(special.erfc(DDGAUSS_K_STDDEVS / math.sqrt(2))),
      rotation_type='hd')
  z, error = _attempt(lambda: accounting.calibrate_ddgauss_noise(
      target_epsilon=epsilon, **settings))
  where = (f'N = {population:,}, n = {settings["clients_per_round"]}, '
           f'T = {settings["rounds"]}, delta = 1/N, d = {dimension:,} '
           f"(Hadamard-padded), beta = e^-0.5, k = 4, clip "
           f'{settings["l2_clip"]}. ')
  eps_note = ('Not known: Kairouz et al. publish no noise multiplier (their '
              'code derives it from epsilon), so our epsilon at their noise '
              'cannot be given. ')
  if z is None:
    error += (" With TFF's scale heuristic, which our accountant mirrors, "
              'the rounding-inflated sensitivity grows with the noise at '
              'this bit width (Kairouz et al. choose the scale by their own '
              'search).')
  if z is not None:
    eps_note += f'Our calibrated z = {z:.4g} meets it under our accountant.'
  return [
      paper.paper_cell(task, method, epsilon, 'epsilon', None,
                 "our accountant at Kairouz et al.'s noise", eps_note + error),
      paper.paper_cell(task, method, epsilon, 'noise_multiplier', z,
                 "ours, calibrated at Kairouz et al.'s settings",
                 where + error),
  ]


def privacy_cells(config: paper.ReproduceConfig, log) -> list:
  """--quick: MNIST only, no calibration, no DDGauss."""
  tasks = ('mnist',) if config.quick else paper.TASKS
  calibrate = not config.quick
  cells = []
  for task, epsilon, c in _rows(paper.DP_REC, 'clip_ratio', tasks):
    cells.extend(dp_rec_privacy_cells(task, epsilon, c, calibrate))
    log(f'privacy {task} DP-REC epsilon={epsilon:g}')
  for task, epsilon, z in _rows(paper.DP_FEDAVG, 'noise_multiplier', tasks):
    cells.extend(dp_fedavg_privacy_cells(task, epsilon, z, calibrate))
    log(f'privacy {task} DP-FedAvg epsilon={epsilon:g}')
  if not config.quick:
    for method in (paper.DDG16, paper.DDG12):
      for task, epsilon, _ in _rows(method, 'metric', tasks):
        cells.extend(ddgauss_privacy_cells(task, epsilon, int(method[3:])))
        log(f'privacy {task} {method} epsilon={epsilon:g}')
  return cells
