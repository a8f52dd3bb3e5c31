"""A failed build says what failed, last: the compiler's error with its file and line, then
one line naming the build step, and no Python traceback (buildtools/build_ext.py's
build_step); `make wheel`'s frontend (buildtools/build_wheel.py) adds nothing after it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.release  # builds with the dev tools (build, zig, NVRTC)
# The build's inputs: a copy of these is a buildable tree.
TREE = ("csrc", "ops", "tuning", "buildtools", "src", "requirements", "setup.py",
        "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in")  # fmt: skip


def build_env(tmp_path: Path) -> dict:
    """make wheel's environment with one NVRTC 12.9 target (the failure comes before any
    other work) and a device-code cache of the test's own."""
    return {**os.environ, "CEE_SASS_ARCHS": "120",
            "CEE_DEVICE_CODE_CACHE": str(tmp_path / "device-code-cache")}  # fmt: skip


def last_lines(stderr: str, lines: int) -> list[str]:
    return [line for line in stderr.rstrip().splitlines() if line.strip()][-lines:]


def test_broken_kernel_ends_with_nvrtc_error_and_the_step(tmp_path):
    for name in TREE:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, tmp_path / name)
    # A kernel author's typo in an op's element rule.
    rule = tmp_path / "ops" / "square" / "rule.h"
    text = rule.read_text()
    anchor = '#include "element_math.h"'
    line = text[: text.index(anchor)].count("\n") + 2  # the line after it
    rule.write_text(text.replace(anchor, anchor + "\nthis_is_not_cuda;"))
    run = subprocess.run(
        [sys.executable, "-m", "buildtools.build_wheel", "dist"],  # as make wheel runs it
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=build_env(tmp_path),
    )
    assert run.returncode != 0
    assert "Traceback" not in run.stderr, run.stderr
    tail = last_lines(run.stderr, 4)
    step = (
        "error: building cuda_ext_example failed at: device code (NVRTC: the ops' kernels, ops/*/)"
    )
    assert tail[-1] == step
    assert re.fullmatch(r'\d+ errors? detected in the compilation of "device_code.cu"\.', tail[-2])
    assert f"ops/square/rule.h({line}): error:" in run.stderr
    # the op and dtype whose program failed (one program per op, dtype and target)
    assert re.search(
        r"NVRTC 12\.9, sm_120, op my_square \((float16|bfloat16|float32|float64|u?int\d+)\): "
        r"NVRTC compile for sm_120: NVRTC_ERROR_COMPILATION",
        run.stderr,
    ), run.stderr


def test_a_bad_declaration_ends_with_its_file_key_and_the_step(tmp_path):
    for name in TREE:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, tmp_path / name)
    declaration = tmp_path / "ops" / "square" / "ops.toml"
    declaration.write_text(declaration.read_text().replace("torch.square(", "torch.sqare("))
    run = subprocess.run(
        [sys.executable, "-m", "buildtools.build_wheel", "dist"],
        cwd=tmp_path, capture_output=True, text=True, env=build_env(tmp_path),
    )  # fmt: skip
    assert run.returncode != 0
    assert "Traceback" not in run.stderr, run.stderr
    tail = last_lines(run.stderr, 2)
    assert (
        tail[-1] == "error: building cuda_ext_example failed at: op declarations (ops/*/ops.toml)"
    )
    assert tail[-2].startswith(
        "ops/square/ops.toml: [[op]] my_square reference: torch.sqare does not exist"
    )


def test_broken_host_code_ends_with_zig_error_and_the_step(tmp_path):
    # The host step as build_ext runs it, on one small file (a whole host build from a
    # fresh copy takes zig minutes): zig's "file:line:col: error" last, then the step.
    broken = tmp_path / "broken.cpp"
    broken.write_text("int ok = 1;\nint broken = undefined_name;\n")
    code = textwrap.dedent(
        f"""
        from buildtools import build_ext, config
        cmd = [*build_ext.zig_cxx(config.load(), {str(tmp_path)!r}), "-c", {str(broken)!r},
               "-o", {str(tmp_path / "broken.o")!r}]
        build_ext.build_step("host code and link (zig c++)", build_ext._run, cmd)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 1
    assert "Traceback" not in run.stderr, run.stderr
    tail = run.stderr.rstrip().splitlines()
    assert tail[-1] == "error: building cuda_ext_example failed at: host code and link (zig c++)"
    assert f"{broken}:2:14: error: use of undeclared identifier 'undefined_name'" in run.stderr
    assert tail[-2] == "1 error generated."  # zig's (clang's) last line, right above


@pytest.mark.parametrize("spec", ["", "80 120", "80@12.9"])
def test_dev_build_archs(spec):
    from buildtools import config

    cfg = config.load(dev_spec=spec)
    if not spec:
        assert not cfg.dev_build and cfg.ptx_arch == "120" and "50" in cfg.sass_archs
        return
    assert cfg.dev_build and cfg.ptx_arch is None
    assert cfg.sass_cuda == ({"80": "12.0", "120": "12.9"} if " " in spec else {"80": "12.9"})
    assert cfg.arch_summary.endswith("; PTX none; dev build")


def test_dev_build_of_an_undeclared_arch_names_the_fix():
    from buildtools import config

    with pytest.raises(config.ConfigError, match=r'sm_87 is not declared .* "87@12.9"'):
        config.load(dev_spec="87")


def test_kernels_compile_with_both_nvrtcs(tmp_path, monkeypatch):
    # The same source through NVRTC 12.0 (with CUDA 12.0's headers) and 12.9, for sm_70 and
    # sm_90; on sm_70 the bf16 add rounds through float in software (cuda_bf16.hpp's
    # __float2bfloat16_rn below sm_80, as torch's own sm_70 kernels do), from sm_80 on with
    # the cvt.rn.bf16.f32 instruction.
    import dataclasses

    from buildtools import declarations, device_code, nvrtc

    monkeypatch.setenv("CEE_DEVICE_CODE_CACHE", str(tmp_path / "device-code-cache"))
    decl = declarations.load()
    decl = dataclasses.replace(decl, ops=tuple(op for op in decl.ops if op.name == "my_add"))
    targets = ("compute_70", "compute_80", "sm_70", "sm_90")
    for cuda in ("12.0", "12.9"):
        compilers = {t: nvrtc.compiler_for(cuda) for t in targets}
        libraries, lowered, _ = device_code.compile_kernels(decl, compilers)
        images = libraries["my_add_bfloat16"]
        assert images["sm_70"][:4] == images["sm_90"][:4] == b"\x7fELF"
        assert "cee::elementwise_simple<cee_rule_add::Signature, __nv_bfloat16>" in lowered
        assert b"cvt.rn.bf16.f32" not in images["compute_70"], cuda
        assert b"cvt.rn.bf16.f32" in images["compute_80"], cuda
