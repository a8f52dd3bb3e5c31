"""Each kind of bad wheel a release engineer fears, made from the session's good wheel
(unpack, change one thing, repack) and given to the gates as `python -m scripts.release
gates` runs them: refused by the gate for that fault, with that fault's reason and fix."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from buildtools.toolchain import torch_paths
from cuda_ext_example import BUILD_INFO
from scripts.inspect import binary_info
from scripts.release import gates as release_gates
from scripts.release.gates import binaries, elf, tools, wheel_files, wheel_metadata
from tests.wheel_surgery import (
    LIBRARY,
    append_entries,
    extension_copy,
    hooks_but,
    nv_fatbin_without,
    patchelf,
    repack,
    rezip,
    run_gates_until_refused,
)

ROOT = Path(__file__).resolve().parents[2]
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


def test_refuses_nv_fatbin_without_a_librarys_fatbin(good_wheel, tmp_path):
    # One fatbin per op and dtype, each loaded at that first call: without
    # my_square_bfloat16's, every first call of my_square in bfloat16 fails on every GPU.
    so = nv_fatbin_without(extension_copy(good_wheel, tmp_path), "my_square_bfloat16")
    left = [name for name in BUILD_INFO["device_libraries"] if name != "my_square_bfloat16"]
    assert [f.name for f in binary_info.embedded_fatbins(so)] == left
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=so))
    assert failure.gate == "device-code"
    assert f"holds the fatbins {left}" in failure.reason
    assert "no fatbin for ['my_square_bfloat16']" in failure.reason
    assert "one fatbin per declared op and dtype" in failure.fix


def test_refuses_a_librarys_fatbin_without_a_target(good_wheel, tmp_path):
    # Every fatbin needs every target: the other libraries' sm_90 does not serve this one.
    so = nv_fatbin_without(extension_copy(good_wheel, tmp_path), "my_fast_add_float32", "sm_90")
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=so))
    assert failure.gate == "device-code"
    assert "my_fast_add_float32's fatbin carries SASS" in failure.reason
    assert "(missing SASS: ['sm_90'])" in failure.reason
    assert "my_fast_add_float16's" not in failure.reason  # the others are whole
    assert "every fatbin gets every target" in failure.fix


def test_refuses_grafted_torch_library(good_wheel, tmp_path):
    (libc10,) = (torch_paths()[1]).glob("libc10.so")  # torch's own, as auditwheel grafts it
    grafted = "cuda_ext_example.libs/libc10.so"
    bad = repack(good_wheel, tmp_path, add={grafted: libc10.read_bytes()})
    failure = run_gates_until_refused(bad)
    assert failure.gate == "grafted"
    assert f"a library was grafted into the wheel: {grafted}" in failure.reason
    assert "add it to the repair excludes" in failure.fix
    assert "CPython" not in str(failure)  # not the wrong fault (nor the wrong fix)


def test_refuses_truncated_extension(good_wheel, tmp_path):
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(extension_copy(good_wheel, tmp_path).read_bytes()[:100_000])
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=truncated))
    assert failure.gate == "elf-readable"
    assert f"{LIBRARY} is not a readable ELF shared object (truncated:" in failure.reason
    assert "the file has 100000 bytes" in failure.reason
    assert "rebuild and repair the wheel" in failure.fix
    assert "Traceback" not in str(failure) and "CPython" not in failure.fix


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
    assert f"{LIBRARY} has {kind} {path!r}" in failure.reason
    assert "not a folder inside the wheel" in failure.reason
    assert "patchelf --remove-rpath" in failure.fix


def test_accepts_search_path_inside_the_wheel(good_wheel, tmp_path):
    so = patchelf(extension_copy(good_wheel, tmp_path), "--set-rpath", "$ORIGIN")
    bad = repack(good_wheel, tmp_path, replace_so=so)
    assert binaries.search_path_tags(so.read_bytes(), ("DT_RUNPATH",)) == [
        ("DT_RUNPATH", "$ORIGIN")
    ]
    elf.gate_search_paths(bad)  # the extension's own folder: fine


def test_refuses_record_that_lies_about_torch_target(good_wheel, tmp_path):
    record = json.loads(zipfile.ZipFile(good_wheel).read(release_gates.BUILD_RECORD))
    record["torch_target"] = "2.8"
    planted = {release_gates.BUILD_RECORD: json.dumps(record, indent=2).encode()}
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, add=planted))
    assert failure.gate == "build-record"
    assert "torch_target 2.8 but the binary imports torch 2.9 shims" in failure.reason
    assert "torch_target is '2.8', pyproject.toml" in failure.reason
    assert "never edit the record: rebuild the wheel" in failure.fix


# ------------------------------------------------ zip entries RECORD cannot see


def _symlink(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16  # a link, as `zip --symlinks` stores it
    return info, target.encode()


ZIP_FAULTS = {
    # fault: (the planted entries, what the refusal says, what its fix says)
    "symlink": (
        lambda good: [_symlink("cuda_ext_example/linked.py", "/etc/passwd")],
        "cuda_ext_example/linked.py is a symlink to '/etc/passwd'",
        "not a link to it",
    ),
    "duplicate": (
        lambda good: [
            (
                zipfile.ZipInfo("cuda_ext_example/ops.py"),
                zipfile.ZipFile(good).read("cuda_ext_example/ops.py"),
            )
        ],
        "duplicate zip entries (installers disagree on which copy they install): "
        "cuda_ext_example/ops.py is in the zip 2 times",
        "never add files to a built wheel with `zip`",
    ),
    "path traversal": (
        lambda good: [(zipfile.ZipInfo("cuda_ext_example/../../evil.pth"), b"import os\n")],
        "zip entries outside the wheel (an installer would write them outside site-packages, "
        "or refuse the wheel): 'cuda_ext_example/../../evil.pth'",
        "never add an entry with a leading /, a drive or a .. component",
    ),
    "absolute path": (
        lambda good: [(zipfile.ZipInfo("/tmp/evil.py"), b"")],
        "'/tmp/evil.py'",
        "a leading /",
    ),
}


@pytest.mark.parametrize("fault", list(ZIP_FAULTS))
def test_refuses_zip_entry(good_wheel, tmp_path, fault):
    entries, said, fix = ZIP_FAULTS[fault]
    bad = append_entries(good_wheel, tmp_path, entries(good_wheel))
    assert wheel_files.record_problems(bad) == []  # RECORD vouches for them: not its fault
    failure = run_gates_until_refused(bad)
    assert failure.gate == "zip-entries"
    assert said in failure.reason
    assert fix in failure.fix


# ------------------------------------------------- WHEEL and METADATA


def _edited(good: Path, tmp: Path, file: str, old: str, new: str) -> Path:
    """The good wheel with one line of a .dist-info file changed (RECORD rewritten)."""
    name = f"{dist_info(good)}/{file}"
    text = zipfile.ZipFile(good).read(name).decode()
    assert old in text
    return repack(good, tmp, add={name: text.replace(old, new, 1).encode()})


def test_refuses_purelib_wheel(good_wheel, tmp_path):
    bad = _edited(good_wheel, tmp_path, "WHEEL", "Root-Is-Purelib: false", "Root-Is-Purelib: true")
    failure = run_gates_until_refused(bad)
    assert failure.gate == "wheel-file"
    assert (
        f"WHEEL says Root-Is-Purelib: true, but the wheel carries compiled code ({LIBRARY})"
        in failure.reason
    )
    assert "setuptools writes Root-Is-Purelib: false" in failure.fix


def test_refuses_tags_other_than_the_filename(good_wheel, tmp_path):
    # A renamed wheel: pip installs it by the filename's tag, WHEEL says another.
    renamed = tmp_path / good_wheel.name.replace(
        "manylinux2014_x86_64.manylinux_2_17_x86_64", "manylinux_2_28_x86_64"
    )
    shutil.copy(good_wheel, renamed)
    failure = run_gates_until_refused(renamed)
    assert failure.gate == "wheel-file"
    assert "WHEEL's tags ['py3-none-manylinux2014_x86_64', 'py3-none-manylinux_2_17_x86_64'] " \
        "are not the filename's ['py3-none-manylinux_2_28_x86_64']" in failure.reason  # fmt: skip
    assert "never rename a wheel" in failure.fix


def test_refuses_binary_for_another_cpu(good_wheel, tmp_path):
    so = extension_copy(good_wheel, tmp_path)
    data = bytearray(so.read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine EM_AARCH64 in an x86_64 wheel
    so.write_bytes(data)
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=so))
    assert failure.gate == "wheel-file"
    assert f"but {LIBRARY} is for aarch64" in failure.reason
    assert "ARCH=aarch64" in failure.fix


METADATA_FAULTS = {
    # fault: (the line, its replacement, what the refusal says)
    "no torch requirement": (
        "Requires-Dist: torch>=2.9\n",
        "",
        "METADATA's torch requirement is missing, not >=2.9: pyproject.toml declares >=2.9 "
        "([project]) and torch-target 2.9 (the build record: 2.9)",
    ),
    "older torch": (
        "torch>=2.9",
        "torch>=2.8",
        "METADATA's torch requirement is >=2.8, not >=2.9",
    ),
    "no Requires-Python": (
        "Requires-Python: >=3.10\n",
        "",
        "METADATA's Requires-Python is missing, not pyproject.toml's >=3.10",
    ),
    "older Python": (
        "Requires-Python: >=3.10",
        "Requires-Python: >=3.9",
        "METADATA's Requires-Python is >=3.9, not pyproject.toml's >=3.10",
    ),
    "other version": (
        "Version: 0.1.0",
        "Version: 0.1.1",
        "METADATA Version 0.1.1, the filename's 0.1.0, pyproject.toml's 0.1.0",
    ),
    "other name": (
        "Name: cuda_ext_example",
        "Name: cuda_ext_sample",
        "METADATA Name cuda-ext-sample, the filename's cuda-ext-example",
    ),
}


@pytest.mark.parametrize("fault", list(METADATA_FAULTS))
def test_refuses_metadata_that_disagrees(good_wheel, tmp_path, fault):
    old, new, said = METADATA_FAULTS[fault]
    failure = run_gates_until_refused(_edited(good_wheel, tmp_path, "METADATA", old, new))
    assert failure.gate == "metadata"
    assert said in failure.reason
    assert "pyproject.toml" in failure.fix and "make repair" in failure.fix


def test_refuses_metadata_that_is_no_core_metadata(good_wheel, tmp_path):
    bad = _edited(good_wheel, tmp_path, "METADATA", "Version: 0.1.0", "Version: one")
    failure = run_gates_until_refused(bad)
    assert failure.gate == "metadata"
    assert "METADATA is not valid core metadata: 'one' is invalid for 'version'" in failure.reason
    assert "never edit or rename a built wheel" in failure.fix


def test_refuses_python_file_that_does_not_compile(good_wheel, tmp_path):
    name = "cuda_ext_example/_build_info.py"
    source = zipfile.ZipFile(good_wheel).read(name) + b"def broken(:\n    pass\n"
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, add={name: source}))
    line = source.count(b"\n") - 1
    assert failure.gate == "python-syntax"
    assert f"{name}, line {line}: invalid syntax" in failure.reason
    assert "python -m py_compile" in failure.fix


# ------------------------------------------------- every ELF, by content

STRAY_LIBRARY = """
    #include <dlfcn.h>
    extern char _ZN3c1019UndefinedTensorImpl10_singletonE;
    void *helper(void) { dlopen("libm.so.6", RTLD_NOW);
                         return &_ZN3c1019UndefinedTensorImpl10_singletonE; }
"""


@pytest.mark.parametrize(
    "name",
    [
        "cuda_ext_example/helper.so",  # was refused as "built for one CPython version"
        "cuda_ext_example/helper.abi3.so",  # was "expected one extension .so", a RuntimeError
        "cuda_ext_example/libhelper.dll",
        "cuda_ext_example/libhelper.so.1",  # was "grafted", with the repair excludes as fix
        "cuda_ext_example/data/helper.bin",  # passed every gate
    ],
)
def test_refuses_unexpected_shared_library(good_wheel, tmp_path, name):
    # Built here: this machine's glibc (>= 2.34) binds dlopen to GLIBC_2.34.
    so = compile_so(tmp_path, STRAY_LIBRARY)
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, add={name: so.read_bytes()}))
    assert failure.gate == "unexpected-elf"
    assert failure.reason.startswith(
        f"unexpected shared library {name} in the wheel: a shared library; "
    )
    assert "it needs GLIBC_2.3" in failure.reason and "newer than GLIBC_2.17" in failure.reason
    if tools.TORCH_ABI_AUDIT_RUNS:
        assert "unstable libtorch symbols: c10::UndefinedTensorImpl::_singleton" in failure.reason
    assert f"take {name} out of the package" in failure.fix
    assert "CPython version" not in failure.reason and "repair excludes" not in failure.fix


def test_unexpected_elf_is_named_for_what_it_is(good_wheel, tmp_path):
    # A Python extension module beside the library: refused as what it is.
    so = compile_so(
        tmp_path,
        """
        extern const char *PyUnicode_AsUTF8(void *);
        const char *PyInit_extra(void *o) { return PyUnicode_AsUTF8(o); }
        """,
    )
    name = "cuda_ext_example/extra.abi3.so"
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, add={name: so.read_bytes()}))
    assert failure.gate == "unexpected-elf"
    assert f"{name} in the wheel: a Python extension module (PyInit_extra); it uses the " \
        "CPython ABI (imports PyUnicode_AsUTF8; defines PyInit_extra)" \
        in failure.reason  # fmt: skip


def test_every_elf_is_audited(good_wheel, tmp_path, cfg):
    # Each per-file gate reads every ELF of the wheel, not only the extension.
    so = patchelf(compile_so(tmp_path, STRAY_LIBRARY), "--set-rpath", "/opt/lib")
    bad = repack(good_wheel, tmp_path, add={"cuda_ext_example/helper.bin": so.read_bytes()})
    refusals = {
        "elf-audit": (lambda: release_gates.gate_elf(bad, cfg), "helper.bin needs GLIBC_2.3"),
        "search-path": (
            lambda: elf.gate_search_paths(bad),
            "helper.bin has RUNPATH '/opt/lib'",
        ),
    }
    if tools.TORCH_ABI_AUDIT_RUNS:
        refusals["torch-abi-audit"] = (
            lambda: tools.gate_torch_abi_audit(bad, cfg),
            "helper.bin is refused by torch-abi-audit: unstable libtorch symbols",
        )
    for gate, (run, said) in refusals.items():
        with pytest.raises(release_gates.GateFailure) as exc:
            run()
        assert exc.value.gate == gate
        assert said in exc.value.reason


# ---------------------------------------------------- py3-none: no CPython ABI


@pytest.mark.parametrize(
    ("planted", "said"),
    [
        # The module init of old, left in: a CPython extension module's symbol.
        ("void *PyInit__C(void) { return 0; }\n", "defines PyInit__C"),
        # CPython calls and data: their ABI differs between versions and free-threaded builds.
        (
            "extern const char *PyUnicode_AsUTF8(void *); extern char _Py_NoneStruct;\n"
            "const char *helper(void *o) { return PyUnicode_AsUTF8(&_Py_NoneStruct); }\n",
            "imports PyUnicode_AsUTF8, _Py_NoneStruct",
        ),
    ],
    ids=["module-init", "c-api"],
)
def test_refuses_a_cpython_symbol_in_the_library(good_wheel, tmp_path, planted, said):
    so = compile_so(tmp_path, planted + hooks_but(""))
    failure = run_gates_until_refused(repack(good_wheel, tmp_path, replace_so=so))
    assert failure.gate == "cpython-symbols"
    assert failure.reason.startswith(f"{LIBRARY} uses the CPython ABI ({said})")
    assert "no py3-none wheel may" in failure.reason and "free-threaded" in failure.reason
    assert "keep csrc/ free of Python.h" in failure.fix
    assert "csrc/launch_shape_hooks.cpp" in failure.fix and "ctypes" in failure.fix


@pytest.mark.parametrize(("python", "abi"), [("cp310", "abi3"), ("cp311", "cp311")])
def test_refuses_a_tag_of_one_cpython_abi(good_wheel, tmp_path, python, abi):
    # WHEEL and the filename agree (wheel tags rewrites both, and RECORD): only the tag is wrong.
    shutil.copy(good_wheel, tmp_path / good_wheel.name)
    subprocess.run(
        [sys.executable, "-m", "wheel", "tags", "--remove", "--python-tag", python,
         "--abi-tag", abi, tmp_path / good_wheel.name],
        check=True, capture_output=True,
    )  # fmt: skip
    (bad,) = tmp_path.glob(f"*-{python}-{abi}-*.whl")
    failure = run_gates_until_refused(bad)
    assert failure.gate == "py3-none-tag"
    assert f"are not all py3-none: installers take a wheel tagged ['{python}-{abi}'] only on " \
        "that CPython ABI" in failure.reason  # fmt: skip
    assert "buildtools/wheel_tags.py" in failure.fix and "py_limited_api" in failure.fix


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("cuda_ext_example/_C.abi3.so", True),
        ("cuda_ext_example/_C.cpython-314t-x86_64-linux-gnu.so", True),
        ("cuda_ext_example/_C.so", True),
        ("cuda_ext_example/lib/libcuda_ext_example.so.2", False),
    ],
)
def test_refuses_the_library_under_another_name(good_wheel, tmp_path, name, module):
    library = extension_copy(good_wheel, tmp_path).read_bytes()
    failure = run_gates_until_refused(
        repack(good_wheel, tmp_path, add={name: library}, remove=(LIBRARY,))
    )
    assert failure.gate == "library-name"  # found by content: not a stray library
    assert failure.reason.startswith(f"the library is {name}, not {LIBRARY}, which the loader")
    assert ("takes its name for an extension module's" in failure.reason) == module
    assert "buildtools/build_ext.py names it libcuda_ext_example.so.1" in failure.fix


# ------------------------------------------------ the record against the binary


def _glibc_just_below(good_wheel: Path) -> str:
    with binary_info.extension_in(good_wheel) as so:
        newest = binary_info.newest_version(so, "GLIBC_")
    major, minor = binary_info.version_key(newest)[:2]
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
        void *cee_vector_shape_count(void) { return &_ZN3c1019UndefinedTensorImpl10_singletonE; }
        """
        + hooks_but("cee_vector_shape_count"),
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
        void *cee_vector_shape_count(void *s) { void *h; torch_stream_native_handle(s, &h);
                                                return h; }
        """,
    )
    with pytest.raises(release_gates.GateFailure) as exc:
        tools.gate_torch_abi_audit(repack(good_wheel, tmp_path, replace_so=so), cfg)
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
    assert f"{LIBRARY} asks for an executable stack (PT_GNU_STACK RWE)" in failure.reason
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


def test_good_wheel_has_none_of_these_faults(good_wheel, cfg):
    """The other side of every test above: the fault is what the gate saw."""
    assert wheel_files.zip_entry_faults(good_wheel) == {"duplicate": [], "link": [], "outside": []}
    assert wheel_files.record_problems(good_wheel) == []
    assert wheel_files.build_paths_in(good_wheel) == []
    assert wheel_files.python_syntax_errors(good_wheel) == []
    assert wheel_files.binary_names(good_wheel) == [LIBRARY]
    for check, _ in wheel_metadata.WHEEL_CHECKS:
        assert check(good_wheel) is None
    for check, _ in wheel_metadata.METADATA_CHECKS:
        assert check(good_wheel, cfg) is None
    with zipfile.ZipFile(good_wheel) as zf:
        assert wheel_files.grafted_libraries(zf.namelist()) == []
        data = zf.read(LIBRARY)
    assert binary_info.elf_problem(data) is None
    assert binaries.stack_flags(data) == "RW"
    assert binaries.search_path_tags(data, ("DT_RPATH", "DT_RUNPATH")) == []


def test_a_crashing_tool_is_no_verdict():
    # A tool that crashes on a truncated .so with a traceback must not be answered with
    # the fix for the fault that tool looks for: the wrong fix.
    crash = ["python3", "-c", "raise ValueError('bad ELF offset')"]
    with pytest.raises(release_gates.GateFailure) as exc:
        tools.run_tool("twine-check", crash, "fix the package metadata")
    assert "`python3` crashed reading the wheel (no verdict)" in exc.value.reason
    assert "ValueError: bad ELF offset" in exc.value.reason
    assert "package metadata" not in exc.value.fix
    assert "every ELF is whole" in exc.value.fix


def test_torch_abi_audit_seeing_no_torch_is_no_pass(good_wheel, tmp_path, cfg):
    # Our extension uses torch's shims; a reading with none (an nm that cannot read
    # the ELF gives an empty list) must not pass as clean.
    so = compile_so(tmp_path, hooks_but(""))
    with pytest.raises(release_gates.GateFailure) as exc:
        tools.gate_torch_abi_audit(repack(good_wheel, tmp_path, replace_so=so), cfg)
    assert "it saw no torch symbol at all" in exc.value.reason
