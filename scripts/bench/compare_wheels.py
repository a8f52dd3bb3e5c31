"""Two builds of the wheel, one GPU session: my_fast_add's ratio to torch.add and host time.

    python -m scripts.bench.compare_wheels NAME=SITE_DIR_OR_WHEEL NAME=... \
        [--passes 2] [--sizes 24-28]

Each SITE_DIR holds one installed cuda_ext_example (pip install --target); a .whl is
installed so first (offline, no dependencies). `make compare-nvrtc` compares sm_90 SASS
from NVRTC 12.0 with the same from NVRTC 12.9 (two dev wheels of `make bench-wheels`). Every pass
runs each wheel in a fresh process, alternating (A B A B ...), so drift of the machine
hits both alike; per cell the median over passes is reported. Kernel time: do_bench
median (CUDA events); host time: best of interleaved rounds at n=1024 (benchmark.py's
methods). Used to show that the NVRTC + driver-API wheel keeps the CUDA 13 wheel's speed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository root
SIZES = range(20, 29)
DTYPES = ("float32", "bfloat16")

CHILD = r"""
import json
import torch, cuda_ext_example
from scripts.bench.benchmark import Settings, bench_ms, best_host_times, make_inputs
settings = Settings(25, 100, 2000, 7, False)
out = {"kernel": {}, "host_us": {}}
for dtype in %(dtypes)r:
    for k in %(sizes)r:
        a, b = make_inputs(2**k, dtype)
        assert torch.equal(cuda_ext_example.my_fast_add(a, b), torch.add(a, b))
        pair = (("torch.add", torch.add), ("my_fast_add", cuda_ext_example.my_fast_add))
        ms = {name: bench_ms(lambda f=fn: f(a, b), settings) for name, fn in pair}
        out["kernel"][f"2^{k} {dtype}"] = ms
        del a, b
a, b = make_inputs(1024, "float32")
impls = {"torch.add": torch.add, "my_add": cuda_ext_example.my_add,
         "my_fast_add": cuda_ext_example.my_fast_add}
out["host_us"] = best_host_times(impls, a, b, settings.host_calls, settings.host_repeats)
out["device_code"] = cuda_ext_example.BUILD_INFO.get("device_compiler") or \
    cuda_ext_example.BUILD_INFO.get("nvcc")  # wheels built before NVRTC
print("RESULT " + json.dumps(out))
"""


def site_of(path: str) -> str:
    """A folder where the wheel (or the folder itself) is installed."""
    if not path.endswith(".whl"):
        return path
    import tempfile

    site = tempfile.mkdtemp(prefix="cee-compare-")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
         site, path],
        check=True,
    )  # fmt: skip
    return site


def run_child(site: str, sizes=SIZES) -> dict:
    code = CHILD % {"dtypes": DTYPES, "sizes": list(sizes)}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, str(ROOT)]))
    result = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise SystemExit(result.stdout + result.stderr)
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def main(argv: list[str]) -> int:
    passes, sizes = 2, SIZES
    if "--passes" in argv:
        i = argv.index("--passes")
        passes = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    if "--sizes" in argv:  # e.g. 24-28: 2^24 .. 2^28
        i = argv.index("--sizes")
        low, high = (int(x) for x in argv[i + 1].split("-"))
        sizes = range(low, high + 1)
        argv = argv[:i] + argv[i + 2 :]
    wheels = {name: site_of(path) for name, path in (arg.split("=", 1) for arg in argv)}
    runs: dict[str, list[dict]] = {name: [] for name in wheels}
    for _ in range(passes):
        for name, site in wheels.items():
            runs[name].append(run_child(site, sizes))
    names = list(wheels)
    for name in names:
        print(f"{name}: device code {runs[name][0]['device_code']}")
    print(f"\nmy_fast_add GB/s ratio to torch.add (median of {passes} passes; >1 is faster)")
    print(f"{'cell':<16}" + "".join(f"{n:>14}" for n in names) + f"{'difference':>12}")
    worst = 0.0
    for cell in runs[names[0]][0]["kernel"]:
        ratios = []
        for name in names:
            per_pass = [r["kernel"][cell] for r in runs[name]]
            ratios.append(statistics.median(p["torch.add"] / p["my_fast_add"] for p in per_pass))
        diff = (ratios[-1] / ratios[0] - 1) * 100
        worst = min(worst, diff)
        print(f"{cell:<16}" + "".join(f"{r:14.3f}" for r in ratios) + f"{diff:+11.2f}%")
    print(f"\nlargest loss of {names[-1]} against {names[0]}: {worst:+.2f}%")
    print("\nhost us per call at n=1024 float32 (best of interleaved rounds, min over passes)")
    for impl in runs[names[0]][0]["host_us"]:
        values = [min(r["host_us"][impl] for r in runs[name]) for name in names]
        print(f"  {impl:<12}" + "".join(f"{v:10.2f}" for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
