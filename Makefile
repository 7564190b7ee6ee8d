# `make demo` and `make test` work on a fresh machine: they create .venv with pip when it is
# missing (never uv: it ignores the local wheel store and downloads a CUDA build of torch).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Tests and the demo never reach the Hub; they use a throwaway HF_HOME.
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
# Ray's token authentication is for shared clusters; the local instances and test clusters here run without it.
export RAY_AUTH_MODE := disabled
# pip installs without compiling (--no-compile): most of what it unpacks (CUDA libraries, triton) is never
# imported. Python compiles a module when it is first imported instead, into .venv/pycache, also where the
# environment sets PYTHONDONTWRITEBYTECODE; the tree stays free of __pycache__ folders.
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache
export PYTHONDONTWRITEBYTECODE :=

.PHONY: demo test test-fast test-durations docs docs-results docs-weight-spaces bench-loading bench-generation bench-nfn bench-full-size venv clean

# What nearly every process of a run imports, compiled once at install, in two processes; otherwise the
# suite's first processes, starting together, would each compile it.
WARM_A := torch, torchvision, torch_geometric, nfn_models, benchmarks.harness, zoo.cli
WARM_B := ray, pandas, pyarrow.parquet, scipy.stats, sklearn, matplotlib.pyplot, datasets, leaderboards.board

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-compile -e '.[dev]'
	$(BIN)/python -c "import $(WARM_A)" & warm=$$!; $(BIN)/python -c "import $(WARM_B)" && wait $$warm
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	HF_HOME=$$(mktemp -d) $(BIN)/python -m benchmarks.demo

# The whole suite (what CI runs through .ci/run): pytest-xdist workers, one more than the CPUs (the suite
# often waits on a child process or a Ray start, and the extra worker runs meanwhile); a test module stays in
# one worker (its module fixtures are built once); each worker starts the session's Ray cluster when its first
# test needs it. Modules start longest first, by tests/durations.json (tests/schedule.py). The linter runs as a
# test (tests/test_lint.py).
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: $(STAMP)
	HF_HOME=$$(mktemp -d) $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=15

# The edit loop: everything but the tests marked slow (real Ray clusters, real training, and every test
# tests/durations.json measured at a second or more, or in a module measured at 10 s).
test-fast: $(STAMP)
	HF_HOME=$$(mktemp -d) $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile -m "not slow" --durations=10

# tests/durations.json measured again: the whole suite, each test's seconds (run it on a quiet machine).
test-durations: $(STAMP)
	HF_HOME=$$(mktemp -d) NFNZOO_RECORD_DURATIONS=$(CURDIR)/tests/durations.json \
		$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

# The documentation site into build/site (mkdocs.yml; --strict: a broken link or API object fails).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The results tables in docs/ and README.md, rendered again from the official board (leaderboards/).
docs-results: $(STAMP)
	$(BIN)/nfnzoo leaderboard render --docs docs --readme README.md

# docs/weight-spaces.md, rendered again from the families' weight spaces and groups (zoo/weightspace_doc.py).
docs-weight-spaces: $(STAMP)
	$(BIN)/python -m zoo.weightspace_doc

bench-loading: $(STAMP)
	$(BIN)/python -m benchmarks.perf.loading

bench-generation: $(STAMP)
	$(BIN)/python -m benchmarks.perf.generation
	$(BIN)/python -m benchmarks.perf.portable

bench-nfn: $(STAMP)
	$(BIN)/python -m benchmarks.perf.nfn

# the released Small CNN Zoo's size (270,000 rows): ~11 GB of disk and a few GB of memory; ROWS=27000 for a quick run
bench-full-size: $(STAMP)
	$(BIN)/python -m benchmarks.perf.full_size $(if $(ROWS),--rows $(ROWS))

clean:
	rm -rf runs results .pytest_cache
