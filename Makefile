# Two commands from a fresh clone: `make demo` (the main job) and `make test`.
# Each creates .venv when missing and installs what it needs; torch stays pinned to the CPU build
# through constraints.txt so no dependency pulls a multi-GB CUDA wheel.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
CONSTRAINTS := $(CURDIR)/constraints.txt
export PIP_CONSTRAINT := $(CONSTRAINTS)
# One thread per process: reproducible timings, no oversubscription on small machines.
export OMP_NUM_THREADS := 1
export OPENBLAS_NUM_THREADS := 1
export MKL_NUM_THREADS := 1
# Bytecode caches on (some images set PYTHONDONTWRITEBYTECODE=1): the test workers, the forked
# docs commands and the Ray workers import the same modules, and without __pycache__ each
# process compiles medibench and pytest rewrites every test module again (collecting the suite:
# 24 s without, 14 s with, per worker; measured on the 2-core machine).
unexport PYTHONDONTWRITEBYTECODE

# numba's SSIM kernel, compiled once into its cache as part of the install (about a minute on
# one core; a no-op without numba), rather than by the first command or test that scores SSIM.
KERNELS := $(PY) -c "from medibench.metrics._ssim_fused import fused_backend, warm; fused_backend() and warm()"

# xdist workers: one more than the cores this process may use. The suite's tests wait on Ray
# start-ups, local servers, Chromium and forked commands, which leaves a core idle with one
# worker per core: on the 2-core machine (warm test cache) 780 s with 2 workers, 720 s with 3,
# the cores then 98% busy (/proc/stat). README.md's `make test` line has the fresh-clone figure.
WORKERS ?= $(shell $(PYTHON) -c "import os; f = getattr(os, 'sched_getaffinity', None); print((len(f(0)) if f else os.cpu_count()) + 1)")

.PHONY: demo test bench lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: $(PY) pyproject.toml constraints.txt
	$(PIP) install -q -c $(CONSTRAINTS) -e ".[demo-data]"
	$(KERNELS)
	touch $@

$(VENV)/.dev-installed: $(PY) pyproject.toml constraints.txt
	$(PIP) install -q -c $(CONSTRAINTS) -e ".[dev,demo-data,torch,ray,hf]"
	$(KERNELS)
	touch $@

demo: $(VENV)/.demo-installed
	$(VENV)/bin/medibench demo --out demo_run

test: $(VENV)/.dev-installed
	$(PY) -m pytest -q -n $(WORKERS) --dist loadgroup

bench: $(VENV)/.dev-installed
	$(PY) bench/metrics.py

lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy  # files and settings: [tool.mypy] in pyproject.toml

clean:
	rm -rf demo_run .pytest_cache
