"""A content-addressed cache of NVRTC's output: each program is compiled once per content.

The key of a program is a hash of everything that decides NVRTC's bytes: the compiler (its
version and the library file's own hash), the options and target, the source, the name
expressions, and every header the source can reach (each include, quoted or not, followed
through the include folders, named and hashed by content, its comments left out). So the
three CPU targets of a release, a rebuild after a Python edit and the tests' fresh clones all
share one compile, and an edit of one op's rule.h misses for that op's programs only.

The cache lives outside the checkout: $CEE_DEVICE_CODE_CACHE, else
$XDG_CACHE_HOME/cuda_ext_example/device-code (~/.cache/...); CEE_DEVICE_CODE_CACHE=off
turns it off. Entries are written to a temporary file and renamed into place, so two builds
at once never see half an entry; each entry carries the hash of its image, and one that does
not match (a damaged or truncated file) is recompiled and replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
from pathlib import Path

from . import config

CACHE_ENV = "CEE_DEVICE_CODE_CACHE"
MAGIC = b"cee-device-code-1\n"
INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)
# A string or character literal (kept), or a comment (replaced by its newlines).
TOKEN = re.compile(rb'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)


def without_comments(text: bytes) -> bytes:
    """C++ text with its comments blanked, their lines kept (__LINE__ stays what it was): an
    edit of a comment alone, a project renamed, compiles nothing again."""

    def blank(match: re.Match) -> bytes:
        token = match.group(0)
        return token if token[:1] in (b'"', b"'") else b"\n" * token.count(b"\n")

    return TOKEN.sub(blank, text)


def default_root() -> Path | None:
    """The cache folder the environment names, or None where it is turned off."""
    if os.environ.get(CACHE_ENV, "").lower() == "off":
        return None
    return config.shared_cache(CACHE_ENV, "device-code")


class Headers:
    """The headers a source can reach through its include folders, hashed once each."""

    def __init__(self, include_dirs: list[Path]):
        self.include_dirs = [Path(d) for d in include_dirs]
        self._files: dict[Path, tuple[bytes, list]] = {}  # path -> (hash, its includes)

    def _find(self, name: str, near: Path | None) -> Path | None:
        """As the preprocessor looks: a quoted include next to its includer first (`near`),
        then the include folders."""
        for folder in ([near] if near else []) + self.include_dirs:
            candidate = folder / name
            if candidate.is_file():
                return candidate.resolve()
        return None  # a compiler built-in (NVRTC's own headers): part of the compiler

    def _read(self, path: Path) -> tuple[bytes, list]:
        if path not in self._files:
            text = without_comments(path.read_bytes())
            self._files[path] = (hashlib.sha256(text).digest(), INCLUDE.findall(text))
        return self._files[path]

    def digest(self, source: str) -> bytes:
        """One hash of every header reachable from `source`, each by its include name and
        its content (an include under an #if is counted too: more than needed, never less)."""
        seen: dict[tuple[str, Path | None], bytes] = {}
        todo = [(name, None) for _, name in INCLUDE.findall(source.encode())]
        while todo:
            name, near = todo.pop()
            path = self._find(name.decode(), near)
            if (name.decode(), path) in seen:
                continue
            if path is None:
                seen[(name.decode(), None)] = b"builtin"
                continue
            content_hash, includes = self._read(path)
            seen[(name.decode(), path)] = content_hash
            todo += [(child, path.parent if quote == b'"' else None) for quote, child in includes]
        h = hashlib.sha256()
        for (name, _), content_hash in sorted(seen.items(), key=lambda kv: (kv[0][0], kv[1])):
            h.update(name.encode() + b"\0" + content_hash)
        return h.digest()


def program_key(compiler_id: str, options: list[str], target: str, source: str,
                expressions: tuple[str, ...], headers: bytes) -> str:  # fmt: skip
    """The cache key of one NVRTC compile."""
    h = hashlib.sha256()
    for part in (compiler_id, "\0".join(options), target, source, "\0".join(expressions)):
        h.update(part.encode() + b"\1")
    h.update(headers)
    return h.hexdigest()


def compiler_id(version: tuple[int, int], library: Path) -> str:
    """NVRTC's version and its library file's hash: a patch release is another compiler."""
    return f"NVRTC {version[0]}.{version[1]} {hashlib.sha256(library.read_bytes()).hexdigest()}"


class DeviceCodeCache:
    """Entries under root/<first two hex digits>/<key>: MAGIC, the metadata's length, the
    metadata (JSON: the lowered names and the image's hash), the image."""

    def __init__(self, root: Path):
        self.root = root
        self.hits = self.misses = self.damaged = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> tuple[bytes, dict[str, str]] | None:
        try:
            data = self._path(key).read_bytes()
        except OSError:
            self.misses += 1
            return None
        entry = _decode(data)
        if entry is None:
            self.damaged += 1
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def put(self, key: str, image: bytes, lowered: dict[str, str]) -> None:
        """Stores an entry; a cache that cannot be written (a read-only disk) is skipped."""
        meta = json.dumps({"lowered": lowered, "sha256": hashlib.sha256(image).hexdigest()})
        data = MAGIC + struct.pack("<Q", len(meta)) + meta.encode() + image
        path = self._path(key)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
                tmp.write(data)
            os.replace(tmp.name, path)
        except OSError:
            if tmp is not None:
                Path(tmp.name).unlink(missing_ok=True)

    def summary(self) -> str:
        damaged = f", {self.damaged} damaged entries rebuilt" if self.damaged else ""
        return f"{self.hits} from the cache {self.root}, {self.misses} compiled{damaged}"


def _decode(data: bytes) -> tuple[bytes, dict[str, str]] | None:
    """An entry's (image, lowered names), or None if it is not whole."""
    start = len(MAGIC) + 8
    if not data.startswith(MAGIC) or len(data) < start:
        return None
    (length,) = struct.unpack("<Q", data[len(MAGIC) : start])
    try:
        meta = json.loads(data[start : start + length])
        image = data[start + length :]
        if hashlib.sha256(image).hexdigest() != meta["sha256"]:
            return None
        return image, dict(meta["lowered"])
    except (ValueError, KeyError, TypeError):
        return None
