"""Experiments for tff_dprec: CLI, tasks, data, baselines and reports."""
