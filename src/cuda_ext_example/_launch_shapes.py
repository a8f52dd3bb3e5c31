"""The compiled launch-shape choice (csrc/elementwise_launch.h), through the library's C
hooks (csrc/launch_shape_hooks.cpp) and ctypes: what the tests check with no GPU, and what the
tuning command (lab/tune) forces; and which device-code libraries (one per op and dtype) the
launcher has loaded, for the cold-start tests. No torch op serves these: they are no tensor work.
"""

from __future__ import annotations

import ctypes
from functools import cache

from ._loader import library_path

_ERROR_BYTES = 512


@cache
def _library() -> ctypes.CDLL:
    """The library torch.ops.load_library loaded on import (the same handle: loading a
    loaded library again only counts it), with the hooks' C signatures."""
    import cuda_ext_example  # loads the library, or says why it cannot

    lib = ctypes.CDLL(str(library_path(cuda_ext_example.BUILD_INFO)))
    c_int, c_char_p, c_size_t = ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
    c_ll, int_p, str_p = ctypes.c_longlong, ctypes.POINTER(c_int), ctypes.POINTER(c_char_p)
    signatures = {
        "cee_vector_shape_count": [],
        "cee_vector_shape": [c_int, int_p, int_p, int_p, str_p],
        "cee_launch_shape": [c_char_p, c_int, c_int, c_ll, c_char_p, str_p, c_char_p, c_size_t],
        "cee_force_launch_shape": [c_int, c_char_p, c_size_t],
        "cee_device_library_count": [],
        "cee_device_library": [c_int, str_p, int_p],
    }
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, c_int
    return lib


def vector_shapes() -> list[tuple[int, int, int, str]]:
    """The compiled launch shapes: [(access bytes, block, accesses per thread, load), ...],
    load "default" or "evict-first" (tuning/launch_shapes.toml's names)."""
    lib = _library()
    shapes = []
    for index in range(lib.cee_vector_shape_count()):
        access, block, per_thread = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        load = ctypes.c_char_p()
        lib.cee_vector_shape(index, access, block, per_thread, load)
        shapes.append((access.value, block.value, per_thread.value, load.value.decode()))
    return shapes


def launch_shape(
    gpu: str, inputs: int, element_bytes: int, nbytes: int, op: str = ""
) -> tuple[str, int]:
    """(the table's GPU, the shape index) the launcher takes on GPU `gpu` (the driver's
    device name) for `inputs` tensors of `element_bytes` each and `nbytes` per tensor; `op`:
    an op's name, for its own lists of the table if it has any (op-<name>.element-E)."""
    table, err = ctypes.c_char_p(), ctypes.create_string_buffer(_ERROR_BYTES)
    index = _library().cee_launch_shape(
        gpu.encode(), inputs, element_bytes, nbytes, op.encode(), table, err, len(err)
    )
    if index < 0:
        raise ValueError(err.value.decode())
    return table.value.decode(), index


def force_launch_shape(index: int) -> None:
    """Every vectorized launch of this process takes compiled shape `index` (where its
    pointers are aligned); -1: the per-GPU tables again. For tuning and tests."""
    err = ctypes.create_string_buffer(_ERROR_BYTES)
    if _library().cee_force_launch_shape(index, err, len(err)) != 0:
        raise ValueError(err.value.decode())


def libraries(loaded_only: bool = False) -> list[str]:
    """The device-code libraries (one per op and dtype, op_dtype, each loaded at the first
    launch of one of its kernels), or only those this process has loaded. For tests."""
    lib = _library()
    names = []
    for index in range(lib.cee_device_library_count()):
        name, loaded = ctypes.c_char_p(), ctypes.c_int()
        lib.cee_device_library(index, name, loaded)
        if loaded.value or not loaded_only:
            names.append(name.value.decode())
    return names
