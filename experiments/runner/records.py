"""The driver state saved in checkpoints, and the record of a finished run."""

import dataclasses
from typing import Any, Optional


@dataclasses.dataclass
class RunProgress:
  """The training loop's state between rounds (saved in every checkpoint).

  The saved form (`to_driver`) keeps the keys of the checkpoint format:
  rng, totals (upload, download), round_times, curve, last_metric,
  lost_rounds, history, plus `ledger_spent`, a copy of the privacy ledger's
  total when the checkpoint was written (absent in older checkpoints).
  """
  completed: int = 0
  rng_state: Any = None
  upload_bits: int = 0
  download_bits: int = 0
  round_times: list = dataclasses.field(default_factory=list)
  curve: list = dataclasses.field(default_factory=list)
  last_metric: Optional[float] = None
  lost_rounds: int = 0
  history_state: Any = None
  epsilon: Optional[float] = None
  stopped: Optional[str] = None

  @property
  def spent_rounds(self) -> int:
    """Rounds whose messages may exist: completed and lost."""
    return self.completed + self.lost_rounds

  def to_driver(self) -> dict:
    return dict(rng=self.rng_state,
                totals=[self.upload_bits, self.download_bits],
                round_times=list(self.round_times), curve=list(self.curve),
                last_metric=self.last_metric, lost_rounds=self.lost_rounds,
                history=self.history_state, ledger_spent=self.spent_rounds)

  @classmethod
  def from_driver(cls, completed: int, driver: dict) -> 'RunProgress':
    upload, download = driver['totals']
    return cls(completed=completed, rng_state=driver['rng'],
               upload_bits=upload, download_bits=download,
               round_times=list(driver['round_times']),
               curve=[dict(p) for p in driver['curve']],
               last_metric=driver['last_metric'],
               lost_rounds=driver['lost_rounds'],
               history_state=driver.get('history'))


@dataclasses.dataclass
class RunRecord:
  """One aggregator's finished run: what summary.json and the table hold."""
  task: str
  aggregator: str
  data_source: str
  metric: str
  metric_label: str
  final_metric: float
  final_metrics: dict
  epsilon: Optional[float]
  delta: float
  target_epsilon: float
  accounting: Optional[str]
  local_epsilon_per_participation: Optional[float]
  rounds: int
  clients_per_round: int
  population: int
  sampling: str
  params: dict
  upload_bits_per_client_round: float
  download_bits_per_client_round: float
  upload_bits_total: int
  download_bits_total: int
  upload_gb: float
  download_gb: float
  seconds_per_round: float
  stopped: Optional[str]
  downlink: str
  lost_rounds: int
  insecure_test_mode: bool
  seed: int = 0
  extra: dict = dataclasses.field(default_factory=dict)

  def to_dict(self) -> dict:
    out = dataclasses.asdict(self)
    extra = out.pop('extra')
    out.update(extra)
    return out
