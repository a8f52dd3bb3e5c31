"""What the first call costs: cold-start timings, each in fresh processes.

    python -m scripts.gpu.coldstart [--repeats 3] [--json OUT]

Every number is the median over --repeats fresh Python processes. With a GPU it
also runs once more with CUDA_DISABLE_PTX_JIT=1: the driver may then not
JIT-compile any PTX, so if the first call still works, the wheel's SASS for this
GPU is what ran, and the normal first call paid no JIT.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.cli_args import at_least_one

# Runs in a fresh interpreter; prints one JSON object of seconds.
CHILD = r"""
import json, sys, time
t = {}
s = time.perf_counter(); import torch; t["import torch"] = time.perf_counter() - s
device = "cuda" if torch.cuda.is_available() else "cpu"

def sync():
    if device == "cuda":
        torch.cuda.synchronize()

if device == "cuda":
    s = time.perf_counter(); torch.cuda.init(); torch.empty(1, device="cuda"); sync()
    t["CUDA context"] = time.perf_counter() - s
# Inputs by host-to-device copy: only the kernels being measured run.
a = torch.arange(1 << 20, dtype=torch.float32).to(device)
b = torch.ones(1 << 20).to(device); sync()

def first_and_warm(name, fn):
    s = time.perf_counter(); fn(a, b); sync(); t[f"first {name}"] = time.perf_counter() - s
    warm = []
    for _ in range(20):
        s = time.perf_counter(); fn(a, b); sync(); warm.append(time.perf_counter() - s)
    t[f"warm {name}"] = sorted(warm)[len(warm) // 2]

if sys.argv[1] == "ours":
    s = time.perf_counter(); import cuda_ext_example
    t["import cuda_ext_example"] = time.perf_counter() - s
    # The first call of an op on the CPU: the dispatcher's and our Python's first-call
    # costs, with no CUDA work; then the GPU's first call (library + kernel load) and
    # the first call of a second kernel (that kernel's load only).
    x = torch.ones(4)
    s = time.perf_counter(); cuda_ext_example.my_square(x)
    t["first my_square, CPU"] = time.perf_counter() - s
    first_and_warm("my_add", cuda_ext_example.my_add)
    first_and_warm("my_fast_add", cuda_ext_example.my_fast_add)
else:
    # torch's first kernel of the process loads its CUDA modules; the next, a new kernel,
    # is what the first call of an extension's kernel is compared with.
    first_and_warm("torch.mul", torch.mul)
    first_and_warm("torch.add", torch.add)
t["device"] = torch.cuda.get_device_name() if device == "cuda" else "cpu"
print(json.dumps(t))
"""

EXPLAIN = {
    "import torch": "loading torch's shared libraries and Python modules",
    "CUDA context": "driver init + primary context on the GPU (torch does this once)",
    "import cuda_ext_example": "dlopen of our .so + op registration (no CUDA work yet)",
    "first my_square, CPU": "an op's first call with no CUDA work (dispatcher, Python)",
    "first my_add": "first launch: libcuda opened, fatbin loaded, this GPU's SASS picked (no JIT)",
    "warm my_add": "one call when everything is loaded (2^20 float32)",
    "first my_fast_add": "first launch of the vectorized kernel",
    "warm my_fast_add": "one warm call",
    "first torch.mul": "torch's first kernel of the process",
    "warm torch.mul": "one warm call",
    "first torch.add": "torch's first new kernel (after torch.mul's), for comparison",
    "warm torch.add": "one warm torch.add call",
    "first my_add, PTX JIT disabled": "the same first call with CUDA_DISABLE_PTX_JIT=1: SASS only",
}
# Where no GPU is, the same rows time CPU kernels: say so instead of the GPU's story.
EXPLAIN_CPU = {
    "first my_add": "first call of the op's CPU kernel (no GPU: no library or kernel load)",
    "first my_fast_add": "first call of the second op's CPU kernel",
    "first torch.mul": "torch's first CPU op of the process",
    "first torch.add": "torch's first add (after torch.mul's), for comparison",
}


def explain(key: str, device: str) -> str:
    return (EXPLAIN_CPU.get(key) if device == "cpu" else None) or EXPLAIN.get(key, "")


def run_child(which: str, env: dict, cwd: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, which], capture_output=True, text=True, env=env, cwd=cwd
    )
    if out.returncode != 0:
        raise RuntimeError(f"the {which} child process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_runs(which: str, repeats: int, env: dict, cwd: str) -> dict:
    runs = [run_child(which, env, cwd) for _ in range(repeats)]
    keys = [k for k in runs[0] if k != "device"]
    result = {k: statistics.median(r[k] for r in runs) for k in keys}
    result["device"] = runs[0]["device"]
    return result


def measure(repeats: int) -> dict:
    """Every timing (seconds), median of `repeats` fresh processes each, and "device"."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cwd:  # not the source tree: the installed package
        ours = median_runs("ours", repeats, env, cwd)
        torch_add = median_runs("torch", repeats, env, cwd)
        rows = {**ours, **{k: v for k, v in torch_add.items() if "torch." in k}}
        if ours["device"] != "cpu":
            no_jit = run_child("ours", dict(env, CUDA_DISABLE_PTX_JIT="1"), cwd)
            rows["first my_add, PTX JIT disabled"] = no_jit["first my_add"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.gpu.coldstart", description=__doc__)
    parser.add_argument(
        "--repeats", type=at_least_one("process"), default=3, help="fresh processes"
    )
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    if args.json:  # its folder made now, not after minutes of measuring
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--json {args.json}: {exc}")
    rows = measure(args.repeats)
    device = rows.pop("device")
    print(f"cold start on {device}, median of {args.repeats} fresh processes")
    if device == "cpu":
        print("  (no CUDA GPU here: CPU kernels' first calls; a GPU's cold start needs a GPU)")
    for key, seconds in rows.items():
        print(f"  {key:<32} {seconds * 1e3:10.2f} ms   {explain(key, device)}")
    if "first my_add, PTX JIT disabled" in rows:
        print(
            "\nThe first call ran with PTX JIT disabled: the wheel's SASS for this GPU was "
            "used, so no first call pays a JIT compile here."
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "seconds": rows}, f, indent=2)


if __name__ == "__main__":
    main()
