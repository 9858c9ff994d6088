# One-command set-up: `make run` serves the API, `make test` runs the suite.
# Both create .venv and install pinned requirements on a fresh machine with Python 3.11.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
# The optional vector backends' client libraries (requirements/vectors-*.txt): the tests and
# the benchmark exercise every adapter, so they install all of them.
VECTOR_EXTRAS := $(VENV)/.vector-extras-installed

.PHONY: venv run test test-quick lint bench bench-large fuzz clean vector-extra bench-peers screenshots

venv: $(STAMP)

# torch is installed on its own first, pinned, so that nothing can pull the CUDA build.
# requirements-llm.txt: the local model's runtime and weights, each checked by its hash.
# clients/python: the typed client and the `memory-agent` command, installed editable.
$(STAMP): requirements.txt requirements-llm.txt clients/python/pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=python3"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "torch==$$(sed -n 's/^torch==//p' requirements.txt)"
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements-llm.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e clients/python
	touch $(STAMP)

run: venv
	$(PY) manage.py run_stack

$(VECTOR_EXTRAS): $(STAMP) $(wildcard requirements/vectors-*.txt)
	$(PY) -m pip install --quiet -r requirements/vectors-all.txt
	touch $(VECTOR_EXTRAS)

# One backend's client library, e.g. `make vector-extra BACKEND=qdrant`.
vector-extra: venv
	$(PY) -m pip install --quiet -r requirements/vectors-$(BACKEND).txt

# Test workers (pytest-xdist): each file runs on one worker with its own test database and
# embedded Redis. TEST_WORKERS=0 runs the suite in this process. Tests marked `serial`
# measure latency, so they run alone, after the others.
TEST_WORKERS ?= 2
test: venv $(VECTOR_EXTRAS)
	scripts/ensure_chromium.sh
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial"
	$(PY) -m pytest -p no:xdist -m serial

# The quick lane while working: everything but the tests marked slow (the real local model,
# the browser, the worker and fault drills). CI runs `make lint` and the full `make test`.
test-quick: venv $(VECTOR_EXTRAS)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow"

# Schemathesis with many more examples per operation than `make test` runs (minutes).
fuzz: venv
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-100} $(PY) -m pytest tests/memory_project/test_api_fuzz.py -p no:cacheprovider

# ruff; the floors (import-linter contracts in pyproject.toml); mypy with django-stubs on the
# apps; no model change without its migration.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(PY) manage.py makemigrations --check --dry-run

# Figures, not tests: ingest memories/s, REST search p50/p95 and REST overhead at 10k and
# 100k, LoCoMo recall@k, and pgvector beside Qdrant's local mode on the 100k tenant (p50/p95,
# recall@10 against exact search; the first run copies the tenant into var/bench/qdrant).
bench: venv $(VECTOR_EXTRAS)
	$(PY) manage.py bench

# The same search figures at a million memories in one tenant (beside nine tenants of 10k):
# the first run fills the bench database and builds its HNSW index (about 30 minutes on 2
# cores), later runs reuse them.
bench-large: venv $(VECTOR_EXTRAS)
	$(PY) manage.py bench --large 1000000 --parts search

# Peers side by side: mem0's open-source library, offline, in its own virtual environment
# (.venv-peers, so its dependencies never touch .venv), on the same LoCoMo dev data as this
# service: ingest turns/s, query p50/p95, evidence R@1/5/10 (bench/peers/).
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.requirements-installed

$(PEERS_STAMP): requirements/peers-mem0.txt
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet "torch==$$(sed -n 's/^torch==//p' requirements/peers-mem0.txt)"
	$(PEERS_VENV)/bin/python -m pip install --quiet -r requirements/peers-mem0.txt
	touch $(PEERS_STAMP)

bench-peers: venv $(PEERS_STAMP)
	$(PY) manage.py bench_peers

# The README's console screenshots (docs/screenshots/), taken by the browser test that checks
# every main page at desktop and 390 px widths (needs Chromium, like `make test`).
screenshots: venv
	scripts/ensure_chromium.sh
	CONSOLE_SCREENSHOTS=docs/screenshots $(PY) -m pytest -q tests/console/test_console_screenshots.py

clean:
	rm -rf $(VENV)
