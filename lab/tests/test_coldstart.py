"""The cold-start measurement (lab/gpu/coldstart.py: every op's first call against
torch's first new kernel, fresh processes) and the wheel with synthetic ops it is run on
(lab/gpu/synthetic_ops.py, `python -m lab.gpu coldstart-wheel`). On a GPU, the
numbers are the script's to judge; here, what it computes and builds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from buildtools import declarations
from lab.gpu import coldstart, synthetic_ops

ROOT = Path(__file__).resolve().parents[2]
OPS = ["my_add", "my_fast_add", "my_square"]


def sample(turn: int, ms: dict[str, float], device: str = "NVIDIA H100 80GB HBM3") -> dict:
    """One process's seconds as the child prints them, the ops turned by `turn`."""
    order = OPS[turn:] + OPS[:turn]
    t = {"import torch": 3.7, "CUDA context": 0.3, "first torch.mul": 0.015, "warm torch.mul": 0}
    for i, new in enumerate(("add", "sub", "maximum")):  # the middle one is the median
        t.update(
            {f"first torch.{new}": (ms["torch"] + (i - 1) * 0.05) / 1e3, f"warm torch.{new}": 0}
        )
    t[coldstart.BASELINE] = ms["torch"] / 1e3
    t["import cuda_ext_example"] = 0.05
    for op in order:
        t[f"first {op}"] = ms[op] / 1e3
        t[f"warm {op}"] = 1e-5
    t.update({"first of ours": t[f"first {order[0]}"], "ops": order, "device": device})
    return t


SAMPLES = [  # the first op of each process: my_add, my_fast_add, my_square
    sample(0, {"torch": 0.15, "my_add": 0.40, "my_fast_add": 0.60, "my_square": 0.60}),
    sample(1, {"torch": 0.20, "my_add": 0.30, "my_fast_add": 0.65, "my_square": 0.50}),
    sample(2, {"torch": 0.10, "my_add": 0.35, "my_fast_add": 0.55, "my_square": 0.52}),
]


def test_rows_are_medians_with_their_spread_in_the_declared_order():
    rows = coldstart.summarize(SAMPLES)
    assert rows["torch's first new kernel"] == pytest.approx((0.15e-3, 0.10e-3, 0.20e-3))
    assert rows["first torch.maximum"] == pytest.approx((0.20e-3, 0.15e-3, 0.25e-3))
    assert rows["first my_fast_add"] == pytest.approx((0.60e-3, 0.55e-3, 0.65e-3))
    ours = [k for k in rows if k.startswith(("first my", "warm my"))]
    assert ours == [f"{w} {op}" for op in OPS for w in ("first", "warm")]
    assert list(rows)[-1] == "first of ours"
    assert rows["first of ours"] == pytest.approx((0.52e-3, 0.40e-3, 0.65e-3))


def test_the_verdict_is_the_slowest_ops_median_against_torchs():
    met, said = coldstart.verdict(coldstart.summarize(SAMPLES))
    assert met and said.startswith("target: every op's first call <= torch's first new ")
    assert "met; the slowest, my_fast_add, 0.60 ms = +0.45 ms over torch's 0.15 ms" in said


def test_a_first_call_over_the_target_is_missed():
    slow = [dict(s, **{"first my_square": s["first my_square"] + 1e-3}) for s in SAMPLES]
    met, said = coldstart.verdict(coldstart.summarize(slow))
    assert not met and "MISSED" in said and "the slowest, my_square, 1.52 ms" in said
    lines = coldstart.report(slow, dict(SAMPLES[0]))
    assert said in lines
    assert any(line.startswith("  first my_square ") and "+1.37" in line for line in lines)
    assert "first my_add, PTX JIT disabled: 0.40 ms" in lines[-1]


def test_cpu_rows_say_cpu_and_judge_nothing():
    cpu = [dict(s, device="cpu") for s in SAMPLES]
    lines = coldstart.report(cpu, None)
    assert "no CUDA GPU here" in lines[1]
    assert not any(line.startswith("target:") for line in lines)
    row = next(line for line in lines if line.startswith("  first my_add "))
    assert "CPU kernel" in row and "+" not in row.split("(")[1]


def test_synthetic_ops_are_copies_of_add_in_a_copy_of_the_checkout(tmp_path):
    tree = synthetic_ops.copy_checkout(tmp_path / "tree")
    assert (tree / "ops" / "add" / "rule.h").is_file() and not (tree / ".venv").exists()
    names = synthetic_ops.add_ops(tree, 3)
    assert names == ["extra_add_01", "extra_add_02", "extra_add_03"]
    declared = {op.name: op for op in declarations.load(tree / "ops").ops}
    assert {op.name for op in declarations.load().ops} | set(names) == set(declared)
    for i, name in enumerate(names, 1):
        op = declared[name]
        want = (f"ExtraAdd{i:02d}", "vectorized", "torch.add(a, b)")
        assert (op.rule, op.kernel, op.reference) == want
        assert f"struct ExtraAdd{i:02d} " in (tree / "ops" / name / "rule.h").read_text()
    assert not list((ROOT / "ops").glob("extra_add_*"))  # the checkout is left alone


def test_coldstart_wheel_refuses_a_bad_count_in_one_line():
    run = subprocess.run(
        [sys.executable, "-m", "lab.gpu", "coldstart-wheel", "--extra", "-1"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "not a whole number >= 0: '-1'" in run.stderr.splitlines()[-1]


@pytest.mark.release
def test_coldstart_wheel_holds_one_fatbin_per_op_and_dtype(tmp_path):
    # The wheel the >= 10-op measurement runs, smaller: 2 synthetic ops, sm_90 only.
    from scripts.inspect import binary_info

    decl = declarations.load()
    wheel = synthetic_ops.build_wheel(2, "90", out=tmp_path)
    assert wheel.parent == tmp_path / f"{len(decl.ops) + 2}-ops-90"
    with binary_info.extension_in(wheel) as so:
        fatbins = binary_info.embedded_fatbins(so)
    core = [d.name for d in decl.dtypes]  # the synthetic adds take every one
    every = [(f"extra_add_0{i}", core) for i in (1, 2)] + [(op.name, op.dtypes) for op in decl.ops]
    names = [f"{name}_{d}" for name, dtypes in sorted(every) for d in dtypes]
    assert [f.name for f in fatbins] == names
    assert all(f.archs("sass") == ["sm_90"] and f.archs("ptx") == [] for f in fatbins)
