"""Tests for tff_dprec/__init__.py: what the package advertises and loads."""

import importlib
import subprocess
import sys
import unittest

import tff_dprec


class PackageTest(unittest.TestCase):

  def test_all_names_what_users_call(self):
    self.assertEqual(
        sorted(tff_dprec.__all__),
        ['accounting', 'aggregators', 'history', 'learning', 'plan',
         'process_check', 'simulation', 'worker_reaper'])

  def test_every_advertised_module_loads(self):
    for name in tff_dprec.__all__:
      self.assertIs(getattr(tff_dprec, name),
                    importlib.import_module(f'tff_dprec.{name}'), name)

  def test_every_advertised_module_lists_its_public_names(self):
    # Each module says what users call (`__all__`); every name resolves,
    # and no module re-exports the modules it imports.
    for name in tff_dprec.__all__:
      module = importlib.import_module(f'tff_dprec.{name}')
      self.assertTrue(hasattr(module, '__all__'), name)
      for public in module.__all__:
        value = getattr(module, public)
        self.assertNotIsInstance(value, type(unittest), f'{name}.{public}')

  def test_wire_internals_load_but_are_not_advertised(self):
    for name in ('message', 'rec', 'sizes'):
      self.assertNotIn(name, tff_dprec.__all__)
      self.assertIs(getattr(tff_dprec, name),
                    importlib.import_module(f'tff_dprec.{name}'), name)
    from tff_dprec import rec  # pylint: disable=g-import-not-at-top
    self.assertTrue(hasattr(rec, 'encode'))

  def test_unknown_attribute(self):
    with self.assertRaisesRegex(AttributeError, 'no attribute .nowhere'):
      getattr(tff_dprec, 'nowhere')

  def test_accounting_and_plan_load_without_tensorflow(self):
    check = ('import sys, tff_dprec.accounting, tff_dprec.plan; '
             "print('tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, '-c', check],
                            capture_output=True, text=True, check=True)
    self.assertEqual(result.stdout.strip(), 'False')


if __name__ == '__main__':
  unittest.main()
