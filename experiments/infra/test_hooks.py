"""Hooks that tests set through the environment to break a run on purpose.

`TFF_DPREC_TEST_KILL="<aggregator>:<round>:<started|trained|saved>"` makes
the run SIGKILL itself at that point of that round (to test resuming);
`TFF_DPREC_TEST_TRACE=<file>` appends every round start to that file (the
ground truth for the privacy ledger under random kills). Unset, they do
nothing.
"""

import os
import signal

KILL_ENV = 'TFF_DPREC_TEST_KILL'
TRACE_ENV = 'TFF_DPREC_TEST_TRACE'


def maybe_kill(name: str, round_num: int, phase: str) -> None:
  """SIGKILLs this process if `KILL_ENV` names this point."""
  kill_at = os.environ.get(KILL_ENV, '')
  if kill_at and kill_at == f'{name}:{round_num}:{phase}':
    os.kill(os.getpid(), signal.SIGKILL)


def trace_start(name: str, round_num: int) -> None:
  """Appends `name round_num` durably to the file `TRACE_ENV` names."""
  path = os.environ.get(TRACE_ENV)
  if path:
    with open(path, 'a') as f:
      f.write(f'{name} {round_num}\n')
      f.flush()
      os.fsync(f.fileno())
