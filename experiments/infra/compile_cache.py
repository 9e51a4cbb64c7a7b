"""An on-disk cache of TFF's compiled computations, shared by processes.

TFF's execution contexts compile a computation the first time they invoke it
(intrinsics replaced by their bodies, call-dominant form, Grappler over every
TensorFlow graph) and keep the result for the context's life only. A run's
first round pays it: about 0.5 s for FedAvg and DP-FedAvg on the embedded
SO-LR and 2.4 s for DDGauss16 (whose test context also replaces the secure
sums by their bodies), on 2 cores. Every process that builds the same
computation again (a resumed run, a rerun, a benchmark, a test's CLI call)
compiles it again.

The compiled proto is a function of the computation's proto and of the
software that compiles it, so this cache stores it under a SHA-256 key of the
computation's deterministic serialization, the compiler's name (`'native'`
or `'test'`), the TFF and TensorFlow versions, TensorFlow's build
information, the visible device types, the machine type, the CPU's feature
flags and `TF_ENABLE_ONEDNN_OPTS` (on which Grappler's rewrites may
depend). A file holds the compiled proto behind its SHA-256, written
atomically (concurrent processes are safe); a file that fails the check or
does not parse is compiled again and rewritten. A hit returns what the
compiler returned when the file was written, byte for byte, so a run
computes the same with or without the cache
(`tests/experiments/compile_cache_test.py`).

A computation's proto holds TensorFlow's function names, numbered from one
process-wide counter (`__inference_client_update_4065`), so a process hits
only where it builds the same computations in the same order as the one that
wrote the file. Two things help a rerun of a command stay in step: a hit
advances the counter by as much as the compilation it replaces did (it
traces TensorFlow computations for the intrinsics' bodies; the count is kept
in the file), so that what a process builds after a hit is named as after a
miss; and `experiments.runner.execution.build_process` fixes Keras's
initializer seeds, the one random part of the graphs. Neither is a promise:
a compilation's count depends on TFF's in-process caches (66 uids for a
first `federated_mean`, 58 for a second), so a process that misses after
hits (an evicted or damaged file) numbers what follows differently, and its
later computations miss. Misses only cost time: the key covers the whole
input, so a hit is always the compilation of exactly that computation.

Whoever can write the folder can make runs execute other graphs (a DP
mechanism without its noise, say), so a folder that another user owns or
that others may write is not used (a warning says so); the default is in the
user's home.

One caveat is TFF's: its compiler names each TensorFlow graph by Python's
`hash` of the graph, which differs between processes, so a cached computation
carries the names given by the process that compiled it. Two different
graphs meet under one name in a worker only by a 64-bit hash collision, the
risk TFF takes within one process.

Location: $TFF_DPREC_COMPILE_CACHE, else ~/.cache/tff_dprec/compiled;
TFF_DPREC_COMPILE_CACHE=off disables it. The least recently used files are
removed when the folder exceeds `MAX_BYTES`; deleting it is always safe.
"""

import functools
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from typing import Callable, Optional

ENV = 'TFF_DPREC_COMPILE_CACHE'
_DEFAULT = os.path.join('~', '.cache', 'tff_dprec', 'compiled')
# Changes with the key or the file format.
_FORMAT = b'tff_dprec compiled computation v1'
MAX_BYTES = 512 * 2**20
NATIVE = 'native'
TEST = 'test'

# Hits and misses in this process (for benchmarks and tests).
stats = {'hits': 0, 'misses': 0}


_OFF = ('off', 'none', '0', '', 'false', 'no')
# A cache file's traced-function count above this is damage, not a count.
_MAX_TRACED = 10**7
# Temporary files of writers that died, removed after this many seconds.
_STALE_TEMP_SECONDS = 3600


def directory() -> Optional[str]:
  """The cache folder, or None when disabled or not safe to use."""
  path = os.environ.get(ENV, _DEFAULT)
  if path.strip().lower() in _OFF:
    return None
  path = os.path.expanduser(path)
  try:
    info = os.stat(path)
  except OSError:
    return path  # Made on the first write, with this user's umask.
  if info.st_uid != os.getuid() or info.st_mode & 0o022:
    _warn_once(f'compile cache {path!r} is not used: it is owned by another '
               'user or writable by others, and whoever can write it can '
               'change what runs compute. Use a folder of your own, or '
               f'{ENV}=off.')
    return None
  return path


_warned = set()


def _warn_once(message):
  if message not in _warned:
    _warned.add(message)
    print(f'WARNING: {message}', file=sys.stderr)


def compilers() -> dict[str, Callable]:
  """TFF's compiler functions of its local contexts, by name."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top

  # Changing what these do needs a new `_FORMAT` (they are not in the key).
  def test_compiler(comp):
    # What tff.backends.test's context does: the secure sums become their
    # insecure TensorFlow bodies, then the native compilation.
    comp = tff.backends.test.replace_secure_intrinsics_with_bodies(comp)
    return tff.backends.native.desugar_and_transform_to_native(comp)

  return {NATIVE: tff.backends.native.desugar_and_transform_to_native,
          TEST: test_compiler}


def cached(compiler_name: str) -> Callable:
  """`compilers()[compiler_name]`, its results kept in `directory()`."""
  if compiler_name not in (NATIVE, TEST):
    raise ValueError(f'compiler_name must be {NATIVE!r} or {TEST!r}, found '
                     f'{compiler_name!r}.')
  compiler_fn = compilers()[compiler_name]

  def compile_fn(comp):
    import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
    folder = directory()
    if folder is None:
      return compiler_fn(comp)
    proto = tff.framework.ConcreteComputation.get_proto(comp)
    path = os.path.join(folder, key(compiler_name, proto) + '.pb')
    uid = _uid_counter()
    start = uid()
    entry = _read(path, type(proto))
    if entry is not None and entry[0].type != proto.type:
      entry = None  # Damage that parses: compiled again.
    if entry is not None:
      compiled, traced = entry
      for _ in range(traced + 1):  # As the compilation and the call below.
        uid()
      stats['hits'] += 1
      return tff.framework.ConcreteComputation(
          computation_proto=compiled,
          context_stack=tff.framework.get_context_stack())
    stats['misses'] += 1
    result = compiler_fn(comp)
    traced = uid() - start - 1
    _write(folder, path, traced, tff.framework.ConcreteComputation.get_proto(
        result))
    return result

  return compile_fn


def key(compiler_name: str, proto) -> str:
  """The cache key of a computation proto for a compiler."""
  digest = hashlib.sha256(_environment())
  digest.update(b'\0' + compiler_name.encode() + b'\0')
  digest.update(proto.SerializeToString(deterministic=True))
  return digest.hexdigest()


def local_context(compiler_name: str, use_cache: bool = True):
  """TFF's sync local C++ context (native or test), compiling via the cache.

  The context that `tff.backends.native.set_sync_local_cpp_execution_context`
  (or, for `TEST`, `tff.backends.test.set_sync_test_cpp_execution_context`)
  sets with default arguments; only the compiler is wrapped (not even that
  with `use_cache=False`).
  """
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  return tff.framework.SyncExecutionContext(
      executor_fn=tff.framework.local_cpp_executor_factory(),
      compiler_fn=(cached(compiler_name) if use_cache
                   else compilers()[compiler_name]),
      transform_args=tff.tensorflow.transform_args,
      transform_result=tff.tensorflow.transform_result)


@functools.lru_cache(maxsize=1)
def _environment() -> bytes:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  flags = ''
  try:
    with open('/proc/cpuinfo') as f:
      flags = next((line for line in f if line.startswith('flags')), '')
  except OSError:
    pass
  # Grappler's rewrites can depend on the build and on the devices it sees.
  build = json.dumps(dict(tf.sysconfig.get_build_info()), sort_keys=True,
                     default=str)
  devices = ','.join(sorted(d.device_type
                            for d in tf.config.list_physical_devices()))
  parts = [_FORMAT.decode(), tff.__version__, tf.__version__, build, devices,
           platform.machine(), flags,
           os.environ.get('TF_ENABLE_ONEDNN_OPTS', '')]
  return '\0'.join(parts).encode()


def _uid_counter() -> Callable[[], int]:
  """The counter TensorFlow numbers traced functions with (0 if missing).

  It has no public name in TF 2.14; without it hits stay correct, and a
  process only misses more.
  """
  try:
    from tensorflow.python.framework import ops  # pylint: disable=g-import-not-at-top,g-direct-tensorflow-import
    return ops.uid
  except (ImportError, AttributeError):
    return lambda: 0


def _read(path, proto_type):
  """`(proto, traced)` from a cache file, or None if absent or damaged."""
  try:
    with open(path, 'rb') as f:
      data = f.read()
  except OSError:
    return None
  header = _FORMAT + b'\0'
  if not data.startswith(header):
    return None
  checksum = data[len(header):len(header) + 32]
  body = data[len(header) + 32:]
  if len(body) < 8 or hashlib.sha256(body).digest() != checksum:
    return None
  traced = int.from_bytes(body[:8], 'little')
  if traced > _MAX_TRACED:
    return None
  proto = proto_type()
  try:
    proto.ParseFromString(body[8:])
  except Exception:  # pylint: disable=broad-except
    return None  # Any decoding error: compiled again.
  try:
    os.utime(path)  # Eviction removes the least recently used first.
  except OSError:
    pass
  return proto, traced


def _write(folder, path, traced: int, compiled):
  temp = None
  try:
    body = (min(max(traced, 0), _MAX_TRACED).to_bytes(8, 'little') +
            compiled.SerializeToString(deterministic=True))
    os.makedirs(folder, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=folder, suffix='.tmp')
    with os.fdopen(handle, 'wb') as f:
      f.write(_FORMAT + b'\0' + hashlib.sha256(body).digest() + body)
    os.replace(temp, path)
    temp = None
    _evict(folder, keep=path)
  except OSError as e:
    # A cache that cannot be written only costs time: said once per folder
    # and cause; any other error is a bug and is raised.
    _warn_once(f'compile cache: cannot write to {folder} '
               f'({e.strerror or e}); going on without caching new '
               'computations there.')
  finally:
    if temp is not None:
      try:
        os.remove(temp)
      except OSError:
        pass


def _evict(folder, keep):
  entries = []
  now = time.time()
  for name in os.listdir(folder):
    full = os.path.join(folder, name)
    if full == keep or not name.endswith(('.pb', '.tmp')):
      continue
    try:
      stat = os.stat(full)
    except OSError:
      continue
    if name.endswith('.tmp'):  # Left by a writer that died.
      if now - stat.st_mtime > _STALE_TEMP_SECONDS:
        try:
          os.remove(full)
        except OSError:
          pass
      continue
    entries.append((stat.st_mtime, stat.st_size, full))
  total = sum(size for _, size, _ in entries) + os.path.getsize(keep)
  for _, size, full in sorted(entries):
    if total <= MAX_BYTES:
      break
    try:
      os.remove(full)
    except OSError:
      pass
    total -= size
