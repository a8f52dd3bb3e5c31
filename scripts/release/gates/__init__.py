"""Blocking checks on a repaired wheel before it may be uploaded.

Each gate returns nothing when the wheel passes and raises GateFailure with the reason and
the fix when it does not. table.py lists them in order, one row each (what it refuses, the
fix, its platforms, its check); run them all with `run_gates(wheel)`, or from the command
line: python -m scripts.release gates WHEEL

Modules, one job each: wheel_files (the zip and its files), wheel_metadata (WHEEL and
METADATA), tags (platform, py3-none), binaries (each binary's facts, read once), elf (the
Linux wheel's ELF files), pe (the Windows DLL), symbols (imports and exports of either),
device_code (the fatbins), build_record (the record against the binary and pyproject.toml),
tools (twine, check-wheel-contents, torch-abi-audit).
"""

from .binaries import LIBRARY, library_of, library_of_target
from .build_record import gate_build_record, gate_release_build
from .device_code import gate_cuda12_device_code, gate_device_code, gate_uncompressed_fatbin
from .elf import EXTENSION_MODULE_NAME, gate_elf
from .failure import GateFailure
from .runner import all_gates, gate_list, run_gates
from .symbols import declared_exports, gate_torch_shims
from .table import GATES, Gate, gates_for
from .tags import gate_py3_none_tag, wheel_arch
from .tools import python_tool, tool_name
from .wheel_files import BUILD_RECORD, read_build_record

__all__ = [
    "BUILD_RECORD",
    "EXTENSION_MODULE_NAME",
    "GATES",
    "LIBRARY",
    "Gate",
    "GateFailure",
    "all_gates",
    "declared_exports",
    "gate_build_record",
    "gate_cuda12_device_code",
    "gate_device_code",
    "gate_elf",
    "gate_list",
    "gate_py3_none_tag",
    "gate_release_build",
    "gate_torch_shims",
    "gate_uncompressed_fatbin",
    "gates_for",
    "library_of",
    "library_of_target",
    "read_build_record",
    "run_gates",
    "python_tool",
    "tool_name",
    "wheel_arch",
]
