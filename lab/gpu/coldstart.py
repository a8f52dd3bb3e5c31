"""What the first call costs: cold-start timings, each sample a fresh process.

    python -m lab.gpu.coldstart [--repeats 5] [--json OUT]

Each of --repeats fresh Python processes times, in order: import torch, the CUDA context,
torch's first kernel (torch.mul), then three new kernels of torch (torch.add, torch.sub,
torch.maximum: torch ops never run before in that process; their median is "torch's first
new kernel", what an extension's first call is compared with), import cuda_ext_example, then
the first call of every op of the installed wheel, each followed by its warm calls. The
ops' order turns by one per process, so the op that comes first (and also opens the driver)
changes. Every row is the median over the processes, with the spread (min-max); the target:
every op's first call <= torch's first new kernel + 0.5 ms (the launcher loads one op's
library, its fatbin, at that op's first call).

With a GPU it also runs once more with CUDA_DISABLE_PTX_JIT=1: the driver may then not
JIT-compile any PTX, so if the first calls still work, the wheel's SASS for this GPU is what
ran, and the normal first calls paid no JIT.
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

from lab.cli_args import at_least_one

# The target: an op's first call over torch's first new kernel, in ms (lab.bench too).
TARGET_MS = 0.5
BASELINE = "torch's first new kernel"

# Runs in a fresh interpreter (argv[1]: how far to turn the ops' order); prints one JSON
# object: seconds per row, "ops" (the order they ran in) and "device".
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
inputs = [torch.arange(1 << 20, dtype=torch.float32).to(device),
          torch.ones(1 << 20).to(device), torch.full((1 << 20,), 3.0).to(device),
          torch.full((1 << 20,), 0.5).to(device)]  # up to four inputs (an AdamW step)
sync()

def first_and_warm(name, fn, args):
    s = time.perf_counter(); fn(*args); sync(); t[f"first {name}"] = time.perf_counter() - s
    warm = []
    for _ in range(20):
        s = time.perf_counter(); fn(*args); sync(); warm.append(time.perf_counter() - s)
    t[f"warm {name}"] = sorted(warm)[len(warm) // 2]

# torch's first kernel of the process loads its CUDA modules; the next ones, each a new
# kernel, are what the first call of an extension's kernel is compared with.
first_and_warm("torch.mul", torch.mul, inputs[:2])
new = []
for name in ("add", "sub", "maximum"):
    first_and_warm(f"torch.{name}", getattr(torch, name), inputs[:2])
    new.append(t[f"first torch.{name}"])
t["torch's first new kernel"] = sorted(new)[1]
s = time.perf_counter(); import cuda_ext_example
t["import cuda_ext_example"] = time.perf_counter() - s
from cuda_ext_example.op_checks import sample_arguments
from cuda_ext_example.ops import DECLARATIONS
names = list(cuda_ext_example.OP_NAMES)
turn = int(sys.argv[1]) % len(names)
names = names[turn:] + names[:turn]
for name in names:  # the first launch of each: its library (fatbin) and kernel loaded
    op = DECLARATIONS[name]  # its samples of size 1024, in float32 or its first dtype
    dtype = getattr(torch, "float32" if "float32" in op["dtypes"] else op["dtypes"][0])
    args = sample_arguments(op, 1024, dtype, device)
    first_and_warm(name, getattr(cuda_ext_example, name), args)
t["first of ours"] = t[f"first {names[0]}"]
t["ops"] = names
t["device"] = torch.cuda.get_device_name() if device == "cuda" else "cpu"
print(json.dumps(t))
"""

EXPLAIN = {
    "import torch": "loading torch's shared libraries and Python modules",
    "CUDA context": "driver init + primary context on the GPU (torch does this once)",
    "first torch.mul": "torch's first kernel of the process",
    "first torch.add": "a new kernel of torch (after torch.mul's)",
    "first torch.sub": "another",
    "first torch.maximum": "another",
    BASELINE: "the median of these three: the baseline",
    "import cuda_ext_example": "dlopen of our .so + op registration (no CUDA work yet)",
    "first of ours": "the process's first call of ours (whichever op came first): + libcuda's "
    "entry points",
    "first op": "first launch: the op's library (fatbin) loaded, its kernel resolved (no JIT)",
    "warm op": "one call when everything is loaded (2^20 float32)",
    "no JIT": "first call with CUDA_DISABLE_PTX_JIT=1: SASS only",
}
# Where no GPU is, the same rows time CPU kernels: say so instead of the GPU's story.
EXPLAIN_CPU = {
    "first torch.mul": "torch's first CPU op of the process",
    "first torch.add": "torch's first add (after torch.mul's), for comparison",
    BASELINE: "the median of torch.add's, torch.sub's and torch.maximum's",
    "first of ours": "the process's first call of ours (CPU kernel)",
    "first op": "first call of the op's CPU kernel (no GPU: no library or kernel load)",
}


def explain(key: str, device: str) -> str:
    if key.endswith(", PTX JIT disabled"):
        general = "no JIT"
    elif key.startswith(("first ", "warm ")) and key not in EXPLAIN:
        general = key.split()[0] + " op"
    else:
        general = key
    return (EXPLAIN_CPU.get(general) if device == "cpu" else None) or EXPLAIN.get(general, "")


def run_child(turn: int, env: dict, cwd: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(turn)], capture_output=True, text=True, env=env, cwd=cwd
    )
    if out.returncode != 0:
        raise RuntimeError(f"a cold-start process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarize(samples: list[dict]) -> dict[str, tuple[float, float, float]]:
    """row -> (median, min, max) seconds over the processes, rows in the first one's order
    (torch's, then our ops in the declared order)."""
    keys = [k for k in samples[0] if k not in ("ops", "device")]
    first = [k for k in keys if not k.startswith(("first ", "warm ")) or "torch" in k]
    ours = sorted({k for k in keys if k not in first}, key=_op_order(samples[0]))
    out = {}
    for key in first + ours:
        values = [s[key] for s in samples if key in s]
        out[key] = (statistics.median(values), min(values), max(values))
    return out


def _op_order(sample: dict):
    order = sorted(sample["ops"])  # OP_NAMES is sorted: the declared order

    def key(row: str) -> tuple:
        op = row.split(" ", 1)[1]
        return (op not in order, order.index(op) if op in order else 0, row.startswith("warm"))

    return key


def measure_samples(repeats: int) -> tuple[list[dict], dict | None]:
    """Every process's timings (seconds), and the PTX-JIT-disabled one (None on a CPU)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cwd:  # not the source tree: the installed package
        samples = [run_child(turn, env, cwd) for turn in range(repeats)]
        no_jit = None
        if samples[0]["device"] != "cpu":
            no_jit = run_child(0, dict(env, CUDA_DISABLE_PTX_JIT="1"), cwd)
    return samples, no_jit


def measure(repeats: int) -> dict:
    """Each row's median (seconds) over `repeats` fresh processes, and "device"."""
    samples, _ = measure_samples(repeats)
    rows = {key: stats[0] for key, stats in summarize(samples).items()}
    rows["device"] = samples[0]["device"]
    return rows


def verdict(rows: dict[str, tuple[float, float, float]]) -> tuple[bool, str]:
    """(met, what): every op's median first call against torch's first new kernel."""
    base = rows[BASELINE][0]
    ours = {k[len("first ") :]: v[0] for k, v in rows.items() if _is_op_first(k)}
    worst = max(ours, key=ours.get)
    over = (ours[worst] - base) * 1e3
    met = over <= TARGET_MS
    return met, (
        f"target: every op's first call <= torch's first new kernel + {TARGET_MS} ms: "
        f"{'met' if met else 'MISSED'}; the slowest, {worst}, {ours[worst] * 1e3:.2f} ms = "
        f"{over:+.2f} ms over torch's {base * 1e3:.2f} ms ({len(ours)} ops, medians)"
    )


def _is_op_first(key: str) -> bool:
    return key.startswith("first ") and "torch" not in key and key != "first of ours"


def report(samples: list[dict], no_jit: dict | None) -> list[str]:
    rows = summarize(samples)
    device = samples[0]["device"]
    lines = [
        f"cold start on {device}: {len(samples)} fresh processes, {len(samples[0]['ops'])} "
        "ops; median (min-max) ms"
    ]
    if device == "cpu":
        lines.append(
            "  (no CUDA GPU here: CPU kernels' first calls; a GPU's cold start needs a GPU)"
        )
    base = rows[BASELINE][0]
    for key, (median, low, high) in rows.items():
        shown = _is_op_first(key) and device != "cpu"
        over = f"{(median - base) * 1e3:+7.2f}" if shown else " " * 7
        lines.append(
            f"  {key:<34} {median * 1e3:9.2f} ({low * 1e3:.2f}-{high * 1e3:.2f}) {over}   "
            f"{explain(key, device)}"
        )
    if device != "cpu":
        lines.append("  (the column after the spread: the median over torch's first new kernel)")
        lines.append(verdict(rows)[1])
    if no_jit is not None:
        op = no_jit["ops"][0]
        seconds = no_jit[f"first {op}"]
        lines += [
            f"  first {op}, PTX JIT disabled: {seconds * 1e3:.2f} ms, and every other op's "
            "first call worked: the wheel's SASS for this GPU was used, so no first call pays "
            "a JIT compile here."
        ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.gpu.coldstart", description=__doc__)
    parser.add_argument(
        "--repeats", type=at_least_one("process"), default=5, help="fresh processes (>= 5)"
    )
    parser.add_argument("--json", type=Path, help="also write every process's numbers here")
    args = parser.parse_args()
    if args.json:  # its folder made now, not after minutes of measuring
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--json {args.json}: {exc}")
    try:
        samples, no_jit = measure_samples(args.repeats)
    except RuntimeError as exc:
        raise SystemExit(f"lab.gpu.coldstart: {exc}") from None
    print("\n".join(report(samples, no_jit)))
    if args.json:
        rows = summarize(samples)
        with open(args.json, "w") as f:
            json.dump(
                {
                    "device": samples[0]["device"],
                    "ops": sorted(samples[0]["ops"]),
                    "median_min_max_seconds": rows,
                    "target": verdict(rows)[1] if samples[0]["device"] != "cpu" else None,
                    "processes": samples,
                    "ptx_jit_disabled": no_jit,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
