#!/usr/bin/env bash
# The "know your binary" tools on a GPU machine, against a built wheel, with
# every output under OUTDIR: doctor, inspect (PTX + SASS), cold start, JIT
# build, profiler trace, Nsight Compute, compute-sanitizer.
#   scripts/gpu_tools_run.sh WHEEL OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
wheel=$(realpath "$1"); out=$(realpath "$2")
site=$(mktemp -d)
python3 -m pip install -q --no-deps --no-index --no-compile --target "$site" "$wheel" .whl/*.whl
export PYTHONPATH=$site PYTHONUNBUFFERED=1
log=$out/tools.log
section() { printf '\n===== %s (%s)\n' "$1" "$(date -u +%H:%M:%SZ)" | tee -a "$log"; }
status=0
run() { "$@" 2>&1 | tee -a "$log"; local rc=${PIPESTATUS[0]}; echo "[exit $rc]" | tee -a "$log"; [ "$rc" = 0 ] || status=1; }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  wheel: $(basename "$wheel")"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA", torch.version.cuda, "| triton", triton.__version__)'
} | tee "$log"
cd "$(mktemp -d)" && ln -s "$OLDPWD" repo  # run from outside the source tree
section "doctor";                run python3 -m cuda_ext_example doctor
section "inspect --ptx --sass";  python3 -m cuda_ext_example.inspect "$wheel" --ptx --sass > "$out/inspect_dump.txt" 2>&1
grep -v -e '^\s' -e '^$' -e '^[.\t/]' "$out/inspect_dump.txt" | grep -v -e 'Fatbin' -e '====' -e 'arch =' -e 'code version' -e 'host =' -e 'compile_size' -e 'identifier' -e 'ptxasOptions' | head -40 | tee -a "$log"
grep -A20 "loads per kernel" "$out/inspect_dump.txt" | tee -a "$log"
gzip -f "$out/inspect_dump.txt"
section "coldstart";             run python3 repo/scripts/coldstart.py --repeats 3
section "JIT build (make jit)";  run python3 repo/scripts/jit_check.py repo/csrc
section "profile";               run python3 repo/scripts/profile_trace.py --out "$out/trace.json"
gzip -f "$out/trace.json"
section "ncu (make ncu)";        run make -s -C repo ncu RESULTS="$out" RUN_PY=python3
gzip -f "$out/ncu-add.txt"
for tool in memcheck racecheck initcheck; do
  section "compute-sanitizer --tool $tool"
  run compute-sanitizer --tool "$tool" --error-exitcode 3 \
    python3 repo/scripts/sanitizer_target.py
done
exit $status
