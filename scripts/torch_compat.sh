#!/usr/bin/env bash
# Installs one torch into a fresh venv, then the repaired wheel, and runs the
# test suite there (GPU tests skip without a GPU): proof that the one wheel
# works with that torch (the release-tool tests need .venv and are left out).
#     scripts/torch_compat.sh 'torch==2.14.1' [LOG]
set -euo pipefail
cd "$(dirname "$0")/.."
spec=${1:?usage: torch_compat.sh TORCH_SPEC [LOG]}
log=${2:-/dev/null}
env=build/compat-$(echo "$spec" | tr -c 'A-Za-z0-9.\n' _)
python3 -m venv --clear "$env"
"$env/bin/pip" install -q --disable-pip-version-check "$spec" -r requirements/test.txt
"$env/bin/pip" install -q --disable-pip-version-check --no-deps wheelhouse/*.whl
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  wheel: $(basename wheelhouse/*.whl)"
  "$env/bin/python" -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA", torch.version.cuda, "| GPU", torch.cuda.is_available())'
} | tee "$log"
"$env/bin/python" -P -m pytest tests -q -p no:cacheprovider -m "not release" 2>&1 | tee -a "$log"
exit "${PIPESTATUS[0]}"
