"""Tests of the experiments: data, runner, infra and studies."""
