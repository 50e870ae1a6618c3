# The README's two commands: `make run` and `make test`. Both set up .venv when it is missing
# or pyproject.toml changed. torch comes first, pinned to the CPU build on local disk
# (an unpinned torch would pull a multi-GB CUDA build).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0
export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: run test lint pytest bench bench-recall bench-load protos docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

run: $(STAMP)
	$(BIN)/stratad serve

test: lint pytest

pytest: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m tests.bench.append_latency
	$(BIN)/python -m tests.bench.session_rss
	$(BIN)/python -m tests.bench.weaver_throughput
	$(BIN)/python -m tests.bench.tier3_query
	$(BIN)/python -m tests.bench.recall_latency

bench-recall: $(STAMP)
	$(BIN)/python -m tests.bench.locomo --fixed-evidence

# 32 concurrent clients mixing Append, EndSession, Recall and Pack for 2 minutes
# (make bench-load LOAD_SECONDS=30 for a shorter run); not part of `make test`.
bench-load: $(STAMP)
	$(BIN)/python -m tests.bench.load $(if $(LOAD_SECONDS),--seconds $(LOAD_SECONDS))

protos: $(STAMP)
	$(BIN)/python -m daemon.protogen

docs: $(STAMP)
	$(BIN)/python -m daemon.docgen

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
