"""What a built TFF process moves from the clients to the server, by type.

`check_process(process)` reads `process.next` as TFF built it: its building
blocks, in call-dominant form, through the public `tff.framework`. Every
call of a federated intrinsic that takes a value placed at CLIENTS, other
than the three that keep it there (`federated_map`,
`federated_map_all_equal`, `federated_zip_at_clients`), moves that value off
the clients: `federated_aggregate`, `federated_sum`, `federated_mean`, the
`federated_secure_sum*` intrinsics, and any other TFF has or adds. Each such
value is a `ClientUpload`, with its TFF type on one client, and is one of:

* a DP-REC message: its type is that of `DpRecSumFactory`'s messages,
  `<seed=int64,indices=int32[M]>` (`dp_rec.is_message_type`);
* a value computed from no client data, only from constants and server
  values (`tff.aggregators.UnweightedMeanFactory`, and so the DP-REC mean,
  sums a 1 from each client: the public count of messages);
* anything else computed from the clients' data (`outside_dp_rec`), which
  DP-REC's epsilon does not cover: the client training metrics of a
  `tff.learning` builder without `metrics_aggregator=no_client_metrics`, the
  weights a weighted `tff.aggregators.MeanFactory` sums, the clipped counts
  of `tff.aggregators.clipping_factory`, the floats of the in-law
  simulation. Through `federated_sum` or `federated_aggregate` the server
  receives them in the clear; through a `federated_secure_sum*` it sees
  their sum only, still outside DP-REC.

The check judges types and data flow, not the TensorFlow inside: a value of
the DP-REC message type counts as a DP-REC message whatever code computed
it, and a value counts as computed from client data as soon as any input of
the code that computes it is (so it may over-report, never under-report).
It reads no Python call stack: only the computation.
"""

import dataclasses

import tensorflow_federated as tff

from tff_dprec.aggregators import dp_rec

# The intrinsics that keep CLIENTS-placed values on the clients. Every other
# intrinsic given a CLIENTS-placed value moves it off them, so one TFF adds
# is reported rather than missed.
_CLIENT_LOCAL_INTRINSICS = frozenset(
    intrinsic.uri for intrinsic in (tff.framework.FEDERATED_MAP,
                                    tff.framework.FEDERATED_MAP_ALL_EQUAL,
                                    tff.framework.FEDERATED_ZIP_AT_CLIENTS))

# What a lambda's parameter name is bound to while its body is read: the
# parameter carries client data where its type is placed at CLIENTS.
_PARAMETER = object()

__all__ = [
    'check_process',
    'ClientDataOutsideDpRecError',
    'ClientUpload',
    'UploadReport',
]


class ClientDataOutsideDpRecError(ValueError):
  """A process sends client data to the server outside DP-REC messages."""


@dataclasses.dataclass(frozen=True)
class ClientUpload:
  """One value that moves from each client to the server in a round.

  Attributes:
    intrinsic: The TFF intrinsic that moves it (`'federated_aggregate'`,
      `'federated_sum'`, ...).
    value_type: Its TFF type on one client (the `T` of `{T}@CLIENTS`).
    is_dp_rec_message: Whether `value_type` is a DP-REC message's type.
    from_client_data: Whether it is computed from the clients' data; `False`
      for a value computed from constants and server values only.
  """
  intrinsic: str
  value_type: tff.Type
  is_dp_rec_message: bool
  from_client_data: bool

  @property
  def outside_dp_rec(self) -> bool:
    """Whether it is client data outside a DP-REC message (not covered by
    DP-REC's epsilon)."""
    return self.from_client_data and not self.is_dp_rec_message

  def __str__(self) -> str:
    if self.is_dp_rec_message:
      kind = 'DP-REC message'
    elif self.from_client_data:
      kind = 'client data OUTSIDE DP-REC'
    else:
      kind = 'no client data'
    return f'{self.intrinsic} of {self.value_type}: {kind}'


@dataclasses.dataclass(frozen=True)
class UploadReport:
  """Every value a process moves from the clients to the server in a round.

  Attributes:
    uploads: The `ClientUpload`s, in the order of the computation.
  """
  uploads: tuple[ClientUpload, ...]

  @property
  def outside_dp_rec(self) -> tuple[ClientUpload, ...]:
    """The uploads of client data outside DP-REC messages."""
    return tuple(u for u in self.uploads if u.outside_dp_rec)

  @property
  def dp_rec_messages(self) -> tuple[ClientUpload, ...]:
    """The uploads of DP-REC messages."""
    return tuple(u for u in self.uploads if u.is_dp_rec_message)

  @property
  def only_dp_rec_messages(self) -> bool:
    """Whether client data leaves the clients in DP-REC messages only."""
    return not self.outside_dp_rec

  def __str__(self) -> str:
    lines = [f'{len(self.uploads)} value(s) move from the clients to the '
             'server each round:']
    lines.extend(f'  {upload}' for upload in self.uploads)
    return '\n'.join(lines)


def check_process(process, *, strict: bool = False) -> UploadReport:
  """Reports every value `process` moves from the clients to the server.

  Args:
    process: A `tff.templates.IterativeProcess` (such as the
      `tff.learning.templates.LearningProcess` of a `tff.learning` builder),
      or a `tff.Computation` built by TFF; its `next` (or itself) is read.
    strict: Whether to raise unless DP-REC messages are the only client data
      that reach the server.

  Returns:
    The `UploadReport`.

  Raises:
    TypeError: If `process` is neither.
    ClientDataOutsideDpRecError: In strict mode, if client data reaches the
      server outside DP-REC messages.
  """
  if not isinstance(strict, bool):
    raise TypeError(f'strict must be a bool, found {strict!r}.')
  computation = (process.next if isinstance(
      process, tff.templates.IterativeProcess) else process)
  if not isinstance(computation, tff.framework.ConcreteComputation):
    raise TypeError(
        'process must be a tff.templates.IterativeProcess or a '
        f'tff.Computation built by TFF, found {process!r}.')
  uploads = []
  _walk(tff.framework.to_call_dominant(computation.to_building_block()),
        {}, uploads)
  report = UploadReport(tuple(uploads))
  if strict and report.outside_dp_rec:
    raise ClientDataOutsideDpRecError(_outside_dp_rec_message(report))
  return report


def _outside_dp_rec_message(report: UploadReport) -> str:
  leaks = '; '.join(str(upload) for upload in report.outside_dp_rec)
  return (
      f'The process sends {len(report.outside_dp_rec)} value(s) of client '
      'data to the server outside DP-REC messages, not covered by its '
      f'epsilon: {leaks}. Build '
      'it with tff_dprec.learning.build_dp_rec_fed_avg(..., aggregator='
      'tff_dprec.learning.dp_rec_aggregator(...)): the DP-REC mean with no '
      'factory around it (no MeanFactory, clipping_factory or '
      'zeroing_factory) and metrics_aggregator=tff_dprec.learning.'
      'no_client_metrics.')


def _walk(comp, env: dict, uploads: list) -> bool:
  """Whether `comp` may depend on client data; appends the uploads in it.

  Args:
    comp: A `tff.framework.ComputationBuildingBlock`.
    env: The names in scope: whether each may hold client data, or
      `_PARAMETER` for a lambda's parameter.
    uploads: The `ClientUpload`s found so far, appended to in order.

  Returns:
    Whether the value of `comp` may depend on client data (a name not in
    scope, or a kind of block this does not know, is taken to).
  """
  if isinstance(comp, tff.framework.Reference):
    bound = env.get(comp.name, True)
    if bound is _PARAMETER:
      return _holds_clients(comp.type_signature)
    return bound
  if isinstance(comp, tff.framework.Selection):
    if _selects_a_parameter(comp, env):
      return _holds_clients(comp.type_signature)
    return _walk(comp.source, env, uploads)
  if isinstance(comp, tff.framework.Struct):
    # A list, not a generator: every element is read for its uploads.
    return any([_walk(element, env, uploads) for element in comp])
  if isinstance(comp, tff.framework.Lambda):
    inner = dict(env)
    if comp.parameter_name is not None:
      inner[comp.parameter_name] = _PARAMETER
    return _walk(comp.result, inner, uploads)
  if isinstance(comp, tff.framework.Block):
    inner = dict(env)
    for name, value in comp.locals:
      inner[name] = _walk(value, inner, uploads)
    return _walk(comp.result, inner, uploads)
  if isinstance(comp, tff.framework.Call):
    return _walk_call(comp, env, uploads)
  if isinstance(comp, tff.framework.Intrinsic):
    # Not called here (a call's intrinsic is read with its argument): what it
    # takes from the clients cannot be traced, so it counts as client data.
    _append_uncalled(comp, uploads)
    return False
  return not isinstance(comp, (tff.framework.CompiledComputation,
                               tff.framework.Literal,
                               tff.framework.Placement))


def _walk_call(call, env: dict, uploads: list) -> bool:
  """`_walk` of a `Call`: appends what a called intrinsic uploads."""
  from_clients = False
  if call.argument is not None:
    from_clients = _walk(call.argument, env, uploads)
  if not isinstance(call.function, tff.framework.Intrinsic):
    return _walk(call.function, env, uploads) or from_clients
  if (call.argument is not None and
      call.function.uri not in _CLIENT_LOCAL_INTRINSICS):
    for operand, value_type in _client_operands(call.argument):
      uploads.append(ClientUpload(
          intrinsic=call.function.uri, value_type=value_type,
          is_dp_rec_message=dp_rec.is_message_type(value_type),
          from_client_data=_walk(operand, env, [])))
  return from_clients


def _client_operands(argument) -> list:
  """The CLIENTS-placed parts of an intrinsic's argument.

  Args:
    argument: The argument of an intrinsic's call (a building block).

  Returns:
    `(block, value_type)` pairs: each part of `argument` placed at CLIENTS
    and its member type (the intrinsics of TFF take them as the argument or
    its elements), or, for CLIENTS values nested deeper, each element that
    holds them and its whole type.
  """
  if _at_clients(argument.type_signature):
    return [(argument, argument.type_signature.member)]
  if not isinstance(argument.type_signature, tff.StructType):
    return []
  if isinstance(argument, tff.framework.Struct):
    parts = list(argument)
  else:
    parts = [tff.framework.Selection(argument, index=i)
             for i in range(len(argument.type_signature))]
  operands = [(part, part.type_signature.member) for part in parts
              if _at_clients(part.type_signature)]
  if operands:
    return operands
  # Reported whole rather than missed.
  return [(part, part.type_signature) for part in parts
          if _holds_clients(part.type_signature)]


def _append_uncalled(intrinsic, uploads: list) -> None:
  """Appends the CLIENTS parameters of an intrinsic used but not called."""
  parameter = intrinsic.type_signature.parameter
  if (intrinsic.uri in _CLIENT_LOCAL_INTRINSICS or parameter is None or
      not _holds_clients(parameter)):
    return
  uploads.append(ClientUpload(
      intrinsic=intrinsic.uri, value_type=parameter,
      is_dp_rec_message=False, from_client_data=True))


def _selects_a_parameter(selection, env: dict) -> bool:
  """Whether `selection` selects (in steps) from a lambda's parameter."""
  source = selection.source
  while isinstance(source, tff.framework.Selection):
    source = source.source
  return (isinstance(source, tff.framework.Reference) and
          env.get(source.name) is _PARAMETER)


def _at_clients(type_spec) -> bool:
  return (isinstance(type_spec, tff.FederatedType) and
          type_spec.placement == tff.CLIENTS)


def _holds_clients(type_spec) -> bool:
  return tff.types.contains(type_spec, _at_clients)
