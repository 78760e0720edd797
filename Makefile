# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need
# into .venv first.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: install browser slurm demo test lint bench

$(VENV)/.installed: pyproject.toml requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -U pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[local,dev]'
	# wheels of the in-cluster runtime (Python 3.8+, x86_64), so tests can build a bundle offline
	$(PY) -c 'import subprocess, sys; from job_chain.submit.bundle import download_command; \
	    sys.exit(subprocess.call(download_command("$(VENV)/bundle-wheels")))'
	touch $@

install: $(VENV)/.installed

# Headless Chromium and its driver for the web console's browser tests (Debian packages; quiet, and
# skipped when both are present). apt-get needs root: CI runs as root, others get sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	    echo "installing chromium and chromium-driver (browser tests)"; \
	    $(SUDO) apt-get update -qq >/dev/null && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

# A real Slurm for the Slurm engine's tests (tests/slurm_cluster.py starts a private one-host cluster
# of munged, slurmctld and two slurmd on loopback; nothing is configured system-wide). Debian's
# slurm-wlm (22.05) and munge; skipped when present. The tests fail, never skip, without them.
# libfaketime: the TIMEOUT test's slurmctld runs on a fast clock (Slurm's time limits are whole minutes).
slurm:
	@if ! command -v sbatch >/dev/null || [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/munged ] || \
	    ! ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1; then \
	    echo "installing slurm-wlm, munge and libfaketime (Slurm engine tests)"; \
	    $(SUDO) apt-get update -qq >/dev/null && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge libfaketime >/dev/null; \
	fi

demo: install
	$(VENV)/bin/job-chain run examples/hello/chain_info.json --local --follow
	$(VENV)/bin/job-chain logs examples/hello/chain_info.json --local --step 2
	@echo "(the local server keeps running in the background: job-chain local status | stop)"
	@# the web console next to it, in the background (a second demo reuses the one still running)
	@scripts/demo-console.sh $(VENV)/bin/job-chain $(VENV) examples --local

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/vermin --no-tips --violations -t=3.8- --eval-annotations --backport typing_extensions job_chain
	$(VENV)/bin/mypy job_chain

# Four workers (pytest-xdist) on a CI machine's two cores: most tests wait on processes and the
# server, so the other workers' tests fill that time (measured: 4:57 with two, 4:17 with three when
# the suite was 1,120 tests; at 1,299 tests 4:37 with three, 4:03 with four). --dist loadscope keeps each test file on one
# worker, in its order, with its module-scoped servers and browser started once;
# --no-loadscope-reorder hands the modules out in the order tests/conftest.py sorts them (the slow
# drills and fuzz first: xdist's own order, by test count, handed the fuzz out 61st of 83 modules).
# The 10 slowest tests are listed at the end, so a test that starts waiting on something shows.
# PYTHONDONTWRITEBYTECODE emptied (an environment may set it): the suite starts hundreds of Python
# processes (servers, CLIs, hops); without cached bytecode each compiled job_chain's modules again
# (measured: 12% of the CPU of the CLI- and hop-heavy tests). __pycache__ is git-ignored.
# One worker, as before: $(PY) -m pytest -q
test: lint browser slurm
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 4 --dist loadscope --no-loadscope-reorder --durations=10

bench: install
	$(PY) benchmarks/run_all.py
