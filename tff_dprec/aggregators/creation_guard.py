"""Refuses TFF code around DP-REC that would send client values in the clear.

A DP-REC aggregation sees only the values it is given; whatever encloses its
creation runs its own client-side code. `DPRecSumFactory.create` and
`DPRecMeanFactory.create` call this module, which

* refuses a weighted call (`check_unweighted_call`: `build_fed_sgd` and
  `build_weighted_fed_avg` pass the client weights);
* refuses every aggregation factory around DP-REC other than DP-REC's own,
  `tff.aggregators.UnweightedMeanFactory` and, once a mean is in the chain,
  the adapter of `tff.aggregators.as_weighted_aggregator`
  (`check_unweighted_creator`);
* warns (`ClientMetricsWarning`) when the `tff.learning` builder that creates
  a private DP-REC aggregator also aggregates client metrics.

TFF has no API for any of this, so `check_unweighted_creator` walks the call
stack, and it relies on three internals of TFF 0.87:

1. a `tff.learning` algorithm creates its model aggregator inside a function
   named `build_*` of a `tensorflow_federated` module;
2. that function holds the metrics aggregator in a local `metrics_aggregator`;
3. `tff.aggregators.as_weighted_aggregator` returns an instance of a private
   `WeightedAggregationFactory` subclass (its class is taken from the function,
   so its name and module may change).

Where TFF differs, the guard cannot check, and it raises `TffInternalsError`
with a one-line message naming what it missed and the TFF version found. It
does not pass: it could no longer tell a user who passed `no_client_metrics`
from one who did not, nor TFF's weight-ignoring adapter from a factory that
sends the weights to the server, and a silent pass would let those values
reach the server in the clear with nothing to say so. Refusing costs the next
TFF upgrade an update of this module and its tests; passing would cost
privacy. The differences it detects:

* (1) frames of `tensorflow_federated` learning modules enclose the creation,
  but none is named `build_*`;
* (2) `build_*` frames of such modules enclose it, but none has a
  `metrics_aggregator` local (TFF 0.87's own `build_fed_kmeans` is refused
  this way: it sums client statistics that no metrics aggregator governs,
  and its int32 counts are no update DP-REC could aggregate anyway);
* (3) `as_weighted_aggregator` is missing, fails, or returns a public factory
  class or a subclass of one (checked when a weighted factory encloses
  DP-REC).

A creation outside `tff.learning` (`create` called directly or through
`tff.aggregators` wrappers) has no builder and no client metrics: only the
enclosing factories are checked. Compression-only DP-REC (`l2_clip=None`)
has nothing private for client metrics to leak: (1) and (2) are not checked.
"""

import warnings

import tensorflow_federated as tff

# The TFF release whose internals the guard relies on (see the docstring).
_TFF_RELEASE_CHECKED = '0.87'


class ClientMetricsWarning(UserWarning):
  """A private DP-REC aggregator is built with client metrics in the clear."""


class TffInternalsError(RuntimeError):
  """TFF differs from what the guard relies on: it cannot check a creation."""


def check_unweighted_call(factory, weight_type) -> None:
  """Raises TypeError if `create` was called as a weighted factory's."""
  if weight_type:
    raise TypeError(
        f'{type(factory).__name__}.create takes the value type only; it was '
        f'called with a weight type too ({weight_type[0]!r}), as a weighted '
        'aggregator is (tff.learning.algorithms.build_fed_sgd and '
        'build_weighted_fed_avg do so). DP-REC averages without weights: use '
        'tff.learning.algorithms.build_unweighted_fed_avg with '
        'model_aggregator=tff_dprec.learning.dp_rec_aggregator(...).')


def check_unweighted_creator(factory, caller_frame, *, is_mean: bool) -> None:
  """Raises TypeError unless only DP-REC and unweighted means enclose `create`.

  `tff.aggregators.MeanFactory` calls its value sum with weight x value: the
  weights then go to the server as float32 in the clear (through the weight
  sum) and the clip bounds weight x update, not the update.
  `tff.aggregators.clipping_factory` and `zeroing_factory` sum a clipped or
  zeroed count from every client, also in the clear. So this walks the whole
  chain of factories whose `create` is running (every frame up the stack
  whose `self` is an aggregation factory) and accepts only:

  * DP-REC's own factories and `tff.aggregators.UnweightedMeanFactory`
    (which adds only the public client count);
  * TFF's `as_weighted_aggregator` (the wrapper `build_unweighted_fed_avg`
    puts around its model aggregator, ignoring the weights), once a mean is
    in the chain: a sum wrapped that way would be a model aggregator that
    applies the sum of the updates.

  Then, for a private sum, it warns if the `tff.learning` builder creating it
  aggregates client metrics.

  Args:
    factory: The DP-REC factory whose `create` is running.
    caller_frame: The frame of the caller of `create`.
    is_mean: Whether `factory` is a mean (its sum checks the metrics).

  Raises:
    TypeError: If any other aggregation factory encloses the creation.
    TffInternalsError: If TFF's internals differ from those this module
      relies on, so that the creation cannot be checked.
  """
  frames = []
  frame = caller_frame
  del caller_frame
  try:
    while frame is not None:
      frames.append(frame)
      frame = frame.f_back
    mean_seen = is_mean
    for frame in frames:
      mean_seen = _check_enclosing(factory, frame.f_locals.get('self'),
                                   mean_seen)
    # The mean's sum checks the builder's metrics; without a clip there is
    # nothing private for them to leak.
    if not is_mean and factory.l2_clip is not None:
      _check_client_metrics(factory, frames)
  finally:
    del frame, frames


def _check_enclosing(factory, enclosing, mean_seen: bool) -> bool:
  """Raises TypeError unless `enclosing` may enclose DP-REC's `create`.

  Args:
    factory: The DP-REC factory whose `create` is running.
    enclosing: The `self` of a frame up the stack (any object).
    mean_seen: Whether a mean encloses the frames checked so far.

  Returns:
    Whether a mean encloses the creation once `enclosing` is counted.
  """
  if not isinstance(enclosing, (tff.aggregators.UnweightedAggregationFactory,
                                tff.aggregators.WeightedAggregationFactory)):
    return mean_seen
  if isinstance(enclosing, (type(factory),
                            tff.aggregators.UnweightedMeanFactory)):
    return mean_seen or isinstance(enclosing,
                                   tff.aggregators.UnweightedMeanFactory)
  if not isinstance(enclosing, tff.aggregators.WeightedAggregationFactory):
    raise TypeError(
        f'{type(factory).__name__} cannot be used inside '
        f'{type(enclosing).__name__}: that factory runs its own client '
        'code around DP-REC (for example the clipped or zeroed counts of '
        'tff.aggregators.clipping_factory and zeroing_factory), and its '
        'outputs would reach the server in the clear, outside the DP-REC '
        'message and its epsilon. DP-REC clips every update itself '
        '(l2_clip): pass model_aggregator=tff_dprec.learning.'
        'dp_rec_aggregator(...) to '
        'tff.learning.algorithms.build_unweighted_fed_avg unwrapped.')
  if not isinstance(enclosing, _weights_ignored_type(factory)):
    raise TypeError(
        f'{type(factory).__name__} cannot be used inside the weighted '
        f'{type(enclosing).__name__}: the client weights would reach the '
        'server as float32 in the clear and the clip would bound weight '
        'x update. DP-REC averages without weights: use '
        'tff.learning.algorithms.build_unweighted_fed_avg with '
        'model_aggregator=tff_dprec.learning.dp_rec_aggregator(...).')
  if not mean_seen:
    raise TypeError(
        f'{type(factory).__name__} sums the client updates; as a '
        '`tff.learning` model aggregator the server would apply the sum, '
        'not the mean. Pass model_aggregator=tff_dprec.learning.'
        'dp_rec_aggregator(...) (the DP-REC mean) to '
        'tff.learning.algorithms.build_unweighted_fed_avg.')
  return mean_seen


def _weights_ignored_type(factory) -> type:
  """TFF's adapter class behind `tff.aggregators.as_weighted_aggregator`.

  What `build_unweighted_fed_avg` wraps its model aggregator in: it drops the
  weights. Its class is private, so it is taken from the public function.

  Args:
    factory: The DP-REC factory whose `create` is running (for the message).

  Raises:
    TffInternalsError: If the function is missing or fails, or if its class
      is public or a subclass of a public factory class (`MeanFactory` sends
      the weights to the server: taking it for the adapter would let them
      through).
  """
  as_weighted = getattr(tff.aggregators, 'as_weighted_aggregator', None)
  if as_weighted is None:
    raise _internals_error(
        factory, 'tff.aggregators.as_weighted_aggregator does not exist')
  try:
    adapter_type = type(as_weighted(tff.aggregators.SumFactory()))
  except Exception as e:  # pylint: disable=broad-except
    raise _internals_error(
        factory, 'tff.aggregators.as_weighted_aggregator(SumFactory()) '
        f'raised {type(e).__name__}') from None
  bases = (tff.aggregators.UnweightedAggregationFactory,
           tff.aggregators.WeightedAggregationFactory)
  public = tuple(c for c in vars(tff.aggregators).values()
                 if isinstance(c, type) and c not in bases)
  if (not issubclass(adapter_type, tff.aggregators.WeightedAggregationFactory)
      or not adapter_type.__name__.startswith('_')
      or issubclass(adapter_type, public)):
    raise _internals_error(
        factory, 'tff.aggregators.as_weighted_aggregator returned a '
        f'{adapter_type.__module__}.{adapter_type.__qualname__}, not a private '
        'WeightedAggregationFactory outside the public factory classes')
  return adapter_type


def _check_client_metrics(factory, frames) -> None:
  """Warns if the builder sends client metrics; raises if none can be found.

  Args:
    factory: The private DP-REC sum whose `create` is running.
    frames: The frames up the stack from the caller of `create`, innermost
      first.

  Raises:
    TffInternalsError: If `tff.learning` frames enclose the creation but no
      `build_*` frame with a `metrics_aggregator` local is among them.
  """
  for frame in frames:
    if _is_tff_builder(frame):
      _warn_if_client_metrics(factory, frame)
      return
  learning = [f for f in frames if _is_tff_learning(f)]
  if not learning:
    return  # Not created by a tff.learning builder: no metrics to check.
  builders = [f for f in learning if f.f_code.co_name.startswith('build_')]
  if not builders:
    names = ', '.join(_function_name(f) for f in learning)
    raise _internals_error(
        factory, f'no function named build_* among the tff.learning frames '
        f'that create it ({names})')
  raise _internals_error(
      factory, f'the tff.learning builder {_function_name(builders[-1])} has '
      'no local metrics_aggregator, so its client metrics cannot be checked')


def _is_tff_builder(frame) -> bool:
  """Whether `frame` is a TFF builder's (it has a `metrics_aggregator`)."""
  module = frame.f_globals.get('__name__', '')
  return (frame.f_code.co_name.startswith('build_') and
          'metrics_aggregator' in frame.f_locals and
          module.startswith('tensorflow_federated'))


def _is_tff_learning(frame) -> bool:
  """Whether `frame` runs code of a `tensorflow_federated` learning module."""
  module = frame.f_globals.get('__name__', '')
  return (module.startswith('tensorflow_federated') and
          'learning' in module.split('.'))


def _function_name(frame) -> str:
  return f'{frame.f_globals.get("__name__", "?")}.{frame.f_code.co_name}'


def _internals_error(factory, what: str) -> TffInternalsError:
  """The one-line error of a guard that cannot check (see the docstring)."""
  return TffInternalsError(
      f'{type(factory).__name__} cannot check the TFF code that creates it: '
      f'{what}. The check relies on TFF {_TFF_RELEASE_CHECKED} internals '
      f'(found tensorflow_federated {tff.__version__}) and refuses rather '
      'than pass unchecked; see tff_dprec.aggregators.creation_guard.')


def _warn_if_client_metrics(factory, builder_frame) -> None:
  """Warns when a private DP-REC model aggregator comes with client metrics.

  The warning points at the first frame outside TFF: the user's call of the
  builder.
  """
  metrics_aggregator = builder_frame.f_locals['metrics_aggregator']
  if (getattr(metrics_aggregator, '__name__', None) == 'no_client_metrics' and
      getattr(metrics_aggregator, '__module__', '').startswith('tff_dprec')):
    return
  user = builder_frame
  while user.f_back is not None and user.f_globals.get(
      '__name__', '').startswith('tensorflow_federated'):
    user = user.f_back
  warnings.warn_explicit(
      'The tff.learning builder given DP-REC as model_aggregator also '
      f'aggregates client metrics (metrics_aggregator={metrics_aggregator!r}):'
      ' each client\'s training loss and example counts reach the server '
      'outside the DP-REC message, not covered by its epsilon. Pass '
      'metrics_aggregator=tff_dprec.learning.no_client_metrics to release '
      'none.', ClientMetricsWarning, user.f_code.co_filename, user.f_lineno,
      module=user.f_globals.get('__name__'),
      registry=user.f_globals.setdefault('__warningregistry__', {}))
