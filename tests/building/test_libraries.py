"""One library of device code per op: the generated table gives each kernel its op's library,
and the built binary's .nv_fatbin holds one fatbin per op with that op's kernels only, so the
launcher's first call of an op loads that op's code alone (csrc/launcher.cpp). What a fresh
process loads on a GPU: tests/ops/test_first_call.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from buildtools import config, device_code, ops
from cuda_ext_example import BUILD_INFO
from scripts.inspect import binary_info

ROOT = Path(__file__).resolve().parents[2]


def c_array(header: str, name: str) -> list[str]:
    body = re.search(rf"{name}\[\w+\] = \{{(.*?)\}};", header, re.S).group(1)
    return [item.strip() for item in re.sub(r"//[^\n]*", "", body).split(",") if item.strip()]


def test_generated_table_maps_each_kernel_to_its_ops_library():
    # No NVRTC needed: the table from the declarations, with made-up lowered names.
    declared = ops.declared_ops()
    kernels = ops.instances(declared, ops.elementwise())
    code = device_code.DeviceCode(
        {op.name: b"" for op in declared},
        {k.expression: f"lowered_{i}" for i, k in enumerate(kernels)},
        "NVRTC test",
    )
    header = device_code.generated_header(code, "test", config.load(dev_spec=""))
    names = [n.strip('"') for n in c_array(header, "cee_library_names")]
    assert names == [op.name for op in declared]
    assert f"#define CEE_NUM_LIBRARIES {len(declared)}" in header
    library_of = [int(i) for i in c_array(header, "cee_kernel_libraries")]
    assert len(library_of) == len(kernels) > len(declared)
    assert [names[i] for i in library_of] == [k.op for k in kernels]
    for index, op in enumerate(declared):  # what device_code.S's symbols are named after
        assert f"  X({index}, {op.name}) \\" in header


def test_the_table_refuses_device_code_of_other_libraries():
    # One fatbin for every op (the layout before one library per op) is not this table's.
    code = device_code.DeviceCode({"all_ops": b""}, {}, "NVRTC test")
    with pytest.raises(device_code.DeviceCodeError, match=r"libraries \['all_ops'\], not"):
        device_code.generated_header(code, "test", config.load(dev_spec=""))


@pytest.fixture(scope="module")
def extension():
    wheels = sorted((ROOT / "wheelhouse").glob("*.whl"))
    if len(wheels) != 1:
        pytest.skip("needs the repaired wheel in wheelhouse/ (make repair)")
    with binary_info.extension_in(wheels[0]) as so:
        yield so


@pytest.mark.wheel
def test_nv_fatbin_holds_one_fatbin_per_op_with_its_own_kernels(extension):
    declared = ops.declared_ops()
    kernels = ops.instances(declared, ops.elementwise())
    fatbins = binary_info.embedded_fatbins(extension)
    assert [f.name for f in fatbins] == [op.name for op in declared]
    sass = BUILD_INFO["sass_archs"]
    ptx = [BUILD_INFO["ptx_arch"].replace("compute_", "sm_")] if BUILD_INFO["ptx_arch"] else []
    for op, fatbin in zip(declared, fatbins, strict=True):
        assert fatbin.archs("sass") == sass and fatbin.archs("ptx") == ptx, op.name
        own = {k.expression for k in kernels if k.op == op.name}
        for entry in fatbin.entries:
            if entry.kind != "sass":
                continue
            # the kernels, not the math library's subroutines ("$...$__cuda_sm20_...")
            found = {n for n in binary_info.cubin_kernels(entry.payload) if "$" not in n}
            assert len(found) == len(own), (op.name, entry.arch)
            # NVRTC's names: cee_rule_<folder>::Signature is "<len>cee_rule_<folder>9Signature"
            namespace = f"cee_rule_{op.folder}"
            rule = f"{len(namespace)}{namespace}9Signature"
            assert all(rule in name for name in found), (op.name, entry.arch)
