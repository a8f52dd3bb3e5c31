"""The device-code cache (buildtools/device_cache.py): a program compiled once per content is
given back byte for byte; a damaged entry is found, compiled again and replaced; two builds
filling one cache at once both succeed; the key follows every header a source reaches, and
nothing else, wherever the include folders are. Every test has a cache of its own under
tmp_path (CEE_DEVICE_CODE_CACHE), never the user's."""

from __future__ import annotations

import hashlib
import multiprocessing
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from buildtools import declarations, device_cache, device_code, nvrtc

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = "my_square_float32"


@pytest.fixture(scope="module")
def compiler() -> nvrtc.Compiler:
    """The build's NVRTC 12.9 (the build requirement in site-packages); never a download."""
    try:
        found = nvrtc.Nvrtc()
    except (OSError, nvrtc.DeviceCodeError) as exc:
        pytest.skip(f"needs the build's NVRTC (requirements/build.in): {exc}")
    if found.version() != (12, 9):
        pytest.skip(f"needs NVRTC 12.9 installed, found {found.version()}")
    return nvrtc.compiler_for("12.9")


def declared(tmp_path_factory, folders: tuple[str, ...], dtypes: tuple[str, ...]):
    """The ops of some folders of ops/, in some dtypes: few programs, each about a second."""
    ops = tmp_path_factory.mktemp("declared") / "ops"
    for folder in folders:
        shutil.copytree(ROOT / "ops" / folder, ops / folder)
    decl = declarations.load(ops)
    return replace(decl, ops=tuple(replace(op, dtypes=dtypes) for op in decl.ops))


@pytest.fixture(scope="module")
def one_program(tmp_path_factory) -> declarations.Declarations:
    """my_square in float32 alone: one NVRTC program for sm_90."""
    return declared(tmp_path_factory, ("square",), ("float32",))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "device-code-cache"
    monkeypatch.setenv(device_cache.CACHE_ENV, str(root))
    return root


def compile_sm_90(decl, compiler):
    """(images, lowered names, NVRTC seconds) of decl's programs for sm_90."""
    return device_code.compile_kernels(decl, {"sm_90": compiler}, jobs=1)


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_the_cache_gives_back_what_a_fresh_compile_makes(one_program, compiler, cache,
                                                         monkeypatch, capsys):  # fmt: skip
    monkeypatch.setenv(device_cache.CACHE_ENV, "off")
    fresh = compile_sm_90(one_program, compiler)
    assert not cache.exists()  # off: no cache read or written
    monkeypatch.setenv(device_cache.CACHE_ENV, str(cache))
    capsys.readouterr()

    stored = compile_sm_90(one_program, compiler)
    assert f"1 NVRTC programs, 0 from the cache {cache}, 1 compiled" in capsys.readouterr().out
    (entry,) = entries(cache)
    assert entry.parent.name == entry.name[:2] and len(entry.name) == 64

    again = compile_sm_90(one_program, compiler)
    assert f"1 NVRTC programs, 1 from the cache {cache}, 0 compiled" in capsys.readouterr().out
    assert again[0] == stored[0] == fresh[0]  # the same bytes
    assert again[1] == stored[1] == fresh[1]  # the same lowered names
    assert again[0][LIBRARY]["sm_90"][:4] == b"\x7fELF"
    assert set(again[1]) == {k.expression for k in device_code.instances(one_program)}
    assert stored[2][LIBRARY] > 0 and again[2] == {LIBRARY: 0.0}  # no NVRTC time from the cache


DAMAGE = {
    "truncated": lambda data: data[: len(data) // 2],
    "cut in its header": lambda data: data[: len(device_cache.MAGIC) + 4],
    "empty": lambda data: b"",
    "an image byte flipped": lambda data: data[:-1] + bytes([data[-1] ^ 0xFF]),
    "a metadata byte flipped": lambda data: (
        data[: len(device_cache.MAGIC) + 10] + b"\xff" + data[len(device_cache.MAGIC) + 11 :]
    ),
    "another format": lambda data: b"cee-device-code-0\n" + data[len(device_cache.MAGIC) :],
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_recompiled_and_replaced(one_program, compiler, cache, capsys,
                                                    damage):  # fmt: skip
    first = compile_sm_90(one_program, compiler)
    (entry,) = entries(cache)
    whole = entry.read_bytes()
    entry.write_bytes(DAMAGE[damage](whole))

    reader = device_cache.DeviceCodeCache(cache)
    assert reader.get(entry.name) is None
    assert (reader.hits, reader.misses, reader.damaged) == (0, 1, 1)
    capsys.readouterr()

    again = compile_sm_90(one_program, compiler)
    out = capsys.readouterr().out
    assert f"0 from the cache {cache}, 1 compiled, 1 damaged entries rebuilt" in out
    assert again[:2] == first[:2]
    assert entries(cache) == [entry]  # replaced in place, no temporary file left
    assert entry.read_bytes() == whole
    reader = device_cache.DeviceCodeCache(cache)
    assert reader.get(entry.name) == (first[0][LIBRARY]["sm_90"], first[1])
    assert (reader.hits, reader.damaged) == (1, 0)


def _build_at_once(decl, compiler, barrier, results) -> None:
    """One of two builds (a forked process): waits for the other, then compiles."""
    barrier.wait(timeout=120)
    images, lowered, _ = compile_sm_90(decl, compiler)
    digests = {lib: hashlib.sha256(t["sm_90"]).hexdigest() for lib, t in images.items()}
    results.put((digests, lowered))


def test_two_builds_filling_one_cache_at_once_both_succeed(tmp_path_factory, compiler, cache,
                                                           capsys):  # fmt: skip
    # Six programs (my_add, my_fast_add and my_square in two dtypes), the same in both
    # processes, started together: each entry is written whole and renamed into place.
    decl = declared(tmp_path_factory, ("add", "square"), ("float32", "float64"))
    context = multiprocessing.get_context("fork")  # as the build's own NVRTC workers
    barrier, results = context.Barrier(2), context.Queue()
    builds = [
        context.Process(target=_build_at_once, args=(decl, compiler, barrier, results))
        for _ in range(2)
    ]
    for build in builds:
        build.start()
    found = [results.get(timeout=300) for _ in builds]
    for build in builds:
        build.join(timeout=60)
        assert build.exitcode == 0
    assert found[0] == found[1]
    assert len(found[0][0]) == 6

    assert len(entries(cache)) == 6  # one entry per program, each whole, no temporary files
    reader = device_cache.DeviceCodeCache(cache)
    for entry in entries(cache):
        assert reader.get(entry.name) is not None, entry
    capsys.readouterr()
    images, lowered, _ = compile_sm_90(decl, compiler)
    assert "6 NVRTC programs, 6 from the cache" in capsys.readouterr().out
    assert {lib: hashlib.sha256(t["sm_90"]).hexdigest() for lib, t in images.items()} == found[0][0]
    assert lowered == found[0][1]


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def test_the_key_follows_the_headers_a_source_reaches_and_not_their_place(tmp_path):
    include = tmp_path / "checkout" / "include"
    write(include, {
        "top.h": '#include "sub/middle.h"\n#include <cuda_fp16.h>\n',
        "sub/middle.h": '#if 0\n#include "leaf.h"\n#endif\n',  # found next to middle.h
        "sub/leaf.h": "int leaf;\n",
        "unrelated.h": "int unrelated;\n",
    })  # fmt: skip
    source = '#include "top.h"\n__global__ void k() {}\n'

    def key(folder: Path) -> str:
        headers = device_cache.Headers([folder]).digest(source)
        return device_cache.program_key("NVRTC 12.9 0123", ["--std=c++17"], "sm_90", source,
                                        ("k",), headers)  # fmt: skip

    before = key(include)
    (include / "unrelated.h").write_text("int unrelated = 2;\n")
    assert key(include) == before  # a header the source cannot reach
    (include / "sub" / "leaf.h").write_text("int leaf = 2;\n")
    edited = key(include)
    assert edited != before  # two includes deep (under an #if: counted all the same)
    (include / "top.h").write_text('#include "sub/middle.h"\n#include <cuda_bf16.h>\n')
    assert key(include) != edited  # another include, here one of the compiler's own
    (include / "top.h").write_text('#include "sub/middle.h"\n#include <cuda_fp16.h>\n')
    assert key(include) == edited

    elsewhere = tmp_path / "another" / "clone" / "include"
    shutil.copytree(include, elsewhere)
    assert key(elsewhere) == edited  # the same contents elsewhere: the same key


def test_a_moved_checkout_hits_and_only_an_edit_the_program_reaches_misses(
    one_program, compiler, cache, tmp_path, monkeypatch, capsys
):
    compile_sm_90(one_program, compiler)  # from this checkout's csrc/ and ops/
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "csrc", clone / "csrc")
    shutil.copytree(ROOT / "ops" / "square", clone / "ops" / "square")
    monkeypatch.setattr(device_code, "CSRC", clone / "csrc")
    monkeypatch.setattr(device_code, "OPS_DIR", clone / "ops")

    def compiled() -> str:
        capsys.readouterr()
        compile_sm_90(one_program, compiler)
        out = capsys.readouterr().out
        return out[out.index("1 NVRTC programs, ") :].split(", ", 2)[1]

    assert compiled() == f"1 from the cache {cache}"  # another place, the same contents
    with (clone / "csrc" / "launcher.cpp").open("a") as f:
        f.write("// host code: no NVRTC program includes it\n")
    assert compiled() == f"1 from the cache {cache}"
    math = clone / "csrc" / "element_math.h"
    math.write_text(math.read_text().replace("//", "// reworded:", 1))  # a comment, same lines
    assert compiled() == f"1 from the cache {cache}"
    with math.open("a") as f:
        f.write("#define CEE_REACHED_THROUGH_THE_RULE 1\n")  # code reached through rule.h
    assert compiled() == f"0 from the cache {cache}"
    assert compiled() == f"1 from the cache {cache}"  # and stored under its new key
    assert len(entries(cache)) == 2


def test_where_the_cache_lives(tmp_path, monkeypatch):
    monkeypatch.setenv(device_cache.CACHE_ENV, "off")
    assert device_cache.default_root() is None
    monkeypatch.setenv(device_cache.CACHE_ENV, "OFF")
    assert device_cache.default_root() is None
    monkeypatch.setenv(device_cache.CACHE_ENV, str(tmp_path / "named"))
    assert device_cache.default_root() == tmp_path / "named"
    monkeypatch.delenv(device_cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert device_cache.default_root() == tmp_path / "xdg" / "cuda_ext_example" / "device-code"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert device_cache.default_root() == (
        tmp_path / "home" / ".cache" / "cuda_ext_example" / "device-code"
    )
    assert not any(tmp_path.iterdir())  # naming the folder makes nothing


def test_an_entry_reads_back_and_a_missing_one_is_a_miss(tmp_path):
    cache = device_cache.DeviceCodeCache(tmp_path / "cache")
    key = hashlib.sha256(b"a program").hexdigest()
    assert cache.get(key) is None
    cache.put(key, b"\x7fELF image", {"k<float>": "_Z1kIfEvv"})
    assert cache.get(key) == (b"\x7fELF image", {"k<float>": "_Z1kIfEvv"})
    assert (cache.hits, cache.misses, cache.damaged) == (1, 1, 0)
    assert cache.summary() == f"1 from the cache {tmp_path / 'cache'}, 1 compiled"


def test_a_cache_that_cannot_be_written_is_skipped(tmp_path):
    (tmp_path / "a file").write_text("")
    cache = device_cache.DeviceCodeCache(tmp_path / "a file" / "cache")  # no folder there
    key = hashlib.sha256(b"a program").hexdigest()
    cache.put(key, b"image", {})  # no error: the build goes on without the cache
    assert cache.get(key) is None and cache.misses == 1
