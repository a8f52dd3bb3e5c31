#!/usr/bin/env bash
# Runs the whole test suite (GPU tests included) against an already built wheel,
# on a GPU machine that has torch but maybe no network (e.g. the lent H100).
#
#   scripts/gpu_suite.sh [WHEEL] [LOG]
#
# Extra wheels (test-only deps the machine lacks) may sit in .whl/; they are
# installed next to ours. The log starts with the date, GPU, driver and versions.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=${1:-$(ls wheelhouse/*.whl)}
log=${2:-gpu_suite.log}
site=$(mktemp -d)
extra=$(ls .whl/*.whl 2>/dev/null || true)
python3 -m pip install -q --no-deps --no-index --no-compile --target "$site" "$wheel" $extra
export PYTHONPATH=$site

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "wheel: $(basename "$wheel")"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA", torch.version.cuda)'
  python3 -c "import json, sys; sys.path.insert(0, \"$site\"); import cuda_ext_example as c; print(\"device code:\", c.BUILD_INFO.get(\"device_compiler\"))" || true
} | tee "$log"

# -P: keep the source tree off sys.path, so the installed wheel is what is tested.
python3 -P -m pytest tests -p no:cacheprovider -rs "${@:3}" 2>&1 | tee -a "$log"
exit "${PIPESTATUS[0]}"
