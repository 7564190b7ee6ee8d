# `make demo` and `make test` work on a fresh machine: they create .venv with pip when it is
# missing (never uv: it ignores the local wheel store and downloads a CUDA build of torch).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Tests and the demo never reach the Hub; they use a throwaway HF_HOME.
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1

.PHONY: demo test bench-loading bench-generation bench-nfn venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	HF_HOME=$$(mktemp -d) $(BIN)/python -m benchmarks.demo

test: $(STAMP)
	HF_HOME=$$(mktemp -d) $(BIN)/python -m pytest -q --durations=15

bench-loading: $(STAMP)
	$(BIN)/python -m benchmarks.perf.loading

bench-generation: $(STAMP)
	$(BIN)/python -m benchmarks.perf.generation

bench-nfn: $(STAMP)
	$(BIN)/python -m benchmarks.perf.nfn

clean:
	rm -rf runs results .pytest_cache
