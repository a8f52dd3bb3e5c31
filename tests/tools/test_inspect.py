"""`python -m scripts.inspect` on the built wheel, and the shim-version table."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_ext_example import BUILD_INFO
from scripts.inspect import binary_info, report, shim_versions

ROOT = Path(__file__).resolve().parents[2]
BUILD_INFO_OPS = {op["name"] for op in BUILD_INFO["ops"] if op["broadcasts"]}  # elementwise
LIBRARIES = BUILD_INFO["device_libraries"]  # one per op and dtype: "my_add_float32"
# Each library's op record.
OP_OF_LIBRARY = {f"{op['name']}_{dtype}": op for op in BUILD_INFO["ops"] for dtype in op["dtypes"]}
pytestmark = pytest.mark.wheel


@pytest.fixture(scope="module")
def wheel() -> Path:
    (found,) = (ROOT / "wheelhouse").glob("*.whl")
    return found


def run_inspect(*args) -> str:
    out = io.StringIO()
    assert report.main([str(a) for a in args], out=out) == 0
    return out.getvalue()


def needs(tool: str):
    if binary_info.find_cuda_tool(tool) is None:
        pytest.skip(f"{tool} not available")


def _by_compiler(cuda: str) -> str:
    return " ".join(t for t, c in BUILD_INFO["device_compilers"].items() if c == f"NVRTC {cuda}")


def test_summary(wheel):
    # Read from the fatbin itself: no CUDA tool needed.
    text = run_inspect(wheel)
    assert f"SASS {' '.join(BUILD_INFO['sass_archs'])}" in text
    assert "PTX  sm_120" in text
    assert f"cubins from CUDA 12.0: {_by_compiler('12.0')}" in text
    assert f"cubins from CUDA 12.9: {_by_compiler('12.9').replace(' compute_120', '')}" in text
    assert "PTX ISA 8.8 (sm_120)" in text
    assert "compressed entries: none" in text
    # one fatbin per op and dtype, each with every target
    assert sorted(OP_OF_LIBRARY) == sorted(LIBRARIES)
    assert f"libraries: {len(LIBRARIES)} fatbins in .nv_fatbin, one per op and dtype" in text
    for library in LIBRARIES:
        assert re.search(rf"^  {library} +\d+ bytes  every target above$", text, re.M), library
    assert "DT_NEEDED: libtorch_cpu.so" in text
    newest = re.search(r"newest GLIBC: GLIBC_([\d.]+)", text).group(1)
    assert binary_info.version_key(newest) <= (2, 17), newest
    assert "newest GLIBCXX: none" in text
    assert "<=2.9  aoti_torch_check" in text
    assert " torch_library_impl" not in text  # 2.10's: looked up at run time, not linked
    assert "=> needs torch >= 2.9" in text


def test_symbols(wheel):
    text = run_inspect(wheel, "--symbols")
    assert "defined dynamic symbols (T): 6\n  T cee_device_library" in text
    assert "  T cee_force_launch_shape" in text
    assert "  T cee_vector_shape_count" in text
    assert "  U aoti_torch_check" in text
    assert "  U Py" not in text  # no CPython symbol


def _loads_summary(text: str, dump: str) -> dict[str, dict[str, tuple[int, int]]]:
    """library -> demangled kernel name -> (16-byte, 8-byte) loads, from the inspect
    summary."""
    summary = text.split(f"{dump} loads per kernel (summed over archs): 16-byte, 8-byte\n")[1]
    libraries: dict[str, dict[str, tuple[int, int]]] = {}
    for line in summary.splitlines():
        if line.startswith(" library "):
            counts = libraries.setdefault(line.split()[1].rstrip(":"), {})
        elif re.match(r"  +\d+ +\d+  ", line):  # a kernel of the library: its two counts
            wide, narrow, name = line.split(maxsplit=2)
            counts[name] = (int(wide), int(narrow))
        else:
            break
    return libraries


def _merged(libraries: dict[str, dict[str, tuple[int, int]]]) -> dict[str, tuple[int, int]]:
    """Every kernel once: one two libraries share (Add's simple kernel) loads alike in both."""
    merged: dict[str, tuple[int, int]] = {}
    for counts in libraries.values():
        for name, loads in counts.items():
            assert merged.setdefault(name, loads) == loads, name
    return merged


def test_each_library_has_its_own_kernels(wheel):
    # One fatbin per op and dtype, holding those kernels only: my_add's the simple and
    # strided Add kernels, my_fast_add's the vectorized ones too, my_square's the Square ones.
    libraries = _loads_summary(run_inspect(wheel, "--ptx"), "PTX")
    assert list(libraries) == LIBRARIES

    def kind(name: str) -> str:  # "void cee::elementwise_simple<cee_rule_add::Signature, ...>"
        return f"{name.split('<')[0].split('::')[-1]} {name.split('cee_rule_')[1].split('::')[0]}"

    elementwise = {n for n in libraries if OP_OF_LIBRARY[n]["name"] in BUILD_INFO_OPS}
    kinds = {library: {kind(n) for n in libraries[library]} for library in elementwise}
    for dtype in ("float32", "int8"):
        assert kinds[f"my_add_{dtype}"] == {"elementwise_simple add", "elementwise_strided add"}
        assert kinds[f"my_fast_add_{dtype}"] == {
            "elementwise_simple add", "elementwise_strided add", "elementwise_vectorized add"
        }  # fmt: skip
    assert kinds["my_square_bfloat16"] == {
        "elementwise_simple square", "elementwise_strided square", "elementwise_vectorized square"
    }  # fmt: skip
    # each library's kernels are of its own dtype (PTX's demangled names: float, double, ...)
    assert all("float>" in n or "float," in n for n in libraries["my_add_float32"])
    assert not any("double" in n for n in libraries["my_add_float32"])
    for library, op in OP_OF_LIBRARY.items():  # a library: its own folder's kernels
        assert libraries[library], library
        assert all(f"cee_rule_{op['folder']}::" in n for n in libraries[library]), library


def _inputs_of(name: str) -> int:
    """The inputs of the op whose kernel `name` is (cee_rule_<folder>::Signature)."""
    folder = name.split("cee_rule_")[1].split("::")[0]
    op = next(op for op in BUILD_INFO["ops"] if op["folder"] == folder)
    return sum(a["type"] == "Tensor" for a in op["arguments"])


def _expected_instances(kind: str) -> int:
    """How many instances of a kernel the build compiles (buildtools/device_code.py)."""
    from buildtools import declarations, device_code

    found = device_code.instances(declarations.load())
    return len({k.expression for k in found if f"elementwise_{kind}<" in k.expression})


def test_ptx_shows_vectorized_loads(wheel):
    text = run_inspect(wheel, "--ptx")
    counts = _merged(_loads_summary(text, "PTX"))
    vectorized = {name: c for name, c in counts.items() if "elementwise_vectorized<" in name}
    # cee::elementwise_vectorized<Signature, T, access bytes, block, accesses per thread, load>
    wide = {n: c for n, c in vectorized.items() if re.search(r", 16, \d+, \d+, ", n)}
    narrow = {n: c for n, c in vectorized.items() if re.search(r", 8, \d+, \d+, ", n)}
    simple = [c for name, c in counts.items() if "elementwise_simple<" in name]
    assert len(wide) + len(narrow) == len(vectorized) == _expected_instances("vectorized")
    assert len(simple) == _expected_instances("simple")
    for name, (w, _) in wide.items():  # one 16-byte load per input
        assert w >= _inputs_of(name), name
    for name, (w, n) in narrow.items():  # 8-byte loads
        assert n >= _inputs_of(name) and w == 0, name
    assert all(w == 0 for w, _ in simple)
    assert "ld.global.nc.v4" in text


@pytest.mark.slow  # nvdisasm over every cubin: about a minute on two cores
def test_sass_shows_ldg_e_128(wheel):
    needs("nvdisasm")
    text = run_inspect(wheel, "--sass")
    # nvdisasm 13 refuses sm_50..sm_70 (dropped by CUDA 13).
    skipped = set(re.findall(r"^// (sm_\d+) \(\w+\): not disassembled", text, re.M))
    assert skipped <= {"sm_50", "sm_60", "sm_70"}, skipped
    for library in LIBRARIES:  # each library's cubins, named
        assert f"// sm_90 ({library})\n" in text and f"// sm_75 ({library})\n" in text
    n_arch = len(BUILD_INFO["sass_archs"]) - len(skipped)
    counts = _merged(_loads_summary(text, "SASS"))
    vectorized = {name: c for name, c in counts.items() if "elementwise_vectorized<" in name}
    assert len(vectorized) == _expected_instances("vectorized")
    for name, (wide, narrow) in vectorized.items():
        if re.search(r", 16, \d+, \d+, ", name):
            assert wide >= _inputs_of(name) * n_arch, name
        else:
            assert narrow >= _inputs_of(name) * n_arch, name


def test_missing_nvdisasm_is_said_clearly(wheel, monkeypatch, capsys):
    monkeypatch.setattr(binary_info, "find_cuda_tool", lambda name: None)
    out = io.StringIO()
    # the rest of the report comes, and the exit status says the SASS asked for did not
    assert report.main([str(wheel), "--sass"], out=out) == 1
    assert capsys.readouterr().err == "inspect: no sass dump (see the line above)\n"
    text = out.getvalue()
    assert "sass: unavailable: SASS needs nvdisasm: pip install nvidia-cuda-nvdisasm" in text
    assert "cubins from CUDA 12.0" in text  # the listing needs no tool


def test_shim_versions_parser():
    header = """
    AOTI_TORCH_EXPORT AOTITorchError old_shim(int x);
    #if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_10_0
    AOTI_TORCH_EXPORT AOTITorchError
    ten_shim(int x);
    #ifdef USE_CUDA
    AOTI_TORCH_EXPORT int ten_cuda_shim(void);
    #endif
    #endif
    #if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_13_0
    AOTI_TORCH_EXPORT void* thirteen_shim(void);
    #endif
    AOTI_TORCH_EXPORT int another_old(void);
    """
    versions = shim_versions._versions_in(header)
    assert versions == {
        "old_shim": (2, 9),
        "ten_shim": (2, 10),
        "ten_cuda_shim": (2, 10),
        "thirteen_shim": (2, 13),
        "another_old": (2, 9),
    }


def test_shim_versions_of_real_headers():
    include = report.torch_include()
    versions = shim_versions.shim_versions(include)
    assert versions["aoti_torch_check"] == (2, 9)
    assert versions["torch_call_dispatcher"] == (2, 10)
    import torch

    if tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 13):
        assert versions["torch_stream_native_handle"] == (2, 13)


def test_build_record_is_real():
    assert len(BUILD_INFO["git_commit"]) == 40 or BUILD_INFO["git_commit"].startswith("unknown")
    from datetime import datetime

    assert datetime.fromisoformat(BUILD_INFO["build_time_utc"]).year >= 2026
    assert isinstance(BUILD_INFO["git_dirty"], bool)


@pytest.mark.parametrize("what", ["a text file", "a directory", "a truncated library"])
def test_what_is_not_a_binary_is_refused_in_one_line(what, wheel, tmp_path):
    """No tool's traceback or 'Memory allocation failure': one line naming the problem."""
    if what == "a text file":
        path, reason = ROOT / "README.md", "README.md is neither a wheel (.whl) nor an ELF"
    elif what == "a directory":
        path, reason = wheel.parent, f"{wheel.parent} is a directory: name one of ['{wheel.name}"
    else:
        with binary_info.extension_in(wheel) as so:
            path = tmp_path / so.name
            path.write_bytes(so.read_bytes()[:100_000])
        reason = f"{path.name} is not a readable ELF shared object (truncated:"
    run = subprocess.run(
        [sys.executable, "-m", "scripts.inspect", path], capture_output=True, text=True, cwd=ROOT
    )
    assert run.returncode == 1
    assert reason in run.stderr, run.stderr
    for noise in ("Traceback", "fatal", "Memory allocation"):
        assert noise not in run.stdout + run.stderr, run.stdout + run.stderr


def test_missing_pyelftools_is_said_in_one_line(wheel):
    """A GPU machine's Python may lack pyelftools, inspect's ELF reader: one line names the
    fix, no traceback."""
    hide = "import sys; sys.modules['elftools'] = None; import runpy; "
    code = hide + "runpy.run_module('scripts.inspect', run_name='__main__')"
    run = subprocess.run(
        [sys.executable, "-c", code, str(wheel)], capture_output=True, text=True, cwd=ROOT
    )
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1, run.stderr
    assert "needs pyelftools: pip install pyelftools" in run.stderr


def test_a_closed_pipe_ends_inspect_quietly(wheel):
    """`inspect --symbols | head -1`: the reader leaves early; no 'Broken pipe' error."""
    run = subprocess.run(
        f"{sys.executable} -m scripts.inspect --symbols {wheel} | head -1",
        shell=True, capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert run.stdout.startswith(str(wheel)), run.stdout
    assert run.stderr == "", run.stderr


def test_a_library_that_is_no_torch_extension_says_it_calls_no_shim():
    # It ended in "torch shims: 0, oldest torch that provides each:" and an empty list.
    libz = next((p for p in Path("/usr/lib").rglob("libz.so.1")), None)
    if libz is None:
        pytest.skip("no libz.so.1 here")
    text = run_inspect(libz)
    assert "has no .nv_fatbin section" in text
    assert "torch shims: none (it calls no torch stable-ABI shim)" in text
    assert "oldest torch" not in text
