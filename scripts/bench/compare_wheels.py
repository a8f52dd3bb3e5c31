r"""Two builds of the wheel, one GPU session: my_fast_add's ratio to torch.add and host time.

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

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from scripts.bench.benchmark import parse_sizes
from scripts.cli_args import at_least_one, wheel_problem

ROOT = Path(__file__).resolve().parents[2]  # the repository root
SIZES = list(range(20, 29))
DTYPES = ("float32", "bfloat16")
PROG = "scripts.bench.compare_wheels"

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


def install(path: str, stack: ExitStack) -> str:
    """A folder where the wheel (or the folder itself) is installed; a wheel's is removed
    when `stack` closes."""
    if not path.endswith(".whl"):
        return path
    site = stack.enter_context(tempfile.TemporaryDirectory(prefix="cee-compare-"))
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
         site, path],
    )  # fmt: skip
    if run.returncode != 0:
        raise SystemExit(f"{PROG}: pip could not install {path} (see its message above)")
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


def path_problem(path: str) -> str | None:
    """Why PATH is neither a wheel nor a folder with the package installed (None: it is)."""
    if not path:
        return "names no wheel"
    if not Path(path).exists():
        return "no such file or folder"
    if path.endswith(".whl"):
        return wheel_problem(Path(path))
    if not (Path(path) / "cuda_ext_example").is_dir():
        return "neither a .whl nor a folder with cuda_ext_example installed (pip --target)"
    return None


def gpu_problem() -> str | None:
    try:
        import torch
    except ImportError:
        return f"{sys.executable} cannot import torch"
    return None if torch.cuda.is_available() else "no CUDA GPU here (it times kernels)"


def refuse(problem: str) -> int:
    print(f"{PROG}: {problem}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROG}",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("wheels", nargs="*", metavar="NAME=PATH", help="a .whl or a site folder")
    parser.add_argument("--passes", type=at_least_one("pass"), default=2, help="default: 2")
    parser.add_argument("--sizes", type=parse_sizes, default=SIZES, help="e.g. 24-28: 2^24..2^28")
    args = parser.parse_args(argv)
    passes, sizes = args.passes, args.sizes
    # Every check before any work (pip, a GPU process): one line, exit 2. An empty or missing
    # path is what `make compare-nvrtc` passes without `make bench-wheels`; taken as a folder
    # it would run the installed package, compared with itself.
    items = [arg.partition("=") for arg in args.wheels]
    if any(not name or not sep for name, sep, _ in items):
        return refuse(f"every argument is NAME=PATH, got: {' '.join(args.wheels)}; see --help")
    paths = {name: path for name, _, path in items}
    if len(paths) < 2 or len(paths) != len(items):
        return refuse(
            "give two or more NAME=PATH, each NAME once (e.g. a=dist/a.whl b=dist/b.whl); "
            "make compare-nvrtc passes the wheels of `make bench-wheels`"
        )
    for name, path in paths.items():
        problem = path_problem(path)
        if problem:
            return refuse(f"{name}={path}: {problem}; build the wheels with `make bench-wheels`")
    problem = gpu_problem()
    if problem:
        return refuse(f"{problem}; run it on a GPU machine with CUDA torch")
    with ExitStack() as stack:
        wheels = {name: install(path, stack) for name, path in paths.items()}
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
