# The README's two commands: `make run` and `make test`. Both set up .venv when it is missing
# or pyproject.toml changed. torch comes first, pinned to the CPU build on local disk
# (an unpinned torch would pull a multi-GB CUDA build).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Every package, transitive ones and the build tools included, is pinned in the lock
# (pip-tools; `make lock` refreshes it, docs/operations.md says how). pip itself is pinned here.
LOCK := deploy/requirements.lock
PIP := pip==26.3
PIP_TOOLS := pip-tools==7.6.2
TORCH := torch==2.13.0
export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: run test test-fast lint lock-check lock pytest bench bench-recall learned-fusion bench-load bench-build bench-forget bench-fleet bench-index bench-long-session bench-updates bench-cold bench-scale bench-cold-disk protos docs clean

# Both distributions of the repository, editable: the client (daemon/client/, stratad-client)
# and the daemon (stratad), which depends on it.
CLIENT := daemon/client

$(STAMP): pyproject.toml $(CLIENT)/pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$(PIP)"
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip uninstall --quiet --yes strata 2>/dev/null || true  # its name until 0.1
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e $(CLIENT) -e .
	touch $@

run: $(STAMP)
	$(BIN)/stratad serve

test: lock-check lint pytest

# The unit and contract tests alone: no daemon, in this process or as a subprocess
# (tests/support/tier.py). `make test` stays the full suite, and CI runs it.
test-fast: $(STAMP)
	$(BIN)/python -m pytest --fast

# Fails when the lock no longer matches pyproject.toml or this venv, and says how to refresh it.
lock-check: $(STAMP)
	$(BIN)/python -m tests.support.lockfile

# Re-resolve the lock after a change to either pyproject.toml, keeping every pin that still fits
# (make lock LOCK_ARGS=--upgrade moves everything to the newest versions that install).
# pip-tools runs in its own venv: it resolves with this machine's pip settings, which is
# how the local CPU build of torch is found. The daemon depends on the client, which is no
# package index's: its wheel is built first for the resolver, and its pin left out of the lock
# (the Makefile installs it from daemon/client/).
lock:
	test -x $(VENV)-lock/bin/pip-compile || ( $(PYTHON) -m venv $(VENV)-lock \
		&& $(VENV)-lock/bin/python -m pip install --quiet "$(PIP)" "$(PIP_TOOLS)" )
	rm -rf $(VENV)-lock/wheels
	$(VENV)-lock/bin/python -m pip wheel --quiet --no-deps -w $(VENV)-lock/wheels $(CLIENT)
	rm -rf $(CLIENT)/build  # the wheel's build tree, which the module docs would list
	$(VENV)-lock/bin/pip-compile --quiet --extra dev --extra mcp --extra agents --extra langgraph \
		--extra adk --all-build-deps --allow-unsafe --find-links $(VENV)-lock/wheels \
		--strip-extras --no-emit-index-url --no-emit-find-links $(LOCK_ARGS) \
		--output-file $(LOCK) $(CLIENT)/pyproject.toml pyproject.toml
	awk '/^stratad-client==/{own=1;next} own&&/^ /{next} {own=0;print}' $(LOCK) > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)

# The suite runs in TEST_WORKERS processes (pytest-xdist), each handed the next test when it
# is free: most tests wait on daemons, disks and sockets, so two share two cores well.
# TEST_WORKERS=0 runs it in this process alone.
TEST_WORKERS ?= 2

# The sources are compiled first: the suite starts a few hundred Python subprocesses (daemons,
# CLIs, build children), and where PYTHONDONTWRITEBYTECODE is set each compiled every module
# it imported again (half a CPU-second per daemon start).
pytest: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 daemon tiers weaver recall tests
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m tests.bench.append_latency
	$(BIN)/python -m tests.bench.session_rss
	$(BIN)/python -m tests.bench.weaver
	$(BIN)/python -m tests.bench.tier3.query
	$(BIN)/python -m tests.bench.recall_latency
	$(BIN)/python -m tests.bench.embedding.backends
	$(BIN)/python -m tests.bench.embedding.remote
	$(BIN)/python -m tests.bench.embedding.tokens

# Retrieval quality on the two development sets of ../shared: LoCoMo (evidence turns, after a
# consolidation run), then RealMem (the sessions a user's turn needs, the conversations lived
# session by session with the index stage only). Each prints its tables.
bench-recall: $(STAMP)
	$(BIN)/python -m tests.bench.locomo --fixed-evidence
	$(BIN)/python -m tests.bench.realmem

# Train the learned fusion (recall/learned_fusion.json): both benchmarks record the features
# of the hand-set fusion's hits, then a model is measured leave-one-conversation-out and
# trained on them all (about 30 minutes); `make bench-recall` then measures it in the daemon.
FEATURES_DIR ?= .bench/learned-fusion
LOCOMO_FULL_ONLY := $(foreach c,bm25 dense no_vector no_keyword no_graph index rerank \
	no_episode_chunk no_episode_turn no_summary no_fact no_profile no_document,--skip $(c))
learned-fusion: $(STAMP)
	$(BIN)/python -m tests.bench.locomo --fixed-evidence $(LOCOMO_FULL_ONLY) --features $(FEATURES_DIR)/locomo.json
	$(BIN)/python -m tests.bench.realmem --features $(FEATURES_DIR)/realmem.json
	$(BIN)/python -m tests.bench.learned_fusion --locomo $(FEATURES_DIR)/locomo.json \
		--realmem $(FEATURES_DIR)/realmem.json --out recall/learned_fusion.json

# 32 concurrent clients mixing Append, EndSession, Recall and Pack for 2 minutes
# (make bench-load LOAD_SECONDS=30 for a shorter run); not part of `make test`.
bench-load: $(STAMP)
	$(BIN)/python -m tests.bench.load $(if $(LOAD_SECONDS),--seconds $(LOAD_SECONDS))

# The daemon while its vector index builds at 100k points (Append/Recall waits, then Recall
# latency with the index built); not part of `make test`.
bench-build: $(STAMP)
	$(BIN)/python -m tests.bench.index.build

# Agents talking at a human pace (a turn every 2 s): the largest fleet one daemon serves
# (FLEET="32 64 100" for other sizes; 6 minutes each).
bench-fleet: $(STAMP)
	$(BIN)/python -m tests.bench.fleet $(if $(FLEET),--agents $(FLEET))

# The index stage on a quiet daemon beside the model's own throughput on the same cores.
bench-index: $(STAMP)
	$(BIN)/python -m tests.bench.index.stage

# One live session of 2,000 LoCoMo turns: Recall, GetContext and Pack of turns 100 to 1,900
# messages back while the session lives, then again after EndSession (about 3 minutes).
bench-long-session: $(STAMP)
	$(BIN)/python -m tests.bench.long_session

# Updates: the current value first, the earlier one still found (dev and held-out halves).
bench-updates: $(STAMP)
	$(BIN)/python -m tests.bench.updates $(UPDATES)

# Recall of users whose graph is not kept in memory (evicted, or after a restart): the
# graph's features read from <data_dir>/graphs instead of every point. COLD="--users 8" etc.
bench-cold: $(STAMP)
	$(BIN)/python -m tests.bench.cold.scopes $(COLD)

# A store of a million points over 1,000 users with a skew, filled offline, then a real stratad
# on it: start, memory, disk, Recall per user, a restart and a Forget of the largest user
# (issue 44). SCALE="--points 10000000 --dir /big/disk" for ten million.
bench-scale: $(STAMP)
	$(BIN)/python -m tests.bench.scale $(SCALE)

# A small user's first Recall once the page cache is dropped (root only), on a store kept by
# bench-scale: COLD_DISK="--dir /big/disk --set STRATA_VECTORS__RESCORE=true" etc.
bench-cold-disk: $(STAMP)
	$(BIN)/python -m tests.bench.cold.disk $(COLD_DISK)

# What a Forget costs at 100k and at 400k points, with other tenants served meanwhile.
bench-forget: $(STAMP)
	$(BIN)/python -m tests.bench.forget_cost --points 100000
	$(BIN)/python -m tests.bench.forget_cost --points 400000

protos: $(STAMP)
	$(BIN)/python -m daemon.dev.protogen

docs: $(STAMP)
	$(BIN)/python -m daemon.dev.docgen

clean:
	rm -rf $(VENV) $(VENV)-lock .pytest_cache .mypy_cache .ruff_cache *.egg-info $(CLIENT)/*.egg-info
