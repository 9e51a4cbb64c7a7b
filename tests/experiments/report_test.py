"""Tests for experiments.runner.report (tables, curves.csv and plots; no TFF).
"""

import csv
import math
import os

import pytest

from experiments.runner import report
from experiments.runner import report_plots
from experiments.runner import stats

_CONTEXT = dict(initial_metric=0.01, frequent_tags=0.25, split='test',
                wall_seconds=12.0)
_PLOTS = ('metric_vs_round.png', 'metric_vs_communication.png',
          'epsilon_vs_round.png')


def _record(aggregator, seed, metric, epsilon=None, **overrides):
  record = dict(
      task='stackoverflow_lr', data_source='synthetic', delta=1e-5,
      metric_label='recall@5', aggregator=aggregator, seed=seed,
      final_metric=metric, epsilon=epsilon,
      local_epsilon_per_participation=None if epsilon is None else 4.0,
      accounting=None if epsilon is None else 'rdp', rounds=10,
      clients_per_round=5, downlink='full', upload_bits_total=8e9,
      download_bits_total=16e9, seconds_per_round=2.0, params={})
  record.update(overrides)
  return record


def _curve(rounds, top, private, bits_per_round=1e8, wobble=0.0):
  """Points for rounds 0..rounds: metric rising to `top`, cumulative bits."""
  return [dict(round=r, metric=top * r / max(rounds, 1) + (wobble if r else 0),
               epsilon=(0.1 * r if private else None),
               upload_bits=int(r * bits_per_round),
               download_bits=int(2 * r * bits_per_round))
          for r in range(rounds + 1)]


def _multi_seed():
  """dp_rec, dp_fedavg (private) and fedavg, 3 seeds each; one seed of
  dp_rec stopped at round 6 of 10."""
  records, curves = [], {}
  for name, top, private, bits in (('dp_rec', 0.4, True, 1e6),
                                   ('dp_fedavg', 0.42, True, 1e8),
                                   ('fedavg', 0.5, False, 1e8)):
    curves[name] = []
    for seed, wobble in zip((0, 1, 2), (-0.01, 0.0, 0.02)):
      rounds = 6 if (name, seed) == ('dp_rec', 2) else 10
      curve = _curve(rounds, top, private, bits, wobble)
      curves[name].append(curve)
      records.append(_record(name, seed, curve[-1]['metric'],
                             curve[-1]['epsilon'], rounds=rounds))
  return records, curves


def test_summarize_mean_and_standard_error():
  metrics = [0.30, 0.34, 0.35]
  records = [_record('dp_rec', s, m, epsilon=e, upload_bits_total=u)
             for s, m, e, u in zip((3, 5, 7), metrics, (0.9, 1.0, 0.8),
                                   (8e9, 16e9, 24e9))]
  records.append(_record('fedavg', 0, 0.5))
  (row, fedavg) = report.summarize(records)
  mean = sum(metrics) / 3
  # Sample variance (ddof=1) by hand: squared deviations over n - 1.
  std = math.sqrt(sum((m - mean)**2 for m in metrics) / 2)
  assert row['aggregator'] == 'dp_rec'
  assert row['n_seeds'] == 3
  assert row['seeds'] == [3, 5, 7]
  assert row['metric_mean'] == pytest.approx(0.33)
  assert row['metric_se'] == pytest.approx(std / math.sqrt(3))
  assert row['metric_se'] == pytest.approx(0.015275252, rel=1e-6)
  assert row['epsilon'] == 1.0
  assert row['upload_gb'] == pytest.approx(2.0)
  assert row['total_gb'] == pytest.approx(4.0)
  assert fedavg['epsilon'] is None
  assert fedavg['metric_se'] is None


def test_markdown_table_shows_mean_and_standard_error():
  records = [_record('dp_rec', s, m, epsilon=1.0)
             for s, m in zip((0, 1, 2), (0.30, 0.34, 0.35))]
  table = report.markdown_table(records)
  assert '3 seeds per aggregator' in table
  assert '| dp_rec | 33.00 ± 1.53 | 1.000 |' in table


def test_one_seed_shows_no_standard_error():
  records = [_record('dp_rec', 0, 0.3, epsilon=1.0),
             _record('dp_fedavg', 0, 0.32, epsilon=1.0)]
  (row, _) = report.summarize(records)
  assert row['metric_se'] is None
  table = report.markdown_table(records, _CONTEXT)
  assert '| dp_rec | 30.00 (1 seed) |' in table
  assert '±' not in table.split('\n')[4]
  assert '-2.00 vs dp_fedavg (no SE: 1 seed)' in table


def test_control_rows_are_named_and_compared():
  records = ([_record('dp_rec', s, m, epsilon=1.0)
              for s, m in ((0, 0.36), (1, 0.40))] +
             [_record('dp_rec_no_noise', s, m)
              for s, m in ((0, 0.50), (1, 0.54))])
  table = report.markdown_table(records, _CONTEXT)
  assert '| dp_rec (no noise) |' in table
  assert '| dp_rec_no_noise |' not in table
  # The method against its control: the cost of privacy.
  assert '-14.00 ± 2.83 vs dp_rec (no noise)' in table
  assert report.display_name('ddgauss16_no_noise') == 'ddgauss16 (no noise)'
  assert report.display_name('dp_fedavg') == 'dp_fedavg'


def test_context_rows_and_differences():
  records = ([_record('dp_fedavg', s, m, epsilon=1.0)
              for s, m in ((0, 0.40), (1, 0.44))] +
             [_record('dp_rec', s, m, epsilon=1.0)
              for s, m in ((0, 0.36), (1, 0.40))] +
             [_record('fedavg', 0, 0.5)])
  table = report.markdown_table(records, _CONTEXT)
  assert '| initial model | 1.00 |' in table
  assert '| frequent tags (5 most frequent) | 25.00 |' in table
  assert 'test split' in table
  assert 'relative to dp_fedavg' in table
  assert 'local eps' in table
  # Both aggregators have SE 0.02: the difference's SE is 0.02 * sqrt(2).
  assert ('- dp_rec: +13.00 ± 2.00 vs frequent tags; +37.00 ± 2.00 vs '
          'initial model; -4.00 ± 2.83 vs dp_fedavg') in table
  assert ('- dp_fedavg: +17.00 ± 2.00 vs frequent tags; +41.00 ± 2.00 vs '
          'initial model\n') in table
  assert '- fedavg' not in table
  assert 'frequent tags' not in report.markdown_table(records)


def test_communication_ratios_average_seeds_first():
  records = [
      _record('dp_fedavg', 0, 0.4, 1.0, upload_bits_total=100,
              download_bits_total=0, rounds=1, clients_per_round=1),
      _record('dp_fedavg', 1, 0.4, 1.0, upload_bits_total=300,
              download_bits_total=0, rounds=1, clients_per_round=1),
      _record('dp_rec', 0, 0.4, 1.0, upload_bits_total=10,
              download_bits_total=0, rounds=1, clients_per_round=1),
      _record('dp_rec', 1, 0.4, 1.0, upload_bits_total=30,
              download_bits_total=0, rounds=1, clients_per_round=1),
  ]
  assert report.communication_ratios(records) == [
      ('dp_rec', pytest.approx(10.0))]
  assert report.communication_ratios(records[2:]) == []


def test_communication_ratios_use_fixed_sizes_with_the_full_downlink():
  # A Poisson sample drew 47 clients where 50 were expected: the total is
  # lower, the cost per client-round is not.
  sizes = dict(upload_bits_per_client_round=64,
               download_bits_per_client_round=64)
  records = [
      _record('dp_fedavg', 0, 0.4, 1.0, upload_bits_total=47 * 64,
              download_bits_total=47 * 64, rounds=5, clients_per_round=10,
              **sizes),
      _record('fedavg', 0, 0.4, upload_bits_total=50 * 64,
              download_bits_total=50 * 64, rounds=5, clients_per_round=10,
              **sizes),
      _record('dp_rec', 0, 0.4, 1.0, upload_bits_total=50 * 16,
              download_bits_total=50 * 16, rounds=5, clients_per_round=10,
              downlink='history', upload_bits_per_client_round=16,
              download_bits_per_client_round=128),
  ]
  assert report.communication_ratios(records) == [
      ('fedavg', pytest.approx(1.0)), ('dp_rec', pytest.approx(4.0))]


def test_write_table_writes_markdown_and_csv(tmp_path):
  records, _ = _multi_seed()
  path = report.write_table(str(tmp_path), records, _CONTEXT)
  assert path == str(tmp_path / 'table.md')
  assert '| dp_rec |' in open(path).read()
  with open(tmp_path / 'table.csv') as f:
    rows = list(csv.DictReader(f))
  assert tuple(rows[0]) == report.SUMMARY_COLUMNS
  assert [r['aggregator'] for r in rows] == ['dp_rec', 'dp_fedavg', 'fedavg']
  assert rows[0]['n_seeds'] == '3'
  assert rows[0]['seeds'] == '0 1 2'
  assert rows[0]['rounds'] == '6'
  assert rows[2]['epsilon'] == ''
  assert rows[2]['local_epsilon_per_participation'] == ''
  summary = report.summarize(records)
  assert float(rows[1]['metric_mean']) == pytest.approx(
      summary[1]['metric_mean'])
  assert float(rows[1]['metric_se']) == pytest.approx(summary[1]['metric_se'])
  # The old call without context still works.
  report.write_table(str(tmp_path), records)


def test_write_curves_one_row_per_point(tmp_path):
  records, curves = _multi_seed()
  path = report.write_curves(str(tmp_path), curves, records)
  with open(path) as f:
    rows = list(csv.DictReader(f))
  assert tuple(rows[0]) == report.CURVE_COLUMNS
  assert len(rows) == sum(len(c) for seeds in curves.values() for c in seeds)
  row = next(r for r in rows if r['aggregator'] == 'dp_fedavg'
             and r['seed'] == '1' and r['round'] == '10')
  point = curves['dp_fedavg'][1][10]
  assert float(row['metric']) == pytest.approx(point['metric'])
  assert float(row['epsilon']) == pytest.approx(point['epsilon'])
  assert int(row['upload_bits']) == point['upload_bits']
  assert int(row['download_bits']) == point['download_bits']
  assert {r['epsilon'] for r in rows if r['aggregator'] == 'fedavg'} == {''}
  assert max(int(r['round']) for r in rows
             if r['aggregator'] == 'dp_rec' and r['seed'] == '2') == 6


def test_write_curves_numbers_seeds_by_position_without_records(tmp_path):
  _, curves = _multi_seed()
  with open(report.write_curves(str(tmp_path), curves)) as f:
    seeds = {r['seed'] for r in csv.DictReader(f)}
  assert seeds == {'0', '1', '2'}


def test_series_keeps_rounds_all_seeds_share_then_the_end():
  # Seed 2 stopped at round 6 of 10: every seed's rounds before its end,
  # then the mean of the last points at round 10.
  _, curves = _multi_seed()
  series = stats.mean_curve(curves['dp_rec'], report_plots._metric)
  assert [x for x, _, _ in series] == list(range(6)) + [10]
  # The communication axis leaves out round 0 (no bits yet).
  series = stats.mean_curve(curves['dp_rec'], report_plots._metric,
                            report_plots._communication_gb)
  assert len(series) == 6
  assert series[0][0] == pytest.approx(3e6 / report.GIGABYTE_BITS)


def _assert_plots(output_dir, paths):
  assert [os.path.basename(p) for p in paths] == list(_PLOTS)
  for name in _PLOTS:
    assert os.path.getsize(os.path.join(output_dir, name)) > 1000
  assert not os.path.exists(os.path.join(output_dir, 'metric_vs_epsilon.png'))


def test_plots_multi_seed_with_early_stop(tmp_path):
  records, curves = _multi_seed()
  _assert_plots(str(tmp_path),
                report_plots.write_plots(str(tmp_path), records, curves,
                                         _CONTEXT))


def test_plots_single_seed(tmp_path):
  curve = _curve(5, 0.3, private=True)
  records = [_record('dp_rec', 0, curve[-1]['metric'], curve[-1]['epsilon'])]
  _assert_plots(str(tmp_path), report_plots.write_plots(
      str(tmp_path), records, {'dp_rec': [curve]}))


def test_plots_without_private_aggregator(tmp_path):
  curves = {'fedavg': [_curve(5, 0.5, private=False) for _ in range(2)]}
  curves['fedavg'][0][0]['epsilon'] = 0.0  # Round 0 may say 0, not None.
  records = [_record('fedavg', s, 0.5) for s in range(2)]
  assert report_plots.write_plots(str(tmp_path), records, curves)
  _assert_plots(str(tmp_path),
                report_plots.write_plots(str(tmp_path), records, curves,
                                         _CONTEXT))


def test_no_records():
  assert report.markdown_table([]) == '(no results)\n'
  assert report.summarize([]) == []
  assert report_plots.write_plots('/nonexistent', [], {}) == []


def test_mean_se_of_a_diverged_run_is_nan_without_se():
  mean, se = stats.mean_se([0.3, 0.5])
  assert mean == pytest.approx(0.4) and se == pytest.approx(0.1)
  mean, se = stats.mean_se([0.3, math.nan, 0.5])
  assert math.isnan(mean) and se is None
  assert stats.mean_se([0.3]) == (0.3, None)


def test_accountant_split_parts_add_up_to_the_distance():
  rows = [dict(aggregator=name, metric_mean=mean, metric_se=se)
          for name, mean, se in (('ddgauss16', 0.334, 0.010),
                                 ('dp_fedavg_rdp', 0.340, 0.012),
                                 ('dp_fedavg', 0.410, 0.013))]
  line = report.accountant_split(rows)
  assert line.startswith('ddgauss16 - dp_fedavg -7.60 points, in two parts: ')
  assert 'ddgauss16 - dp_fedavg_rdp -0.60 ± 1.56 (the mechanism' in line
  assert 'dp_fedavg_rdp - dp_fedavg -7.00 ± 1.77 (RDP against PLD' in line
  assert report.accountant_split(rows[:2]) == ''


def test_ratio_words():
  assert report._ratio_words(365.0) == '365x less'  # pylint: disable=protected-access
  assert report._ratio_words(1.001) == 'the same'  # pylint: disable=protected-access
  assert report._ratio_words(0.5) == '2x more'  # pylint: disable=protected-access
