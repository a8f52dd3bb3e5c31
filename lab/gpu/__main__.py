"""A built wheel on any GPU machine that has torch and no network access:

    python -m lab.gpu suite WHEEL [--log LOG] [-- PYTEST_ARGS]
    python -m lab.gpu tools WHEEL OUTDIR            doctor, inspect, cold start, JIT, profiler
                                                    trace, Nsight Compute, compute-sanitizer
    python -m lab.gpu bench WHEEL OUTDIR [-- BENCH_ARGS]  every benchmark workload
    python -m lab.gpu release-check WHEEL OUTDIR    the release's prove step (local index,
                                                    Colab notebook, smoke test), offline
    python -m lab.gpu compat TORCH_SPEC WHEEL       the suite in a fresh venv with another torch
                                                    (any machine with network; GPU tests skip
                                                    without a GPU)
    python -m lab.gpu coldstart WHEEL [WHEEL ...] [--repeats 7] [--out OUTDIR]
                                                    each wheel's cold start (first call of every
                                                    op against torch's first new kernel)
    python -m lab.gpu coldstart-wheel [--extra 10] [--archs 90]
                                                    here, on the build machine: this checkout
                                                    with N synthetic ops more, built into
                                                    build/gpu/wheels/coldstart/<ops>-ops-<archs>/

Wheels of test-only tools the machine lacks may lie in build/gpu/wheels/ (installed next to
ours), those of the release check's tools (pypiserver, nbclient, ipykernel) in
build/gpu/wheels/tools/. Every log starts with lab/gpu/facts.py's header.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from buildtools.config import ROOT
from lab.bench.benchmark import WORKLOADS
from lab.cli_args import at_least_one
from scripts.cli_args import wheel_problem

from .facts import Log, header

EXTRA_WHEELS = ROOT / "build" / "gpu" / "wheels"
# Modules the tests import that a GPU machine may lack (import name -> distribution): they come
# from EXTRA_WHEELS, and without them a whole suite run is spent on failures of one cause.
TEST_TOOLS = {"elftools": "pyelftools"}
# What release-check's prove step imports (the local index, the notebook run).
RELEASE_TOOLS = {"pypiserver": "pypiserver", "nbclient": "nbclient", "ipykernel": "ipykernel"}
# Nsight Compute on the kernels of lab/gpu/ncu_target.py, ours and torch.add's.
NCU_SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables",
                "LaunchStats", "Occupancy")  # fmt: skip
NCU_KERNELS = "regex:elementwise_|CUDAFunctor_add"


class Refused(Exception):
    """Bad input or a failed step: main prints it as one line and exits 1, no traceback."""


def check_wheel(wheel: Path) -> None:
    """Before any slow work (pip, venvs): the path is a wheel file."""
    problem = wheel_problem(wheel)
    if problem:
        raise Refused(f"{wheel}: {problem}; pass the wheel `make wheel` built (dist/*.whl)")


def run_step(cmd: list, what: str, **kwargs) -> None:
    """Runs cmd (its own output shows); a failure is one line, not CalledProcessError."""
    code = subprocess.run([str(c) for c in cmd], **kwargs).returncode
    if code != 0:
        raise Refused(f"{what} failed (exit {code}; see the output above)")


@contextmanager
def install_offline(wheels: list[Path]) -> Iterator[str]:
    """Wheels into a fresh target folder, without network; yields the folder, removed after."""
    with tempfile.TemporaryDirectory(prefix="cee-site-") as site:
        run_step(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
             "--no-compile", "--target", site, *wheels],
            f"pip install --no-index of {', '.join(Path(w).name for w in wheels)}",
        )  # fmt: skip
        yield site


@contextmanager
def install(wheel: Path) -> Iterator[dict]:
    """The wheel (and EXTRA_WHEELS) installed; yields the environment that sees it."""
    with install_offline([wheel, *sorted(EXTRA_WHEELS.glob("*.whl"))]) as site:
        path = os.pathsep.join([site, str(ROOT)])
        yield dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")


def facts_in(env: dict) -> str:
    code = "from lab.gpu.facts import header; print(header())"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
    ).stdout.strip()


def missing_test_tools(env: dict, tools: dict[str, str] = TEST_TOOLS) -> list[str]:
    """The distributions of `tools` whose module does not import in `env`."""
    code = (
        "import importlib.util, sys\n"
        "print(*[m for m in sys.argv[1:] if importlib.util.find_spec(m) is None])"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, *tools], capture_output=True, text=True, env=env, cwd=ROOT
    )
    return [tools[module] for module in run.stdout.split()]


def cmd_suite(args) -> int:
    check_wheel(args.wheel)
    with install(args.wheel) as env:
        missing = missing_test_tools(env)
        if missing:
            print(
                f"lab.gpu suite: the tests need {', '.join(missing)}, which this machine "
                f"lacks: on the build machine, pip download --no-deps -d "
                f"{EXTRA_WHEELS.relative_to(ROOT)} "
                f"{' '.join(missing)} (the versions of requirements/dev.lock), then copy that "
                "folder here",
                file=sys.stderr,
            )
            return 2
        log = Log(args.log)
        log.write(f"wheel: {args.wheel.name}\n{facts_in(env)}")
        # -P: keep the source tree's cwd off sys.path; pytest adds the root for scripts/, lab/.
        return log.run(
            "pytest",
            [sys.executable, "-P", "-m", "pytest", *pytest_targets(args.pytest_args), "-p",
             "no:cacheprovider", "-rs", "--durations=20", "-m", "not release",
             *args.pytest_args],
            env=env, cwd=ROOT,
        )  # fmt: skip


def pytest_targets(pytest_args: list[str]) -> list[str]:
    """["tests"] unless the pytest arguments name tests of their own (a file, a folder or a
    node id, of tests/ or lab/tests/), which then run alone instead of next to the whole
    suite."""
    named = [
        a
        for a in pytest_args
        if (ROOT / a.split("::")[0]).exists() and a.startswith(("tests", "lab/tests"))
    ]
    return [] if named else ["tests"]


def cmd_tools(args) -> int:
    check_wheel(args.wheel)
    with install(args.wheel) as env, tempfile.TemporaryDirectory(prefix="cee-run-") as here:
        # `here`: a working directory away from the checkout, so the installed wheel runs.
        return run_tools(args.wheel, args.outdir.resolve(), env, here)


def run_tools(wheel: Path, out: Path, env: dict, here: str) -> int:
    log = Log(out / "tools.log")
    log.write(f"wheel: {wheel.name}\n{facts_in(env)}")
    py = [sys.executable, "-P"]
    log.run("doctor", [*py, "-m", "cuda_ext_example", "doctor"], env=env, cwd=here)
    tool = [sys.executable, "-m"]  # from the root, for scripts.*; the wheel comes first
    log.run(
        "inspect (device code, ELF, shims)",
        [*tool, "scripts.inspect", wheel.resolve()], env=env, cwd=ROOT,
    )  # fmt: skip
    log.run("coldstart", [*tool, "lab.gpu.coldstart", "--repeats", "5"], env=env, cwd=ROOT)
    log.run("JIT build (make jit)", [*tool, "lab.gpu.jit_check", "csrc"], env=env, cwd=ROOT)
    log.run(
        "profiler trace",
        [*tool, "lab.gpu.profile_trace", "--out", out / "trace.json"],
        env=env, cwd=ROOT,
    )  # fmt: skip
    nsight_compute(log, out, env)
    for check in ("memcheck", "racecheck", "initcheck"):
        log.run(
            f"compute-sanitizer --tool {check}",
            ["compute-sanitizer", "--tool", check, "--error-exitcode", "3",
             *tool, "lab.gpu.sanitizer_target"],
            env=env, cwd=ROOT,
        )  # fmt: skip
    log.write(f"\nfailed: {log.failed or 'none'}")
    return 1 if log.failed else 0


def nsight_compute(log: Log, out: Path, env: dict) -> None:
    """Nsight Compute's report of the add kernels into out/ncu-add.ncu-rep, its details into
    the log; a machine without ncu gets one line saying so."""
    if shutil.which("ncu", path=env.get("PATH")) is None:
        log.write("\n===== Nsight Compute\nncu is not on PATH: it comes with the CUDA toolkit, "
                  "or NVIDIA's nsight-compute package")  # fmt: skip
        log.failed.append("Nsight Compute")
        return
    sections = [arg for name in NCU_SECTIONS for arg in ("--section", name)]
    report = out / "ncu-add"
    code = log.run(
        "Nsight Compute",
        ["ncu", *sections, "--kernel-name-base", "demangled", "-k", NCU_KERNELS, "-f", "-o",
         report, sys.executable, "-m", "lab.gpu.ncu_target"],
        env=env, cwd=ROOT,
    )  # fmt: skip
    if code == 0:
        log.run("Nsight Compute details", ["ncu", "--import", f"{report}.ncu-rep", "--page",
                                           "details"], env=env, cwd=ROOT)  # fmt: skip


def cmd_release_check(args) -> int:
    check_wheel(args.wheel)
    # pypiserver, nbclient, ipykernel and what they need, as wheels copied here; none
    # there: the machine's own, if it has them (pip with no wheels would only fail).
    tool_wheels = sorted(args.tools.glob("*.whl"))
    with install_offline(tool_wheels) if tool_wheels else nullcontext(None) as tools:
        env = dict(os.environ, PYTHONPATH=tools) if tools else dict(os.environ)
        missing = missing_test_tools(env, RELEASE_TOOLS)
        if missing:
            raise Refused(
                f"the prove step needs {', '.join(missing)}, which this machine lacks: on the "
                f"build machine, pip download -d {args.tools} {' '.join(missing)} (with what "
                "they need), then copy that folder here"
            )
        out = args.outdir.resolve()
        log = Log(out / "release-check.log")
        log.write(f"wheel: {args.wheel.name}")
        log.write(header())
        return log.run(
            "prove: local index, Colab notebook, smoke test",
            [sys.executable, "-m", "scripts.release", "prove", args.wheel.resolve(),
             "--system-torch", "--notebook", "--out", out],
            cwd=ROOT, env=env,
        )  # fmt: skip


def cmd_bench(args) -> int:
    check_wheel(args.wheel)
    with install(args.wheel) as env:
        out = args.outdir.resolve()
        log = Log(out / "bench.log")
        log.write(f"wheel: {args.wheel.name}\n{facts_in(env)}")
        for workload in WORKLOADS:
            log.run(
                f"benchmark: {workload}",
                [sys.executable, "-m", "lab.bench", "--workload", workload, "--out", out,
                 *args.pytest_args],
                env=env, cwd=ROOT,
            )  # fmt: skip
        return 1 if log.failed else 0


def cmd_coldstart(args) -> int:
    """Each wheel installed on its own (as `suite` installs one), then its cold start in
    fresh processes: one log, and a JSON of every process's numbers per wheel."""
    for wheel in args.wheels:
        check_wheel(wheel)
    out = args.out.resolve()
    log = Log(out / "coldstart.log")
    for index, wheel in enumerate(args.wheels):
        with install(wheel) as env:
            if index == 0:
                log.write(facts_in(env))
            ops = _op_count(env)
            log.write(f"\nwheel: {wheel} ({ops} ops)")
            log.run(
                f"coldstart: {wheel.name}, {ops} ops",
                [sys.executable, "-m", "lab.gpu.coldstart", "--repeats", str(args.repeats),
                 "--json", out / f"coldstart-{index + 1}-{ops}-ops.json"],
                env=env, cwd=ROOT,
            )  # fmt: skip
    log.write(f"\nfailed: {log.failed or 'none'}")
    return 1 if log.failed else 0


def _op_count(env: dict) -> str:
    """How many ops the installed wheel declares (its build record), or "?"."""
    code = "import json, cuda_ext_example as c; print(len(c.BUILD_INFO['ops']))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tempfile.gettempdir())  # fmt: skip
    return run.stdout.strip() or "?"


def _count(text: str) -> int:
    """An argparse type: a whole number >= 0."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"not a whole number >= 0: {text!r}")
    return int(text)


def cmd_coldstart_wheel(args) -> int:
    from .synthetic_ops import BuildFailed, build_wheel

    try:
        wheel = build_wheel(args.extra, args.archs)
    except (BuildFailed, OSError, ValueError) as exc:  # ValueError: a bad declaration
        raise Refused(str(exc)) from None
    shown = wheel.relative_to(ROOT)
    print(
        f"built {shown}: carry build/gpu/wheels/ to the GPU machine, then "
        f"python -m lab.gpu coldstart wheelhouse/*.whl {shown}"
    )
    return 0


def cmd_compat(args) -> int:
    check_wheel(args.wheel)  # before the venv and torch's download
    venv_dir = ROOT / "build" / ("compat-" + "".join(c if c.isalnum() else "_" for c in args.torch))
    run_step([sys.executable, "-m", "venv", "--clear", venv_dir], f"creating the venv {venv_dir}")
    pip = [venv_dir / "bin" / "pip", "install", "-q", "--disable-pip-version-check"]
    run_step(
        [*pip, args.torch, "-r", ROOT / "requirements" / "test.in"],
        f"pip install {args.torch} (is it a torch version pip can get here?)",
    )
    run_step([*pip, "--no-deps", args.wheel], f"pip install {args.wheel.name}")
    log = Log(args.log)
    python = venv_dir / "bin" / "python"
    facts = subprocess.run(
        [python, "-c", "from lab.gpu.facts import header; print(header())"],
        capture_output=True, text=True, cwd=ROOT,
    ).stdout.strip()  # fmt: skip
    log.write(f"wheel: {args.wheel.name}\n{facts}")
    return log.run(
        "pytest (release tools excluded: they live in .venv)",
        [python, "-P", "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider",
         "-m", "not release"],
        cwd=ROOT,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.gpu",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("suite", help="the whole test suite, GPU tests included")
    p.add_argument("wheel", type=Path)
    p.add_argument("--log", type=Path, default=ROOT / "build" / "gpu" / "suite.log")
    p.set_defaults(func=cmd_suite)
    p = sub.add_parser("tools", help="the know-your-binary tools and sanitizers")
    p.add_argument("wheel", type=Path)
    p.add_argument("outdir", type=Path)
    p.set_defaults(func=cmd_tools)
    p = sub.add_parser("bench", help="every benchmark workload; BENCH_ARGS after --")
    p.add_argument("wheel", type=Path)
    p.add_argument("outdir", type=Path)
    p.set_defaults(func=cmd_bench)
    p = sub.add_parser("release-check", help="the release's prove step, without network")
    p.add_argument("wheel", type=Path)
    p.add_argument("outdir", type=Path)
    p.add_argument("--tools", type=Path, default=EXTRA_WHEELS / "tools", help="tool wheels")
    p.set_defaults(func=cmd_release_check)
    p = sub.add_parser("compat", help="the suite with another torch, in a fresh venv")
    p.add_argument("torch", help="e.g. 'torch==2.14.1'")
    p.add_argument("wheel", type=Path)
    p.add_argument("--log", type=Path, default=ROOT / "build" / "gpu" / "compat.log")
    p.set_defaults(func=cmd_compat)
    p = sub.add_parser("coldstart", help="each wheel's first calls against torch's, in fresh "
                       "processes")  # fmt: skip
    p.add_argument("wheels", type=Path, nargs="+", metavar="WHEEL")
    p.add_argument("--repeats", type=at_least_one("process"), default=7, help="fresh processes")
    p.add_argument("--out", type=Path, default=ROOT / "build" / "gpu" / "coldstart")
    p.set_defaults(func=cmd_coldstart)
    p = sub.add_parser("coldstart-wheel", help="(build machine) a wheel with N synthetic ops more")
    p.add_argument("--extra", type=_count, default=10,
                   help="synthetic ops to add (copies of ops/add; 0: none)")  # fmt: skip
    p.add_argument("--archs", default="90",
                   help='SASS archs, as make wheel ARCHS= takes them ("all": every declared '
                   "target)")  # fmt: skip
    p.set_defaults(func=cmd_coldstart_wheel)
    # What follows "--" goes to pytest (or the benchmark) untouched: argparse would read its
    # -m as ours.
    argv = sys.argv[1:] if argv is None else argv
    ours, rest = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    args = parser.parse_args(ours)
    args.pytest_args = rest
    try:
        return args.func(args)
    except Refused as refused:
        print(f"lab.gpu {args.command}: {refused}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
