"""The release pipeline: the whole path against a real local index, and the gates
refusing each kind of bad wheel before upload (with the reason)."""

from __future__ import annotations

import platform
import shutil
import subprocess
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from buildtools import config
from cuda_ext_example import BUILD_INFO
from scripts.inspect import binary_info
from scripts.release import gates as release_gates
from scripts.release import pipeline as release
from scripts.release.local_index import local_index
from scripts.release.simple_index import project_files
from tests.wheel_surgery import repack, run_gates_until_refused

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.release
CC = shutil.which("cc") or shutil.which("gcc")


def compile_so(tmp: Path, source: str, extra: list[str] | None = None) -> Path:
    if CC is None:
        pytest.skip("needs a C compiler")
    src = tmp / "bad.c"
    src.write_text(textwrap.dedent(source))
    so = tmp / "bad.so"
    subprocess.run([CC, "-shared", "-fPIC", "-O1", src, "-o", so, *(extra or [])], check=True)
    return so


def test_good_wheel_passes_every_gate(good_wheel):
    passed = []
    release_gates.run_gates(good_wheel, log=lambda msg, **_: passed.append(msg))
    everything = release_gates.all_gates(config.load(dev_spec=""), Path("unused"))
    assert [m for m in passed if "gate ok" in m] == [f"  gate ok: {n}" for n, _ in everything]
    assert len(everything) >= 20


def test_refuses_too_new_glibc(good_wheel, tmp_path, cfg):
    # Built with this machine's gcc/glibc (>= 2.34), dlopen binds to GLIBC_2.34.
    so = compile_so(
        tmp_path,
        """
        #include <dlfcn.h>
        void *cee_vector_shape_count(void) { return dlopen("libm.so.6", RTLD_NOW); }
    """,
    )
    with pytest.raises(release_gates.GateFailure, match=r"needs GLIBC_2\.(3[4-9]|[4-9]\d)") as exc:
        release_gates.gate_elf(repack(good_wheel, tmp_path, replace_so=so), cfg)
    assert "newer than GLIBC_2.17" in exc.value.reason


@pytest.mark.parametrize(
    "grafted",
    [
        "cuda_ext_example.libs/libcudart-9f1c2b3a.so.13",
        "cuda_ext_example.libs/libtorch_cpu-1a2b.so",
    ],
)
def test_refuses_grafted_library(good_wheel, tmp_path, grafted):
    bad = repack(good_wheel, tmp_path, add={grafted: b"\x7fELF not really"})
    failure = run_gates_until_refused(bad)  # the pipeline as a whole stops, for this
    assert failure.gate == "grafted"
    assert grafted in failure.reason


def device_code_so(tmp: Path, targets: dict[str, str], compress: bool = False) -> Path:
    """A .so whose .nv_fatbin holds our kernels for other targets ({"sm_90": "12.9"}),
    from NVRTC as the build does, packed uncompressed unless `compress`."""
    from buildtools import build_ext, declarations

    if CC is None:
        pytest.skip("needs a C compiler")
    decl = declarations.load()
    code = build_ext.write_device_code(tmp / "dc", decl, targets, "test", compress=compress)
    assert code.compilers == {t: f"NVRTC {c}" for t, c in targets.items()}
    so = tmp / "device_code.so"
    subprocess.run([CC, "-shared", tmp / "dc" / "device_code.S", "-o", so], check=True)
    return so


def extension_bytes(wheel: Path) -> bytes:
    with binary_info.extension_in(wheel) as so:
        return so.read_bytes()


def test_refuses_missing_sass_and_ptx(good_wheel, tmp_path, cfg):
    so = device_code_so(tmp_path, {"sm_80": "12.0"})
    with pytest.raises(release_gates.GateFailure, match="missing SASS") as exc:
        release_gates.gate_device_code(repack(good_wheel, tmp_path, replace_so=so), cfg)
    assert "sm_90" in exc.value.reason and "PTX []" in exc.value.reason


def test_refuses_ptx_newer_than_cuda_12(good_wheel, tmp_path, cfg):
    # The same wheel with one library's PTX claiming ISA 9.0 (CUDA 13): a 525-579 driver
    # cannot JIT it. One PTX per library (op and dtype, a fatbin each): the first is patched.
    data = extension_bytes(good_wheel)
    assert data.count(b".version 8.8") == len(BUILD_INFO["device_libraries"])
    patched = tmp_path / "ptx90.so"
    patched.write_bytes(data.replace(b".version 8.8", b".version 9.0", 1))
    with pytest.raises(
        release_gates.GateFailure, match=r"PTX ISA newer than 8\.8: sm_120: 9\.0"
    ) as exc:
        release_gates.gate_cuda12_device_code(repack(good_wheel, tmp_path, replace_so=patched), cfg)
    first = BUILD_INFO["device_libraries"][0]
    assert f"(in the fatbins of {first})" in exc.value.reason


def test_refuses_cubin_from_cuda_13(good_wheel, tmp_path, cfg):
    # What the previous build shipped: device code from nvcc 13, which needs driver >= 580.
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("needs a CUDA 13 nvcc to make a CUDA 13 cubin")
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float *x) { x[threadIdx.x] += 1; }\n')
    so = tmp_path / "cuda13.so"
    subprocess.run(
        [nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=sm_90",
         src, "-o", so],
        check=True,
    )  # fmt: skip
    refused = r"cubins not from their declared CUDA: sm_90: 13\.\d \(declared sm_90: 12\.0\)"
    with pytest.raises(release_gates.GateFailure, match=refused) as exc:
        release_gates.gate_cuda12_device_code(repack(good_wheel, tmp_path, replace_so=so), cfg)
    assert ">= 525.60.13" in exc.value.reason


def test_refuses_cubin_from_another_cuda_12(good_wheel, tmp_path, cfg):
    # sm_80 is declared for NVRTC 12.0: the same kernels from NVRTC 12.9 are refused (and
    # a 12.0 sm_120 could not exist: 12.0 does not know it). A real 12.9 cubin, compiled
    # here, read back from the .so as the gate reads the wheel.
    assert cfg.sass_cuda["80"] == "12.0" and cfg.sass_cuda["120"] == "12.9"
    so = device_code_so(tmp_path, {"sm_80": "12.9", "sm_120": "12.9"})
    with pytest.raises(release_gates.GateFailure, match=r"sm_80: 12\.9 \(declared sm_80: 12\.0\)"):
        release_gates.gate_cuda12_device_code(repack(good_wheel, tmp_path, replace_so=so), cfg)
    good = device_code_so(tmp_path / "good", {"sm_80": "12.0", "sm_120": "12.9"})
    release_gates.gate_cuda12_device_code(
        repack(good_wheel, tmp_path / "good", replace_so=good), cfg
    )


def test_refuses_compressed_fatbin(good_wheel, tmp_path, cfg):
    # nvFatbin -compress=true -compress-all: each entry gets flag 0x2000 and its compressed
    # size; a driver < 550.54.14 cannot load it. The gate reads the flag from the .so.
    so = device_code_so(tmp_path, {"sm_90": "12.0"}, compress=True)
    with pytest.raises(release_gates.GateFailure, match="compressed fatbin entries") as exc:
        release_gates.gate_uncompressed_fatbin(repack(good_wheel, tmp_path, replace_so=so), cfg)
    assert "sass sm_90" in exc.value.reason and "550.54.14" in exc.value.reason
    release_gates.gate_uncompressed_fatbin(good_wheel, cfg)  # the real wheel passes


def test_refuses_dev_build(good_wheel, tmp_path):
    # make wheel ARCHS=90 writes dev_build: true into the record; the gate reads the wheel's.
    import json

    record = release_gates.read_build_record(good_wheel)
    assert record["dev_build"] is False
    record.update(dev_build=True, sass_archs=["sm_90"], ptx_arch=None)
    name = "cuda_ext_example/_build_info.json"
    bad = repack(good_wheel, tmp_path, add={name: json.dumps(record).encode()})
    with pytest.raises(release_gates.GateFailure, match=r"dev build for sm_90 only") as exc:
        release_gates.run_gates(bad, log=lambda *a, **k: None)  # the first gate stops it
    assert exc.value.gate == "release-build"
    assert "rebuild without ARCHS: make wheel" in str(exc.value)


def test_refuses_shim_newer_than_target(good_wheel, tmp_path, cfg, torch_include):
    # torch_stream_native_handle is a torch 2.13 shim: a 2.10 wheel must not import it.
    so = compile_so(
        tmp_path,
        """
        extern int torch_stream_native_handle(void *, void **);
        extern void aoti_torch_check(int, const char *, const char *, unsigned, const char *);
        void *cee_vector_shape_count(void *s) { void *h; aoti_torch_check(1, 0, 0, 0, 0);
                                                torch_stream_native_handle(s, &h); return h; }
    """,
    )
    with pytest.raises(
        release_gates.GateFailure, match=r"torch_stream_native_handle \(torch 2\.13\)"
    ):
        release_gates.gate_torch_shims(
            repack(good_wheel, tmp_path, replace_so=so), cfg, torch_include
        )


def test_refuses_unknown_torch_symbol(good_wheel, tmp_path, cfg, torch_include):
    so = compile_so(
        tmp_path,
        """
        extern int torch_made_up_shim(void);
        int cee_vector_shape_count(void) { return torch_made_up_shim(); }
    """,
    )
    with pytest.raises(release_gates.GateFailure, match="torch_made_up_shim"):
        release_gates.gate_torch_shims(
            repack(good_wheel, tmp_path, replace_so=so), cfg, torch_include
        )


@pytest.mark.parametrize(
    ("glibc", "tag"),
    [("2.17", "manylinux2014"), ("2.12", "manylinux2010"), ("2.28", "manylinux_2_28")],
)
def test_platform_tag_comes_from_the_glibc_floor(cfg, glibc, tag):
    for arch in ("x86_64", "aarch64"):
        assert replace(cfg, glibc=glibc).manylinux_tag(arch) == f"{tag}_{arch}"


def test_pyproject_floor_is_manylinux2014(cfg):
    # What README and the wheel names promise; a new floor is a deliberate change of both.
    assert cfg.glibc == "2.17" and cfg.manylinux_tag("aarch64") == "manylinux2014_aarch64"


@pytest.mark.parametrize(("glibc", "tag"), [("2.17", "manylinux2014"), ("2.28", "manylinux_2_28")])
def test_repair_targets_the_glibc_floor(cfg, monkeypatch, tmp_path, glibc, tag):
    arch = platform.machine()
    monkeypatch.setattr(config, "load", lambda *args, **kwargs: replace(cfg, glibc=glibc))
    monkeypatch.setattr(release, "wheel_arch", lambda wheel: arch)
    calls = []

    def fake_run(cmd, fix, **kwargs):
        calls.append((cmd, fix))
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / f"w-{arch}.whl").touch()

    monkeypatch.setattr(release, "run", fake_run)
    release.auditwheel_repair(tmp_path / "w.whl", tmp_path / "out")
    ((cmd, fix),) = calls
    assert cmd[cmd.index("--plat") + 1] == f"{tag}_{arch}"
    assert f"{tag}_{arch} does not allow" in fix and f"glibc {glibc}" in fix


def test_py3_none_gate_wants_the_floors_tag(good_wheel, cfg):
    # The repaired wheel is manylinux2014: a floor of 2.28 would want another tag.
    release_gates.gate_py3_none_tag(good_wheel, cfg)
    with pytest.raises(release_gates.GateFailure, match="do not include py3-none-manylinux_2_28_"):
        release_gates.gate_py3_none_tag(good_wheel, replace(cfg, glibc="2.28"))


def test_refuses_reupload_of_existing_version(good_wheel, tmp_path):
    env = dict(release.os.environ, TWINE_USERNAME="local", TWINE_PASSWORD="local")
    with local_index(tmp_path / "index", tmp_path / "server.log") as url:
        release.refuse_existing(url + "simple/", [good_wheel])  # empty index: fine
        release.upload(["--repository-url", url], [good_wheel], env)
        assert good_wheel.name in project_files(url + "simple/", "cuda_ext_example")
        with pytest.raises(release.StepFailure, match=r"(?s)already on .*bump \[project\] version"):
            release.refuse_existing(url + "simple/", [good_wheel])
    assert (tmp_path / "index" / good_wheel.name).exists()  # nothing lost


def test_simple_page_reader(tmp_path):
    # One reader for every index: PEP 503 name normalization, relative links made absolute
    # without their hash fragment, attributes and entities of PyPI's pages, 404 = nothing.
    import http.server
    import threading
    from functools import partial

    page = tmp_path / "simple" / "cuda-ext-example" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(
        "<!DOCTYPE html><html><body>\n"
        '<a href="../../packages/cuda_ext_example-0.1.0.tar.gz#sha256=00ff">'
        "cuda_ext_example-0.1.0.tar.gz</a><br>\n"
        '<a data-requires-python="&gt;=3.10" '
        "href='https://files.example/cuda_ext_example-0.1.0-py3-none-x.whl#sha256=11'>\n"
        "  cuda_ext_example-0.1.0-py3-none-x.whl\n</a>\n</body></html>\n"
    )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = partial(Quiet, directory=str(tmp_path))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            base = f"http://127.0.0.1:{server.server_address[1]}/simple"
            assert project_files(base, "Cuda_Ext.Example") == {
                "cuda_ext_example-0.1.0.tar.gz": f"http://127.0.0.1:{server.server_address[1]}"
                "/packages/cuda_ext_example-0.1.0.tar.gz",
                "cuda_ext_example-0.1.0-py3-none-x.whl": (
                    "https://files.example/cuda_ext_example-0.1.0-py3-none-x.whl"
                ),
            }
            assert project_files(base + "/", "no_such_project") == {}
        finally:
            server.shutdown()


def test_verify_served_passes_the_served_bytes_and_names_a_changed_file(tmp_path):
    # What the release's last step and `scripts.release verify` decide by: each file of
    # SHA256SUMS downloaded from a real index and hashed.
    packages = tmp_path / "packages"
    packages.mkdir()
    name = "cuda_ext_example-0.1.0-py3-none-any.whl"
    (packages / name).write_bytes(b"the bytes that were built")
    sums = tmp_path / "SHA256SUMS"
    with local_index(packages, tmp_path / "index.log") as url:
        subprocess.run(["sha256sum", name], cwd=packages, stdout=sums.open("w"), check=True)
        assert release.verify_served(url + "simple/", release.read_sha256sums(sums)) == []
        (packages / name).write_bytes(b"bytes someone changed on the index")
        problems = release.verify_served(url + "simple/", release.read_sha256sums(sums))
        assert len(problems) == 1 and problems[0].startswith(f"{name}: the index serves sha256")
        missing = {"cuda_ext_example-0.2.0.tar.gz": "0" * 64}
        assert release.verify_served(url + "simple/", missing) == [
            "cuda_ext_example-0.2.0.tar.gz: not on the index"
        ]
