# One-command setup, main job and tests. The virtual environment lives in .venv.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup run test bench tutorial clean

setup: $(STAMP)

# TFF 0.87.0 pins jax==0.4.14, which the registry cannot provide: install its
# pinned dependencies from requirements.txt, then TFF itself with --no-deps.
$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps tensorflow-federated==0.87.0
	touch $(STAMP)

run: setup
	$(PY) -m experiments.run --task=stackoverflow_lr

# The timeout (TERM, then KILL a minute later) bounds the suite, and
# pytest-timeout each test (pyproject.toml); TFF's
# worker_binary processes die with pytest (tff_dprec/worker_reaper.py).
# One pytest-xdist worker per core; most of the suite is single-threaded
# TFF tracing and CLI subprocesses, so two workers on two cores take about
# half the time of one. The 30 slowest tests are listed at the end.
test: setup
	timeout --kill-after=60 3000 $(PY) -m pytest -q -n auto --dist worksteal --durations=30 tests

bench: setup
	$(PY) -m experiments.bench codec
	$(PY) -m experiments.bench history
	$(PY) -m experiments.bench rounds

# Executes docs/tutorials/dp_rec_tutorial.ipynb and stores its outputs in it.
tutorial: setup
	timeout --kill-after=60 1800 $(PY) -m tests.tutorial_test --write

clean:
	rm -rf $(VENV) output
