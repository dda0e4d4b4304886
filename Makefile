# Two commands matter: `make demo` and `make test`. Both bootstrap .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest pytest-django soak clean bench profile screenshots

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

pytest: $(STAMP)
	$(BIN)/pytest --ignore=tests/django

# Django 6 needs Python 3.12+: tests/django run in a venv of their own, once per database.
DJANGO_VENV := .venv-django
DJANGO_STAMP := $(DJANGO_VENV)/.installed

$(DJANGO_STAMP): pyproject.toml
	$${PYTHON_DJANGO:-$$(.ci/python312)} -m venv $(DJANGO_VENV)
	$(DJANGO_VENV)/bin/pip install --quiet --upgrade pip
	$(DJANGO_VENV)/bin/pip install --quiet -e '.[dev,django]'
	touch $(DJANGO_STAMP)

pytest-django: $(DJANGO_STAMP)
	SKIPLOCK_DJANGO_DB=postgres $(DJANGO_VENV)/bin/pytest -q tests/django
	SKIPLOCK_DJANGO_DB=sqlite $(DJANGO_VENV)/bin/pytest -q tests/django

test: lint typecheck pytest pytest-django

# The dashboard's screenshots in docs/images, taken by its browser tests (Debian's chromium).
screenshots: $(STAMP)
	SKIPLOCK_SCREENSHOTS=docs/images $(BIN)/pytest -q -p no:randomly tests/dashboard -k sqlite

# The full-length soak (make test runs it for SKIPLOCK_SOAK_SECONDS=20).
soak: $(STAMP)
	SKIPLOCK_SOAK_SECONDS=60 $(BIN)/pytest -s -m soak

# Benchmarks (not part of `make test`): skiplock beside pgqueuer, procrastinate and the seed-000
# design; ~7 minutes here. BENCH_ARGS="--quick" for a smoke test, "--only W2,W4" for some workloads.
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

# Where the time goes (pyinstrument over W1 bulk and W2), for docs/benchmarks.md.
profile: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.profile $(PROFILE_ARGS)

clean:
	rm -rf $(VENV) $(DJANGO_VENV) skiplock.db skiplock.db-wal skiplock.db-shm
