"""Tests of experiments.runner.ledger: the privacy ledger."""

import json
import os

import tensorflow as tf

from experiments.runner import ledger


class PrivacyLedgerTest(tf.test.TestCase):

  def _ledger(self, printed=None):
    """(run folder, its ledger of configuration 'f')."""
    run_dir = self.create_tempdir().full_path
    kwargs = {} if printed is None else dict(print_fn=printed.append)
    return run_dir, ledger.PrivacyLedger(run_dir, 'f', **kwargs)

  def test_noresume_archives_the_ledger(self):
    printed = []
    run_dir, book = self._ledger(printed)
    book.record_start(ledger.LedgerEntry(started=4, lost=1))
    archived = book.archive()
    self.assertIsNone(book.read())
    self.assertStartsWith(os.path.basename(archived),
                          'privacy_ledger.archived-')
    with open(archived) as f:
      self.assertEqual(json.load(f)['started'], 4)
    self.assertIn(archived, printed[-1])

  def test_ledger_of_wrong_shape_is_refused(self):
    run_dir, book = self._ledger()
    for content in ('{"started": "3", "lost": 0}', '{"started": -1}',
                    '{"started": true, "lost": 0}', '', '\x00\x01',
                    '{"lost": 0}', '[1]'):
      with open(os.path.join(run_dir, 'privacy_ledger.json'), 'w') as f:
        f.write(content)
      with self.assertRaisesRegex(ledger.PrivacyLedgerError,
                                  'privacy_ledger.json'):
        book.read()
    with open(os.path.join(run_dir, 'privacy_ledger.json'), 'wb') as f:
      f.write('\udcff\x00garbage'.encode('utf-8', 'surrogateescape'))
    with self.assertRaisesRegex(ledger.PrivacyLedgerError, 'cannot be read'):
      book.read()

  def test_foreign_ledger_is_refused(self):
    run_dir, book = self._ledger()
    book.record_start(ledger.LedgerEntry(started=2))
    other = ledger.PrivacyLedger(run_dir, 'g')
    with self.assertRaisesRegex(ledger.LedgerConfigMismatchError,
                                'another configuration'):
      other.read()

  def test_reconcile(self):
    _, book = self._ledger()
    entry = ledger.LedgerEntry(started=5, lost=1, upload_bits=600,
                               download_bits=900)
    common = dict(checkpoint_upload_bits=400, checkpoint_download_bits=700,
                  any_checkpoints=True)
    got = book.reconcile(entry, checkpoint_round=4, checkpoint_lost=1,
                         **common)
    self.assertEqual(got, ledger.Reconciled(1, 200, 200))
    # Up to date: nothing lost.
    got = book.reconcile(entry, checkpoint_round=5, checkpoint_lost=1,
                         checkpoint_upload_bits=600,
                         checkpoint_download_bits=900, any_checkpoints=True)
    self.assertEqual(got, ledger.Reconciled(0, 0, 0))
    # Missing, or behind the checkpoint: refused.
    with self.assertRaisesRegex(ledger.PrivacyLedgerError, 'missing'):
      book.reconcile(None, checkpoint_round=4, checkpoint_lost=0, **common)
    with self.assertRaisesRegex(ledger.PrivacyLedgerError, 'fewer than'):
      book.reconcile(ledger.LedgerEntry(started=2), checkpoint_round=4,
                     checkpoint_lost=0, **common)
    # No valid checkpoint: the ledger's rounds were all lost...
    got = book.reconcile(entry, checkpoint_round=None, checkpoint_lost=0,
                         **common)
    self.assertEqual(got, ledger.Reconciled(6, 600, 900))
    # ...and without a ledger, set-aside checkpoints make it unknown.
    with self.assertRaisesRegex(ledger.PrivacyLedgerError, 'unknown'):
      book.reconcile(None, checkpoint_round=None, checkpoint_lost=0, **common)
    fresh = book.reconcile(None, checkpoint_round=None, checkpoint_lost=0,
                           checkpoint_upload_bits=0,
                           checkpoint_download_bits=0, any_checkpoints=False)
    self.assertEqual(fresh, ledger.Reconciled(0, 0, 0))


if __name__ == '__main__':
  tf.test.main()
