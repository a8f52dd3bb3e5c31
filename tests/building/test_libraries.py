"""One library of device code per op and dtype: the generated table gives each kernel its
library, and the built binary's .nv_fatbin holds one fatbin per op and dtype with those kernels
only, so the launcher's first call of an op in a dtype loads that code alone
(csrc/launcher.cpp). What a fresh process loads on a GPU: tests/ops/test_first_call.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from buildtools import codegen, config, declarations, device_code, nvrtc
from cuda_ext_example import BUILD_INFO
from scripts.inspect import binary_info

ROOT = Path(__file__).resolve().parents[2]


def c_array(header: str, name: str) -> list[str]:
    body = re.search(rf"{name}\[\w+\] = \{{(.*?)\}};", header, re.S).group(1)
    return [item.strip() for item in re.sub(r"//[^\n]*", "", body).split(",") if item.strip()]


def library_kernels(decl: declarations.Declarations) -> list[tuple[str, str]]:
    """(library, expression) of every kernel instance, in the launcher's kernel order: by op
    (the core's elementwise instances, or the op's own templates), then dtype."""
    kernels = [(k.library, k.expression) for k in device_code.instances(decl)]
    own = [
        (declarations.library_name(op.name, dtype), op.expression(template, dtype, values))
        for op in decl.ops
        for dtype in op.dtypes
        for template, d, values in op.instances()
        if d == dtype
    ]
    assert [k for k in kernels if not k[1].startswith("cee::")] == own  # in the listed order
    return kernels


def test_generated_table_maps_each_kernel_to_its_library():
    # No NVRTC needed: the table from the declarations, with made-up lowered names.
    decl = declarations.load()
    kernels = library_kernels(decl)
    every = decl.libraries
    assert "my_add_float32" in every and "my_rms_norm_bfloat16" in every
    assert len(every) == sum(len(op.dtypes) for op in decl.ops)
    code = device_code.DeviceCode(
        {name: b"" for name in every},
        {expression: f"lowered_{i}" for i, (_, expression) in enumerate(kernels)},
        "NVRTC test",
    )
    header = codegen.op_table(
        decl, device_code.instances(decl), code, config.load(dev_spec=""), "test"
    )
    names = [n.strip('"') for n in c_array(header, "cee_library_names")]
    assert names == every
    assert f"#define CEE_NUM_LIBRARIES {len(every)}" in header
    library_of = [int(i) for i in c_array(header, "cee_kernel_libraries")]
    assert len(library_of) == len(kernels) > len(every)
    assert [names[i] for i in library_of] == [library for library, _ in kernels]
    for index, name in enumerate(every):  # what device_code.S's symbols are named after
        assert f"  X({index}, {name}) \\" in header


def test_the_table_refuses_device_code_of_other_libraries():
    # One fatbin for every op (the layout before libraries per op) is not this table's.
    decl = declarations.load()
    code = device_code.DeviceCode({"all_ops": b""}, {}, "NVRTC test")
    with pytest.raises(nvrtc.DeviceCodeError, match=r"libraries \['all_ops'\], not"):
        codegen.op_table(decl, device_code.instances(decl), code, config.load(dev_spec=""), "test")


@pytest.fixture(scope="module")
def extension():
    wheels = sorted((ROOT / "wheelhouse").glob("*.whl"))
    if len(wheels) != 1:
        pytest.skip("needs the repaired wheel in wheelhouse/ (make repair)")
    with binary_info.extension_in(wheels[0]) as so:
        yield so


@pytest.mark.wheel
def test_nv_fatbin_holds_one_fatbin_per_op_and_dtype_with_its_own_kernels(extension):
    decl = declarations.load()
    fatbins = binary_info.embedded_fatbins(extension)
    assert [f.name for f in fatbins] == decl.libraries
    sass = BUILD_INFO["sass_archs"]
    ptx = [BUILD_INFO["ptx_arch"].replace("compute_", "sm_")] if BUILD_INFO["ptx_arch"] else []
    for fatbin in fatbins:
        assert fatbin.archs("sass") == sass and fatbin.archs("ptx") == ptx, fatbin.name
    own: dict[str, set[str]] = {}
    for library, expression in library_kernels(decl):
        own.setdefault(library, set()).add(expression)
    folder = {declarations.library_name(op.name, d): op.folder
              for op in decl.ops for d in op.dtypes}  # fmt: skip
    for fatbin in fatbins:
        for entry in fatbin.entries:
            if entry.kind != "sass":
                continue
            # the kernels, not the math library's subroutines ("$...$__cuda_sm20_...")
            found = {n for n in binary_info.cubin_kernels(entry.payload) if "$" not in n}
            assert len(found) == len(own[fatbin.name]), (fatbin.name, entry.arch)
            # NVRTC's names carry the folder's namespace: "<len>cee_rule_<folder>"
            namespace = f"cee_rule_{folder[fatbin.name]}"
            assert all(f"{len(namespace)}{namespace}" in name for name in found), fatbin.name
