#!/usr/bin/env bash
# Proves a repaired wheel on a machine with torch but no network (the lent GPU):
# serves it from a real local index (pypiserver on 127.0.0.1), runs the Colab
# notebook headless (its `%pip install cuda_ext_example` installs from that
# index), then scripts/smoke_test.py against the installed package.
#
#   scripts/offline_release_check.sh WHEELHOUSE TOOL_WHEELS OUTDIR
#
# TOOL_WHEELS holds pypiserver, nbclient and ipykernel wheels (with their deps).
set -euo pipefail
cd "$(dirname "$0")/.."
wheelhouse=$(realpath "$1"); tools_wheels=$(realpath "$2"); out=$(realpath "$3")
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  wheel: $(basename "$wheelhouse"/*.whl)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__)'
tools=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target "$tools" "$tools_wheels"/*.whl
export PYTHONPATH=$tools PATH=$tools/bin:$PATH

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m pypiserver run --host 127.0.0.1 --port "$port" -a . -P . --disable-fallback "$wheelhouse" \
  > "$out/pypiserver.log" 2>&1 &
server=$!
trap 'kill $server' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/simple/" >/dev/null && break; sleep 0.2; done
export PIP_INDEX_URL=http://127.0.0.1:$port/simple/ PIP_NO_CACHE_DIR=1
python3 -m pip uninstall -q -y cuda_ext_example 2>/dev/null || true

work=$(mktemp -d)  # not the source tree: the installed package is what runs
(cd "$work" && python3 - "$OLDPWD/notebooks/colab_smoke_test.ipynb" "$out/colab_smoke_test.executed.ipynb" <<'PY'
import sys, nbformat, nbclient
nb = nbformat.read(sys.argv[1], as_version=4)
nbclient.NotebookClient(nb, timeout=900, kernel_name="python3").execute()
nbformat.write(nb, sys.argv[2])
for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
    text = "".join(o.get("text", "") for o in cell.outputs)
    print(f"--- cell {i + 1}: {cell.source.splitlines()[0]}\n{text}")
sys.exit(0 if "SMOKE TEST PASSED" in text else 1)
PY
)
(cd "$work" && python3 "$OLDPWD/scripts/smoke_test.py")
