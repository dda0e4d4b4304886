# Two commands matter: `make demo` and `make test`. Both bootstrap .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Python's cache of compiled modules (__pycache__, ignored by git) stays on for every step, even
# where the environment turns it off (PYTHONDONTWRITEBYTECODE, set by many container images and
# on the 2-core machine): without it every Python process the tests start compiles skiplock's
# ~200 modules again (its multiprocessing children are given -B too). Measured 2026-12-07:
# 0.13-0.16 s of CPU a process (`skiplock migrate` 495 -> 343 ms, `worker --burst` 413 -> 279 ms),
# and the slow tier starts about a thousand (325 in a sample of 151 of its 625 tests).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast lint typecheck docs docs-serve pytest pytest-fast-tier pytest-slow-tier pytest-serial pytest-django pytest-django-postgres pytest-django-sqlite soak clean bench bench-django bench-storage bench-logs profile screenshots audit

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks tools
	$(BIN)/ruff format --check src tests examples benchmarks tools

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

# Three runs in turn: the in-process tests in 4 pytest-xdist processes (they mostly wait on the
# database); what is marked slow (real processes, the browser) in 3, each process with its own
# ports and schemas (its CPU is mostly the Python processes its tests start: in 2 the cores were
# 84 % busy on average, in 3 98 %, and it took 14 min 20 s against 15 min 56 s, the same code,
# 2026-12-07); then what restarts the shared PostgreSQL server (marked serial in
# tests/tiers.py) and the soak, one at a time.
pytest: pytest-fast-tier pytest-slow-tier pytest-serial

pytest-fast-tier: $(STAMP)
	$(BIN)/pytest -q -n 4 -m "not slow and not soak" --ignore=tests/django

pytest-slow-tier: $(STAMP)
	$(BIN)/pytest -q -n 3 -m "slow and not serial and not soak" --ignore=tests/django --durations=15

pytest-serial: $(STAMP)
	$(BIN)/pytest -m "serial or soak" --ignore=tests/django

# Django 6 needs Python 3.12+: tests/django run in a venv of their own, once per database.
DJANGO_VENV := .venv-django
DJANGO_STAMP := $(DJANGO_VENV)/.installed

$(DJANGO_STAMP): pyproject.toml
	$${PYTHON_DJANGO:-$$(.ci/python312)} -m venv $(DJANGO_VENV)
	$(DJANGO_VENV)/bin/pip install --quiet --upgrade pip
	$(DJANGO_VENV)/bin/pip install --quiet -e '.[dev,django,django-tasks-db]'
	touch $(DJANGO_STAMP)

pytest-django: pytest-django-postgres pytest-django-sqlite

pytest-django-postgres: $(DJANGO_STAMP)
	SKIPLOCK_DJANGO_DB=postgres $(DJANGO_VENV)/bin/pytest -q tests/django

pytest-django-sqlite: $(DJANGO_STAMP)
	SKIPLOCK_DJANGO_DB=sqlite $(DJANGO_VENV)/bin/pytest -q tests/django

# The documentation site (mkdocs.yml): --strict, so a broken link or a warning fails the build.
# tests/test_docs.py runs the pages' examples; `make docs-serve` previews on 127.0.0.1:8000.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# Known vulnerabilities (pip-audit) in the lowest set pyproject.toml admits, resolved with its
# dependencies by uv, and in .venv. Out of reach of the registry or the vulnerability service it
# says so and passes; SKIPLOCK_AUDIT_REQUIRED=1 makes that a failure. tools/audit.py says why.
audit: $(STAMP)
	$(BIN)/python tools/audit.py

# Everything (18 min 20 s from a fresh clone on 2 cores, 2026-12-07 at 832dd7e, venvs included; README). Steps
# that share nothing run side by side (tools/together.py prints each one's output whole when it
# ends): the four checks with each
# other; the Django suite on SQLite beside the serial tests (they restart the shared PostgreSQL
# server, which the Django suite on PostgreSQL then uses). The two pytest tiers run alone:
# they keep both cores busy and their real-process tests want them.
MAKE_QUIET := $(MAKE) --no-print-directory

test: $(STAMP) $(DJANGO_STAMP)
	$(BIN)/python tools/together.py "$(MAKE_QUIET) lint" "$(MAKE_QUIET) typecheck" \
		"$(MAKE_QUIET) docs" "$(MAKE_QUIET) audit"
	$(MAKE_QUIET) pytest-fast-tier
	$(MAKE_QUIET) pytest-slow-tier
	$(BIN)/python tools/together.py \
		"$(MAKE_QUIET) pytest-serial && $(MAKE_QUIET) pytest-django-postgres" \
		"$(MAKE_QUIET) pytest-django-sqlite"

# The inner loop's tier: lint and the in-process tests on both databases, in 4 pytest-xdist
# processes (the tests mostly wait on the database, so 4 beat 2 on 2 cores). It leaves out what
# is marked slow (real processes, the browser's tests/dashboard, the Django venv) and the
# seconds-long tests tests/tiers.py lists: 2,043 tests, 4 min 36 s in a fresh clone on
# 2026-12-07 (1,414 took 133.5 s on 2026-12-06), once the catalogs earlier runs churned were vacuumed
# (tests/conftest.py does it at the start of every run). `make test` runs this tier the same
# way, then the slow one in 3 processes and the serial ones alone (the pytest target above).
test-fast: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks tools
	$(BIN)/pytest -q -x -n 4 -m "not slow and not soak" --ignore=tests/django

# The dashboard's screenshots in docs/images, taken by its browser tests (Debian's chromium).
screenshots: $(STAMP)
	SKIPLOCK_SCREENSHOTS=docs/images $(BIN)/pytest -q -p no:randomly tests/dashboard -k sqlite

# The full-length soak (make test runs it for SKIPLOCK_SOAK_SECONDS=20).
soak: $(STAMP)
	SKIPLOCK_SOAK_SECONDS=60 $(BIN)/pytest -s -m soak

# Benchmarks (not part of `make test`): skiplock beside pgqueuer, procrastinate and the seed-000
# design, and the CLI worker at its defaults beside the in-process rows (W2-W4); ~8 minutes here. BENCH_ARGS="--quick" for a smoke test, "--only W2,W4" for some workloads.
# W17 workflows (benchmarks/workflows.py) adds ~15-20 minutes, most of it the two 10,000-link
# chains; WORKFLOWS_BENCH_ARGS="--quick" (1,000 jobs a shape, 10 chord runs) or "--only chord".
# W20, several databases (issue 46, benchmarks/databases.py): W2 (a 30,000-job drain) and W4
# (200 jobs 20 ms apart) through one CLI worker at its defaults over 1, 2 and 3 databases of
# the bench's server, 3 interleaved runs, ~3 minutes; then W8 over databases
# (benchmarks/databases_held.py): 300 jobs/s offered to each of 3 databases, the horizon held
# in one, 60/120/30 s phases, ~4 minutes; then the same with the held database on a server of
# its own (--servers 2: two stock clusters the bench makes, root needed). DATABASES_BENCH_ARGS / DATABASES_HELD_BENCH_ARGS=
# "--quick" for a smoke test (~1 minute each).
# W18, process tasks (issue 47, benchmarks/processes.py): no-op jobs (500) and 50 ms of CPU
# (100) through a thread task, a process task and Celery's prefork pool (Redis broker at
# redis://127.0.0.1:6379/9), each at 2 slots; then 50 ms jobs through --processes 2 with thread
# tasks against one worker's process tasks with --child-processes 2; 3 interleaved runs,
# ~5 minutes. PROCESSES_BENCH_ARGS="--quick" for a smoke test (~1 minute).
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) bench-django
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.tenants $(TENANTS_BENCH_ARGS)
	$(BIN)/python -m benchmarks.aging $(AGING_BENCH_ARGS)
	$(BIN)/python -m benchmarks.workflows $(WORKFLOWS_BENCH_ARGS)
	$(BIN)/python -m benchmarks.databases $(DATABASES_BENCH_ARGS)
	$(BIN)/python -m benchmarks.databases_held $(DATABASES_HELD_BENCH_ARGS)
	$(BIN)/python -m benchmarks.databases_held --servers 2 $(DATABASES_HELD_BENCH_ARGS)
	$(BIN)/python -m benchmarks.processes $(PROCESSES_BENCH_ARGS)

# The Django paths (Python 3.12+, a venv of its own so the seed's packages never reach the
# test venv): concurrent_worker on skiplock's backend and on django-tasks-db beside
# django-tasks-concurrent's own worker, PostgreSQL and SQLite. DJANGO_BENCH_ARGS="--tasks 2000".
DJANGO_BENCH_VENV := .venv-django-bench
DJANGO_BENCH_STAMP := $(DJANGO_BENCH_VENV)/.installed

$(DJANGO_BENCH_STAMP): pyproject.toml
	$${PYTHON_DJANGO:-$$(.ci/python312)} -m venv $(DJANGO_BENCH_VENV)
	$(DJANGO_BENCH_VENV)/bin/pip install --quiet --upgrade pip
	$(DJANGO_BENCH_VENV)/bin/pip install --quiet -e '.[django,bench-django]'
	touch $(DJANGO_BENCH_STAMP)

bench-django: $(DJANGO_BENCH_STAMP)
	$(DJANGO_BENCH_VENV)/bin/python -m benchmarks.django_bench $(DJANGO_BENCH_ARGS)

# Storage over time (issue 24): W8 held horizon, the clean phase at 60 % of the peak, W11 soak,
# on a stock-settings PostgreSQL cluster the bench creates and drops (needs root); ~65 minutes.
# STORAGE_BENCH_ARGS="--quick" (~13 min), "--workloads W8 --runs 3". Then readers that must not
# stall the queue (issue 44, benchmarks/readers.py): W9 active readers and its CPU controls W9cpu
# and W9twin at 1,000 jobs/s and 60 % of the peak, W19 pg_dump, SQLite's WAL under a reader
# (W9sqlite); ~47 minutes. READERS_BENCH_ARGS="--phase-seconds 20" (~13 min), "--workloads W9,W19".
bench-storage: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.horizon $(STORAGE_BENCH_ARGS)
	$(BIN)/python -m benchmarks.readers $(READERS_BENCH_ARGS)
	$(BIN)/python -m benchmarks.storage_ops $(STORAGE_OPS_ARGS)

# What logging costs a busy worker at warning, info and debug (issue 24).
bench-logs: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.log_cost

# Where the time goes (pyinstrument over W1 bulk and W2), read in benchmarks/HISTORY.md.
profile: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.profile $(PROFILE_ARGS)

clean:
	rm -rf $(VENV) $(DJANGO_VENV) $(DJANGO_BENCH_VENV) site skiplock.db skiplock.db-wal skiplock.db-shm
