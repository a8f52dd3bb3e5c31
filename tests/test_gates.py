"""Each kind of bad wheel a release engineer fears, made from the session's good wheel
(unpack, change one thing, repack) and given to the gates as `python -m scripts.release
gates` runs them: refused by the gate for that fault, with that fault's reason and fix."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
import zipfile
from pathlib import Path

import pytest
from wheel_surgery import (
    EXTENSION,
    extension_copy,
    patchelf,
    repack,
    rezip,
    run_gates_until_refused,
)

from buildtools.toolchain import torch_paths
from scripts.release import gates as release_gates
from scripts.release import wheel_files

ROOT = Path(__file__).resolve().parent.parent
CC = shutil.which("cc") or shutil.which("gcc")

pytestmark = pytest.mark.release


def dist_info(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return next(n.split("/")[0] for n in zf.namelist() if ".dist-info/" in n)


def compile_so(tmp: Path, source: str) -> Path:
    if CC is None:
        pytest.skip("needs a C compiler")
    src = tmp / "planted.c"
    src.write_text(textwrap.dedent(source))
    so = tmp / "planted.so"
    subprocess.run([CC, "-shared", "-fPIC", "-O1", src, "-o", so], check=True)
    return so


# ---------------------------------------------------------- the table


def test_refuses_cuda_runtime_dependency(good_wheel, tmp_path):
    so = patchelf(extension_copy(good_wheel, tmp_path), "--add-needed", "libcudart.so.12")
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=so))
    assert failure.gate == "elf-audit"
    assert "needs ['libcudart.so.12']" in failure.reason
    assert "no CUDA runtime" in failure.fix


def test_refuses_missing_fatbin(good_wheel, tmp_path):
    objcopy = shutil.which("objcopy")
    if objcopy is None:
        pytest.skip("needs objcopy")
    so = extension_copy(good_wheel, tmp_path)
    subprocess.run([objcopy, "--remove-section", ".nv_fatbin", so], check=True)
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=so))
    assert failure.gate == "device-code"
    assert "SASS [] and PTX []" in failure.reason
    assert "arch list of pyproject.toml" in failure.fix


def test_refuses_grafted_torch_library(good_wheel, tmp_path):
    (libc10,) = (torch_paths()[1]).glob("libc10.so")  # torch's own, as auditwheel grafts it
    grafted = "cuda_ext_example.libs/libc10.so"
    bad = repack(good_wheel, tmp_path, add={grafted: libc10.read_bytes()})
    failure = run_gates_until_refused(bad)
    assert failure.gate == "grafted"
    assert f"a library was grafted into the wheel: {grafted}" in failure.reason
    assert "add it to the repair excludes" in failure.fix
    assert "abi3" not in str(failure)  # not the wrong fault (nor the wrong fix)


def test_refuses_truncated_extension(good_wheel, tmp_path):
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(extension_copy(good_wheel, tmp_path).read_bytes()[:100_000])
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=truncated))
    assert failure.gate == "elf-readable"
    assert f"{EXTENSION} is not a readable ELF shared object (truncated:" in failure.reason
    assert "the file has 100000 bytes" in failure.reason
    assert "rebuild and repair the wheel" in failure.fix
    assert "Traceback" not in str(failure) and "limited API" not in failure.fix


@pytest.mark.parametrize(
    "content, said",
    [
        (b"INPUT(-lfoo)\n", "does not start with the ELF magic"),  # a linker script named .so
        (b"\x7fELF\x02\x01\x01" + b"\xff" * 9, "pyelftools cannot parse it"),  # header only
    ],
)
def test_refuses_file_that_is_no_elf(good_wheel, tmp_path, content, said):
    planted = tmp_path / "planted.so"
    planted.write_bytes(content)
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=planted))
    assert failure.gate == "elf-readable"
    assert said in failure.reason
    assert "Traceback" not in str(failure)


@pytest.mark.parametrize(
    "flags, path",
    [
        ((), "/home/builder/torch/lib"),  # patchelf writes DT_RUNPATH
        (("--force-rpath",), "/home/builder/torch/lib"),  # DT_RPATH
        ((), "$ORIGIN/../../torch/lib"),  # $ORIGIN-relative, but out of the wheel
        ((), "$ORIGIN/../cuda_ext_example.libs"),  # a folder the wheel does not have
    ],
)
def test_refuses_search_path_outside_the_wheel(good_wheel, tmp_path, flags, path):
    so = patchelf(extension_copy(good_wheel, tmp_path), *flags, "--set-rpath", path)
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=so))
    assert failure.gate == "search-path"
    kind = "RPATH" if flags else "RUNPATH"
    assert f"{EXTENSION} has {kind} {path!r}" in failure.reason
    assert "not a folder inside the wheel" in failure.reason
    assert "patchelf --remove-rpath" in failure.fix


def test_accepts_search_path_inside_the_wheel(good_wheel, tmp_path):
    so = patchelf(extension_copy(good_wheel, tmp_path), "--set-rpath", "$ORIGIN")
    bad = repack(good_wheel, tmp_path, replace_so=so)
    assert release_gates._dynamic_tags(so.read_bytes(), ("DT_RUNPATH",)) == [
        ("DT_RUNPATH", "$ORIGIN")
    ]
    release_gates.gate_search_paths(bad)  # the extension's own folder: fine


def test_refuses_record_that_lies_about_torch_target(good_wheel, tmp_path):
    record = json.loads(zipfile.ZipFile(good_wheel).read(release_gates.BUILD_RECORD))
    record["torch_target"] = "2.9"
    planted = {release_gates.BUILD_RECORD: json.dumps(record, indent=2).encode()}
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, add=planted))
    assert failure.gate == "build-record"
    assert "torch_target 2.9 but the binary imports torch 2.10 shims" in failure.reason
    assert "torch_target is '2.9', pyproject.toml" in failure.reason
    assert "never edit the record: rebuild the wheel" in failure.fix


# ------------------------------------------------ the record against the binary


def _glibc_just_below(good_wheel: Path) -> str:
    with release_gates.binary_info.extension_in(good_wheel) as so:
        newest = release_gates.binary_info.newest_version(so, "GLIBC_")
    major, minor = release_gates.binary_info.version_key(newest)[:2]
    return f"{major}.{minor - 1}"


RECORD_LIES = {
    # field: (how the lie is made from the true record, what the gate must say)
    "sass_archs": (lambda r: r["sass_archs"][:-1], "but the fatbin has SASS"),
    "ptx_arch": (lambda r: "compute_90", "ptx_arch compute_90 but the fatbin has PTX ['sm_120']"),
    "min_driver": (lambda r: "470.57.02", "min_driver 470.57.02 but cubins from CUDA 12 need"),
    "min_driver_cuda": (lambda r: "11.4", "min_driver_cuda 11.4 but the cubins are CUDA 12's"),
    "device_cuda": (
        lambda r: "12.4",
        "device_cuda 12.4 but the cubins are from CUDA ['12.0', '12.9']",
    ),
    "device_compilers": (
        lambda r: {**r["device_compilers"], "sm_80": "NVRTC 12.9"},
        "device_compilers disagree with the cubins (sm_80: CUDA 12.0, recorded NVRTC 12.9)",
    ),
    "glibc_floor": (None, "but the binary needs GLIBC_"),
    "dtypes": (lambda r: r["dtypes"][:-1], "but the binary has kernels for"),
}


@pytest.mark.parametrize("field", list(RECORD_LIES))
def test_refuses_record_that_disagrees_with_the_binary(
    good_wheel, tmp_path, cfg, torch_include, field
):
    record = json.loads(zipfile.ZipFile(good_wheel).read(release_gates.BUILD_RECORD))
    lie, said = RECORD_LIES[field]
    record[field] = lie(record) if lie else _glibc_just_below(good_wheel)
    planted = {release_gates.BUILD_RECORD: json.dumps(record, indent=2).encode()}
    with pytest.raises(release_gates.GateFailure) as exc:
        release_gates.gate_build_record(
            repack(good_wheel, tmp_path, add=planted), cfg, torch_include
        )
    assert exc.value.gate == "build-record"
    assert said in exc.value.reason
    assert f"{field} is {record[field]!r}, pyproject.toml" in exc.value.reason
    assert "never edit the record" in exc.value.fix


# ------------------------------------------------------------ torch-abi-audit


def test_torch_abi_audit_refuses_unstable_libtorch_symbol(good_wheel, tmp_path):
    # c10::UndefinedTensorImpl::_singleton: C++ libtorch, tied to one torch release;
    # our shim gate only reads the C shims, so this is torch-abi-audit's catch.
    so = compile_so(
        tmp_path,
        """
        extern char _ZN3c1019UndefinedTensorImpl10_singletonE;
        void *PyInit__C(void) { return &_ZN3c1019UndefinedTensorImpl10_singletonE; }
        """,
    )
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=so))
    assert failure.gate == "torch-abi-audit"
    assert "unstable libtorch symbols: c10::UndefinedTensorImpl::_singleton" in failure.reason
    assert "use only the LibTorch stable ABI" in failure.fix


def test_torch_abi_audit_refuses_min_torch_above_target(good_wheel, tmp_path, cfg):
    # torch_stream_native_handle is a torch 2.13 shim.
    so = compile_so(
        tmp_path,
        """
        extern int torch_stream_native_handle(void *, void **);
        void *PyInit__C(void *s) { void *h; torch_stream_native_handle(s, &h); return h; }
        """,
    )
    with pytest.raises(release_gates.GateFailure) as exc:
        release_gates.gate_torch_abi_audit(repack(good_wheel, tmp_path, replace_so=so), cfg)
    assert "min torch 2.13.0 (from torch_stream_native_handle) is above the declared target " \
        f"{cfg.torch_target}" in exc.value.reason  # fmt: skip
    assert f"-DTORCH_TARGET_VERSION for {cfg.torch_target}" in exc.value.fix


# ------------------------------------------------- other faults of a release


def test_refuses_bytecode(good_wheel, tmp_path):
    pyc = "cuda_ext_example/__pycache__/ops.cpython-311.pyc"
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, add={pyc: b"\xa7\r\r\n"}))
    assert failure.gate == "bytecode"
    assert f"compiled bytecode: {pyc}" in failure.reason
    assert "make clean" in failure.fix


@pytest.mark.parametrize("where", ["checkout path in a module", "temp path in the binary"])
def test_refuses_build_path(good_wheel, tmp_path, where):
    if where == "checkout path in a module":
        path = f"{ROOT}/csrc/ops.cpp"
        planted = {"cuda_ext_example/_sources.py": f"SOURCE = {path!r}\n".encode()}
        bad = repack(good_wheel, tmp_path, add=planted)
    else:  # a __FILE__ string of a build in a temp folder, after the ELF's sections
        path = "/tmp/build-8f2a/csrc/ops.cpp"
        so = extension_copy(good_wheel, tmp_path)
        so.write_bytes(so.read_bytes() + path.encode() + b"\0")
        bad = repack(good_wheel, tmp_path, replace_so=so)
    failure = run_gates_until_refused(bad)
    assert failure.gate == "build-paths"
    assert "a path of the build machine is inside the wheel's files" in failure.reason
    assert repr(path) in failure.reason
    assert "-ffile-prefix-map" in failure.fix


def test_refuses_executable_stack(good_wheel, tmp_path):
    so = patchelf(extension_copy(good_wheel, tmp_path), "--set-execstack")
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=so))
    assert failure.gate == "exec-stack"
    assert f"{EXTENSION} asks for an executable stack (PT_GNU_STACK RWE)" in failure.reason
    assert ".note.GNU-stack" in failure.fix


def test_refuses_missing_license(good_wheel, tmp_path):
    license_file = f"{dist_info(good_wheel)}/licenses/LICENSE"
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, remove=(license_file,)))
    assert failure.gate == "license"
    assert "has no license file" in failure.reason and "LICENSE" in failure.reason
    assert 'license-files = ["LICENSE"]' in failure.fix


@pytest.mark.parametrize("fault", ["changed file", "file not in RECORD"])
def test_refuses_record_that_disagrees_with_files(good_wheel, tmp_path, fault):
    init = "cuda_ext_example/__init__.py"
    if fault == "changed file":
        changed = zipfile.ZipFile(good_wheel).read(init) + b"import os\n"
        bad = rezip(good_wheel, tmp_path, replace={init: changed}, add={})
        said = f"{init}: RECORD says sha256="
    else:
        bad = rezip(good_wheel, tmp_path, replace={}, add={"cuda_ext_example/extra.py": b""})
        said = "cuda_ext_example/extra.py is in the wheel but not in RECORD"
    failure = run_gates_until_refused(bad)
    assert failure.gate == "record"
    assert "the wheel's RECORD disagrees with its files" in failure.reason
    assert said in failure.reason
    assert "never edit a built wheel by hand" in failure.fix


def test_good_wheel_has_none_of_these_faults(good_wheel):
    """The other side of every test above: the fault is what the gate saw."""
    assert wheel_files.record_problems(good_wheel) == []
    assert wheel_files.build_paths_in(good_wheel) == []
    with zipfile.ZipFile(good_wheel) as zf:
        assert wheel_files.grafted_libraries(zf.namelist()) == []
        data = zf.read(EXTENSION)
    assert release_gates.binary_info.elf_problem(data) is None
    assert release_gates.stack_flags(data) == "RW"
    assert release_gates._dynamic_tags(data, ("DT_RPATH", "DT_RUNPATH")) == []


def test_a_crashing_tool_is_no_verdict():
    # abi3audit on a truncated .so crashed with a traceback that the gate then
    # answered with "use only the Python limited API": the wrong fix.
    crash = ["python3", "-c", "raise ValueError('bad ELF offset')"]
    with pytest.raises(release_gates.GateFailure) as exc:
        release_gates._run_tool("abi3audit", crash, "use only the Python limited API")
    assert "`python3` crashed reading the wheel (no verdict)" in exc.value.reason
    assert "ValueError: bad ELF offset" in exc.value.reason
    assert "limited API" not in exc.value.fix
    assert "every ELF is whole" in exc.value.fix


def test_torch_abi_audit_seeing_no_torch_is_no_pass(good_wheel, tmp_path, cfg):
    # Our extension uses torch's shims; a reading with none (an nm that cannot read
    # the ELF gives an empty list) must not pass as clean.
    so = compile_so(tmp_path, "int PyInit__C(void) { return 0; }\n")
    with pytest.raises(release_gates.GateFailure) as exc:
        release_gates.gate_torch_abi_audit(repack(good_wheel, tmp_path, replace_so=so), cfg)
    assert "it saw no torch symbol at all" in exc.value.reason
