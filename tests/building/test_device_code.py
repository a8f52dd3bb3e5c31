"""The device-code build itself (buildtools/device_code.py): same source, same bytes; one
library (NVRTC program, fatbin) per op and dtype. Each test compiles into a device-code cache
of its own (the two-process test with none: each process must compile), never the user's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.release  # needs the build's NVRTCs


@pytest.fixture(autouse=True)
def device_code_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CEE_DEVICE_CODE_CACHE", str(tmp_path / "device-code-cache"))


# One op of each kind: the core's elementwise kernels and an op's own.
COMPILE = """
import dataclasses, hashlib, sys
from buildtools import declarations, device_code, nvrtc
decl = declarations.load()
ops = tuple(o for o in decl.ops if o.name in ("my_add", "my_rms_norm"))
decl = dataclasses.replace(decl, ops=ops)
images, _, _ = device_code.compile_kernels(decl, {"sm_90": nvrtc.compiler_for(sys.argv[1])})
print(hashlib.sha256(b"".join(images[lib]["sm_90"] for lib in sorted(images))).hexdigest())
"""


@pytest.mark.parametrize("cuda", ["12.0", "12.9"])
def test_same_source_same_cubin_in_two_processes(cuda):
    # NVRTC 12.0 names nv/target's internal variables after a module id that holds the
    # process id unless the file has an external function (device_code.kernel_source says so):
    # two processes, two process ids, one cubin per library (every program has the anchor).
    # No device-code cache: the second process would be given the first one's bytes.
    digests = {
        subprocess.run(
            [sys.executable, "-c", COMPILE, cuda], cwd=ROOT, capture_output=True, text=True,
            check=True, env={**os.environ, "CEE_DEVICE_CODE_CACHE": "off"},
        ).stdout.strip()
        for _ in range(2)
    }  # fmt: skip
    assert len(digests) == 1, digests


def test_the_anchor_is_what_makes_it_reproducible():
    # Without the external function, NVRTC 12.0's names carry the process id (the check
    # above can fail).
    import re

    from buildtools import declarations, device_code, nvrtc

    decl = declarations.load()
    for op in decl.ops:  # one program per op (and dtype), each with its anchor
        source = device_code.kernel_source(decl, op)
        assert 'extern "C" __device__ void cee_reproducible_module_id() {}' in source
    plain = 'extern "C" __global__ void k(float *x) { x[threadIdx.x] += 1; }\n'
    ptx, _ = nvrtc.compiler_for("12.0").nvrtc.compile(
        plain.replace('extern "C" ', "template <int> "), "t.cu", [], [], "compute_90"
    )
    assert re.search(rb"_INTERNAL_00000000_\d+_t_cu_[0-9a-f]{8}_\d+", ptx)  # hash _ pid


def test_nvrtc_12_0_leaves_the_locale_alone():
    # NVRTC 12.0 switches the calling thread's locale (uselocale) and keeps it: without
    # the restore, Python decoded later subprocess output as ASCII (tests failed after it).
    import locale

    from buildtools import nvrtc

    before = locale.getpreferredencoding(False)
    nvrtc.compiler_for("12.0").nvrtc.compile("__global__ void k() {}", "k.cu", [], [], "sm_90")
    assert locale.getpreferredencoding(False) == before


# An evict-first instance (a launch shape's load = "evict-first"), 16-byte and 8-byte accesses.
EVICT_FIRST = [
    "cee::elementwise_vectorized<cee_rule_add::Signature, float, 16, 128, 2, cee::kLoadEvictFirst>",
    "cee::elementwise_vectorized<cee_rule_add::Signature, __nv_bfloat16, 8, 256, 1, "
    "cee::kLoadEvictFirst>",
]


@pytest.mark.parametrize("cuda", ["12.0", "12.9"])
def test_evict_first_loads_compile_for_every_arch_and_hint_only_from_sm_80(cuda):
    # The fatbin has SASS from sm_50 on: createpolicy and the L2 cache-hint loads need sm_80,
    # below it the kernel takes the read-only load (#if __CUDA_ARCH__ >= 800).
    from buildtools import declarations, device_code, nvrtc

    compiler = nvrtc.compiler_for(cuda)
    options = ["--std=c++17", f"--include-path={device_code.CSRC}",
               f"--include-path={device_code.OPS_DIR}",
               *(f"--include-path={d}" for d in compiler.includes)]  # fmt: skip
    decl = declarations.load()
    source = device_code.kernel_source(decl, next(op for op in decl.ops if op.name == "my_add"))

    def compile_for(target: str) -> bytes:
        image, lowered = compiler.nvrtc.compile(
            source, device_code.PROGRAM_NAME, options, EVICT_FIRST, target
        )
        assert set(lowered) == set(EVICT_FIRST)
        return image

    for arch in ("75", "90"):
        assert compile_for(f"sm_{arch}")  # a cubin: ptxas took the inline PTX
    old, new = compile_for("compute_75").decode(), compile_for("compute_90").decode()
    # sm_90: one policy per kernel, each input access loaded with it (v4 and v2)
    assert new.count("createpolicy.fractional.L2::evict_first.b64") == 2
    assert "ld.global.L1::no_allocate.L2::cache_hint.v4.u32" in new
    assert "ld.global.L1::no_allocate.L2::cache_hint.v2.u32" in new
    assert "ld.global.nc.v" not in new  # no vector access left to the read-only load
    # sm_75: the read-only load, no hint
    assert "L2::cache_hint" not in old and "createpolicy" not in old
    assert "ld.global.nc.v4.u32" in old and "ld.global.nc.v2.u32" in old


def test_two_rules_may_name_their_helpers_alike(tmp_path):
    """Each rule.h is included in a namespace of its folder's own: two rules that both
    define `helper` compile together, for the GPU (NVRTC) and the host (zig c++: the op table
    holds every rule)."""
    from buildtools import declarations, device_code, nvrtc, signatures

    for folder, factor in (("twice", 2), ("thrice", 3)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "rule.h").write_text(
            '#pragma once\n#include "element_math.h"\n'
            f"CEE_HOST_DEVICE float helper(float x) {{ return {factor} * x; }}\n"
            "struct Scale {\n  template <typename C>\n"
            "  CEE_HOST_DEVICE static C apply(C x) { return helper(x); }\n};\n"
        )
        (tmp_path / folder / "ops.toml").write_text(
            f'rule = "Scale"\ninputs = ["x"]\ndtypes = ["float32"]\n'
            f'reference = "x * {factor}"\n[[op]]\nname = "my_{folder}"\nkernel = "simple"\n'
        )
    decl = declarations.load(tmp_path)
    dtypes = [d.name for d in decl.dtypes]
    # Both rules in one program (the build compiles one op's per program; one translation
    # unit with both is what must not collide).
    source = '#include "elementwise_kernels.cuh"\n' + signatures.rules_source(decl.ops, dtypes)
    compiler = nvrtc.compiler_for("12.9")
    options = ["--std=c++17", f"--include-path={device_code.CSRC}", f"--include-path={tmp_path}",
               *(f"--include-path={d}" for d in compiler.includes)]  # fmt: skip
    names = [k.expression for k in device_code.instances(decl)]
    assert {k.op for k in device_code.instances(decl)} == {"my_twice", "my_thrice"}
    image, lowered = compiler.nvrtc.compile(source, "two.cu", options, names, "sm_90")
    assert image[:4] == b"\x7fELF" and set(lowered) == set(names)
    host = tmp_path / "host.cpp"
    host.write_text(signatures.rules_source(decl.ops, dtypes))
    subprocess.run(
        [sys.executable, "-m", "ziglang", "c++", "-std=c++17", "-c", "-o", tmp_path / "host.o",
         f"-I{device_code.CSRC}", f"-I{tmp_path}", host],
        check=True,
    )  # fmt: skip


def test_one_library_per_op_and_dtype_holding_its_own_kernels_only():
    # Each op and dtype is its own NVRTC program (the core's templates and that op's rule.h)
    # and its own fatbin: the first call of an op in a dtype loads those kernels alone. A
    # kernel two ops share (my_add's simple kernel is my_fast_add's too) is in both.
    from buildtools import declarations, device_code, nvrtc
    from scripts.inspect import binary_info

    decl = declarations.load()
    kernels = device_code.instances(decl)
    images, lowered, _ = device_code.compile_kernels(decl, {"sm_90": nvrtc.compiler_for("12.9")})
    assert list(images) == decl.libraries
    own: dict[str, set[str]] = {}
    for op in decl.ops:  # an op's own kernels: every instance its declaration lists
        for template, dtype, values in op.instances():
            library = declarations.library_name(op.name, dtype)
            own.setdefault(library, set()).add(lowered[op.expression(template, dtype, values)])
    for k in kernels:  # every instance, the core's elementwise ones too
        own.setdefault(k.library, set()).add(lowered[k.expression])
    assert set(own) == set(images)
    for library, names in own.items():
        found = {n for n in binary_info.cubin_kernels(images[library]["sm_90"]) if "$" not in n}
        assert found == names, library  # not the math library's subroutines ("$...")
    for op in decl.ops:  # one op's code per program: its rule, or its own kernels.cuh
        source = device_code.kernel_source(decl, op)
        own_header = f"{op.folder}/rule.h" if op.elementwise else f"{op.folder}/kernels.cuh"
        assert source.count("/rule.h") + source.count("/kernels.cuh") == 1
        assert f'#include "{own_header}"' in source, op.name


def test_each_fatbin_is_named_after_its_library(tmp_path):
    # nvFatbin's identifier of every entry is the library's name (op_dtype): what cuobjdump
    # prints (my_add_float32.sm_90.cubin) and what the gates and inspect read from the section.
    from buildtools import build_ext, declarations
    from scripts.inspect import binary_info

    code = build_ext.write_device_code(
        tmp_path, declarations.load(), {"sm_90": "12.0", "compute_120": "12.9"}, "t"
    )
    section = b""
    for name, fatbin in code.fatbins.items():
        (read,) = binary_info.fatbins(fatbin)
        assert read.name == name and read.archs("sass") == ["sm_90"]
        assert read.archs("ptx") == ["sm_120"]
        assert (tmp_path / "fatbin" / f"{name}.fatbin").read_bytes() == fatbin
        section += fatbin + b"\0" * (-len(fatbin) % 8)
    assert [f.name for f in binary_info.fatbins(section)] == list(code.fatbins)
    assembly = (tmp_path / "device_code.S").read_text()
    for name in code.fatbins:
        assert f".size cee_fatbin_{name}, . - cee_fatbin_{name}" in assembly
