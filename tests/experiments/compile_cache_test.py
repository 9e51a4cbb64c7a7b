"""Tests for experiments.infra.compile_cache."""

import contextlib
import io
import os
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_dprec import rec

from experiments.infra import compile_cache


def _mean_computation():
  @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
  def mean(values):
    return tff.federated_mean(values)
  return mean


def _sum_computation(dtype):
  @tff.federated_computation(tff.FederatedType(dtype, tff.CLIENTS))
  def total(values):
    return tff.federated_sum(values)
  return total


def _proto(comp):
  return tff.framework.ConcreteComputation.get_proto(comp)


class CompileCacheTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.folder = self.create_tempdir().full_path
    patcher = mock.patch.dict(os.environ, {compile_cache.ENV: self.folder})
    patcher.start()
    self.addCleanup(patcher.stop)
    self.comp = _mean_computation()

  def _files(self):
    return sorted(f for f in os.listdir(self.folder) if f.endswith('.pb'))

  def _compile(self):
    """Compiles through a fresh cached compiler: (result, hit, counter)."""
    hits = compile_cache.stats['hits']
    start = compile_cache._uid_counter()()  # pylint: disable=protected-access
    result = compile_cache.cached(compile_cache.NATIVE)(self.comp)
    used = compile_cache._uid_counter()() - start  # pylint: disable=protected-access
    return result, compile_cache.stats['hits'] > hits, used

  def test_a_hit_returns_the_compiled_proto_and_advances_the_counter(self):
    compiled, hit, used_by_miss = self._compile()
    self.assertFalse(hit)
    self.assertLen(self._files(), 1)
    # The compiler's own result (compiling twice gives other generated
    # names, so the miss's result is the reference).
    self.assertNotEqual(_proto(compiled), _proto(self.comp))
    cached, hit, used_by_hit = self._compile()
    self.assertTrue(hit)
    self.assertEqual(_proto(cached), _proto(compiled))
    # The compiler traces TF computations; a hit numbers what comes after it
    # as the compilation would have.
    self.assertGreater(used_by_miss, 2)
    self.assertEqual(used_by_hit, used_by_miss)

  def test_cached_context_computes_what_tffs_context_does(self):
    values = [np.float32(1.0), np.float32(2.0), np.float32(4.5)]
    for expect_hit in (False, True):
      hits = compile_cache.stats['hits']
      tff.framework.set_default_context(
          compile_cache.local_context(compile_cache.NATIVE))
      self.assertEqual(self.comp(values), np.float32(7.5 / 3))
      self.assertEqual(compile_cache.stats['hits'] - hits, int(expect_hit))
    tff.backends.native.set_sync_local_cpp_execution_context()
    self.assertEqual(self.comp(values), np.float32(7.5 / 3))

  def test_damaged_files_are_compiled_again(self):
    self._compile()
    [name] = self._files()
    path = os.path.join(self.folder, name)
    with open(path, 'rb') as f:
      good = f.read()
    for damaged in (b'', good[:40], good[:-1], good[:-1] + b'\x00',
                    b'x' + good[1:]):
      with open(path, 'wb') as f:
        f.write(damaged)
      _, hit, _ = self._compile()
      self.assertFalse(hit, damaged[:20])
      _, hit, _ = self._compile()  # Rewritten whole.
      self.assertTrue(hit, damaged[:20])

  def test_off_compiles_without_files(self):
    for value in ('off', 'OFF', 'none', '0', ''):
      with mock.patch.dict(os.environ, {compile_cache.ENV: value}):
        self.assertIsNone(compile_cache.directory())
        _, hit, _ = self._compile()
        self.assertFalse(hit)
    self.assertEmpty(self._files())

  def test_a_folder_others_may_write_is_not_used(self):
    os.chmod(self.folder, 0o777)
    self.addCleanup(os.chmod, self.folder, 0o700)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
      self.assertIsNone(compile_cache.directory())
      _, hit, _ = self._compile()
    self.assertFalse(hit)
    self.assertEmpty(self._files())
    self.assertIn('writable by others', err.getvalue())
    os.chmod(self.folder, 0o755)  # Others may read: used.
    self.assertEqual(compile_cache.directory(), self.folder)

  def test_a_failed_write_is_said_once_and_compiling_goes_on(self):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), mock.patch.object(
        compile_cache.tempfile, 'mkstemp',
        side_effect=OSError(28, 'No space left on device')):
      for _ in range(2):
        compiled, hit, _ = self._compile()
        self.assertFalse(hit)
        self.assertIsNotNone(compiled)
    self.assertEmpty(self._files())
    lines = [l for l in err.getvalue().splitlines() if 'cannot write' in l]
    self.assertLen(lines, 1)
    self.assertIn('No space left on device', lines[0])

  def test_a_bug_in_writing_is_not_swallowed(self):
    with mock.patch.object(compile_cache.tempfile, 'mkstemp',
                           side_effect=TypeError('a bug')):
      with self.assertRaisesRegex(TypeError, 'a bug'):
        self._compile()

  def test_temporary_files_of_dead_writers_are_removed_when_stale(self):
    stale = os.path.join(self.folder, 'dead.tmp')
    fresh = os.path.join(self.folder, 'busy.tmp')
    for path in (stale, fresh):
      with open(path, 'wb') as f:
        f.write(b'partial')
    os.utime(stale, (1, 1))
    self._compile()  # A write evicts.
    self.assertFalse(os.path.exists(stale))
    self.assertTrue(os.path.exists(fresh))

  def test_fresh_randomness_stays_fresh_on_a_hit(self):
    @tff.tensorflow.computation
    def draw():
      return rec.fresh_uniform([4])

    values = []
    for _ in range(2):  # A miss, then a hit.
      tff.framework.set_default_context(
          compile_cache.local_context(compile_cache.NATIVE))
      values.extend([draw(), draw()])
    tff.backends.native.set_sync_local_cpp_execution_context()
    self.assertEqual(len({v.tobytes() for v in values}), 4)

  def test_compilers_have_their_own_keys(self):
    proto = _proto(self.comp)
    self.assertNotEqual(compile_cache.key(compile_cache.NATIVE, proto),
                        compile_cache.key(compile_cache.TEST, proto))
    self.assertEqual(compile_cache.key(compile_cache.NATIVE, proto),
                     compile_cache.key(compile_cache.NATIVE, proto))

  def test_least_recently_used_files_go_first(self):
    self._compile()
    [first] = self._files()
    compile_cache.cached(compile_cache.NATIVE)(_sum_computation(np.float32))
    [second] = [f for f in self._files() if f != first]
    os.utime(os.path.join(self.folder, first), (1, 1))
    # Over the limit, the least recently used file goes...
    sizes = sum(os.path.getsize(os.path.join(self.folder, f))
                for f in (first, second))
    with mock.patch.object(compile_cache, 'MAX_BYTES', sizes):
      compile_cache.cached(compile_cache.NATIVE)(_sum_computation(np.int32))
    self.assertNotIn(first, self._files())
    self.assertIn(second, self._files())
    self.assertLen(self._files(), 2)
    # ...and the newest stays, even alone over the limit.
    with mock.patch.object(compile_cache, 'MAX_BYTES', 1):
      compile_cache.cached(compile_cache.TEST)(_sum_computation(np.float32))
    self.assertLen(self._files(), 1)
    self.assertNotIn(second, self._files())

  def test_unknown_compiler_is_refused(self):
    with self.assertRaisesRegex(ValueError, "compiler_name must be 'native' "
                                "or 'test', found 'xla'"):
      compile_cache.cached('xla')


if __name__ == '__main__':
  tf.test.main()
