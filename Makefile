# neurips26: the two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= 2

.PHONY: demo test bench lint install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch pinned here so pip takes the CPU build on this machine's disk, not a multi-GB CUDA wheel
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[all]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/neurips26 run --all --quick
	$(BIN)/neurips26 report

# one BLAS/torch thread per test process: xdist already runs JOBS processes side by side
test: $(STAMP)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -n $(JOBS) --dist loadgroup -q --durations=15

bench: $(STAMP)
	$(BIN)/neurips26 bench --all

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

clean:
	rm -rf $(VENV) results .pytest_cache
