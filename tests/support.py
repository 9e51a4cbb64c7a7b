"""Helpers several test modules share (in BUILD's :test_support)."""

import os
import subprocess
import sys
from unittest import mock

import numpy as np
import tensorflow_federated as tff

from experiments.runner import training
from tff_dprec.accounting import accountings
from tff_dprec.accounting import dp_rec_accountant

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KILL_ENV = training.TEST_KILL_ENV
# Intrinsics that move values from CLIENTS to SERVER.
CLIENTS_TO_SERVER = frozenset([
    'federated_aggregate', 'federated_sum', 'federated_mean',
    'federated_weighted_mean', 'federated_secure_sum',
    'federated_secure_sum_bitwidth', 'federated_secure_modular_sum',
    'federated_collect', 'federated_select'
])


def run_cli(args, env_extra=None, timeout=600, plan=False):
  """`python -m experiments.run --noprogress --num_seeds=1 *args`, with
  `--noplan` unless `plan` (the planner's lines are planning_test's and the
  main job's; cold, they cost a run more than its rounds)."""
  env = dict(os.environ)
  env.pop(KILL_ENV, None)
  env.update(env_extra or {})
  return subprocess.run(
      [sys.executable, '-m', 'experiments.run', '--noprogress',
       '--num_seeds=1'] + ([] if plan else ['--noplan']) + args,
      cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def tensor_dtypes(value_type):
  """The dtypes of a TFF type's tensors, in order."""
  if isinstance(value_type, tff.TensorType):
    return [np.dtype(value_type.dtype)]
  return [d for t in value_type for d in tensor_dtypes(t)]


def clients_to_server_value_types(computation):
  """Types of all values that intrinsics move from CLIENTS to SERVER."""
  found = []

  def visit(comp):
    if isinstance(comp, tff.framework.Intrinsic):
      if comp.uri in CLIENTS_TO_SERVER:
        parameter = comp.type_signature.parameter
        value_type = (parameter[0] if isinstance(parameter, tff.StructType)
                      else parameter)
        found.append((comp.uri, value_type))
    return comp, False

  tff.framework.transform_postorder(computation.to_building_block(), visit)
  return found


def dp_rec_rdp_for_pld():
  """A patcher: DP-REC's RDP accountant wherever its PLD one is asked.

  For tests whose subject (what is calibrated, cached, searched, printed)
  does not depend on the accountant's values: the RDP bound is about 100
  times faster to evaluate than the PLD.
  """
  real = dp_rec_accountant.DpRecAccountant

  def rdp_for_pld(accounting=accountings.DEFAULT_ACCOUNTING, **kwargs):
    if accounting == accountings.PLD:
      accounting = accountings.RDP
    return real(accounting=accounting, **kwargs)

  return mock.patch.object(dp_rec_accountant, 'DpRecAccountant', rdp_for_pld)
