"""A bad ops.toml of kind = "custom" stops the build with its file, the op and what is wrong
(buildtools/custom_ops.py), and the custom ops in ops/ are what the build record carries."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from buildtools import custom_ops, device_code, ops

ROOT = Path(__file__).resolve().parents[2]


def rms_norm_copy(tmp_path: Path) -> Path:
    """ops/ with a copy of the RMSNorm folder only; returns its ops.toml."""
    folder = tmp_path / "ops" / "rms_norm"
    shutil.copytree(ROOT / "ops" / "rms_norm", folder)
    return folder / "ops.toml"


def test_the_rms_norm_declaration_reads_back(tmp_path):
    toml = rms_norm_copy(tmp_path)
    forward, backward = custom_ops.declared(toml.parents[1])
    assert forward.schema == "my_rms_norm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor"
    assert backward.outputs == 2 and backward.tensors == ("grad", "x", "weight")
    assert forward.backward == "my_rms_norm_backward(grad, x, weight, eps)"
    assert forward.dtypes == ("float16", "bfloat16", "float32", "float64")
    # every combination of the template's values for every dtype, those its `when` allows:
    # the row held in registers (hold_row) at 16 bits only, at 0, 4 or 8 packs a thread
    assert len(forward.instances()) == 4 * 2 * 5 + 2 * 4
    held = [(d, v) for _, d, v in forward.instances() if v[2]]
    assert held == [
        (d, (vector, packs, True))
        for d in ("float16", "bfloat16")
        for vector, packs in ((True, 0), (True, 4), (True, 8), (False, 0))
    ]
    template, dtype, values = forward.instances()[0]
    assert forward.expression(template, dtype, values) == (
        "cee_rule_rms_norm::rms_norm_forward<__half, true, 0, true>"
    )


def test_without_when_every_combination_is_compiled(tmp_path):
    toml = rms_norm_copy(tmp_path)
    text = toml.read_text()
    start = text.index('when = "')
    toml.write_text(text[:start] + text[text.index("\n", start) + 1 :])
    forward = custom_ops.declared(toml.parents[1])[0]
    assert len(forward.instances()) == 4 * 2 * 5 * 2


def test_an_elementwise_parser_never_reads_a_custom_folder(tmp_path):
    toml = rms_norm_copy(tmp_path)
    with pytest.raises(ops.OpDeclarationError, match="no op declared"):
        ops.declared_ops(toml.parents[1])  # the custom folder is not an elementwise one


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ('\nkind = "custom"', '\nkind = "custom"\nwhatever = 1', r"unknown keys \['whatever'\]"),
        (
            '"(Tensor x, Tensor weight, float eps=1e-06) -> Tensor"',
            '"(Tensor x, weight) -> Tensor"',
            r"my_rms_norm: schema = .*'weight' is not `Tensor\|float\|int\|bool name\[=default\]`",
        ),
        (
            '"(Tensor x, Tensor weight, float eps=1e-06) -> Tensor"',
            '"(Tensor x, float eps=1e-06, Tensor weight) -> Tensor"',
            "weight has no default but follows one that has",
        ),
        (
            'function = "rms_norm_forward"',
            'function = "rms_norm_fwd"',
            "function = 'rms_norm_fwd': host.h defines no such function",
        ),
        (
            "[op.kernels.rms_norm_forward]",
            "[op.kernels.rms_norm_fast]",
            "kernels.cuh defines no kernel rms_norm_fast",
        ),
        ("per_thread = [0, 1, 2, 4, 8]", 'per_thread = ["many"]', "kernels.rms_norm_forward"),
        ('when = "not hold_row', 'when = "not held', "when = .*unknown name 'held'"),
        (
            'when = "not hold_row or',
            "when = \"dtype == 'float16' and",
            "compiles no rms_norm_forward for bfloat16",
        ),
        (
            'when = "not hold_row or',
            'when = "1 / 0 or',
            r"ZeroDivisionError: division by zero \(dtype float16\)",
        ),
        (
            'fake = ["torch.empty_like',
            'fake = ["torch.empty_like(x)", "torch.empty_like',
            r"fake: one Python expression per output \(1\)",
        ),
        (
            'backward = "my_rms_norm_backward(grad, x, weight, eps)"',
            'backward = "my_rms_norm_bwd(grad, x, weight, eps)"',
            "unknown name 'my_rms_norm_bwd'",
        ),
        (
            "(x.shape[-1],), weight, eps)",
            "(x.shape[-1],), weight, eps, nothing)",
            "unknown name 'nothing'",
        ),
        (
            "torch.nn.functional.rms_norm(",
            "torch.nn.functional.rms_nrom(",
            r"torch.nn.functional.rms_nrom does not exist",
        ),
        (
            'samples = { x = "torch.randn(6, n, dtype=dtype, device=device)", ',
            "samples = { ",
            r"samples: a Python expression of dtype, device and n for each of \['weight', 'x'\]",
        ),
        ('dtypes = ["float16",', 'dtypes = ["complex32", "float16",', "dtypes .*complex32"),
        (
            'name = "my_rms_norm"\n',
            'name = "my rms norm"\n',
            "op name 'my rms norm' is not an identifier",
        ),
    ],
)
def test_a_bad_declaration_names_its_file_op_and_problem(tmp_path, old, new, problem):
    toml = rms_norm_copy(tmp_path)
    text = toml.read_text()
    assert old in text, old
    toml.write_text(text.replace(old, new, 1))
    with pytest.raises(ops.OpDeclarationError, match=f"ops/rms_norm/ops.toml: .*{problem}"):
        custom_ops.declared(toml.parents[1])


def test_a_folder_without_its_kernels_or_host_functions_is_refused(tmp_path):
    toml = rms_norm_copy(tmp_path)
    (toml.parent / "host.h").unlink()
    with pytest.raises(ops.OpDeclarationError, match='kind = "custom" needs host.h next to it'):
        custom_ops.declared(toml.parents[1])


def test_a_custom_op_with_an_elementwise_ops_name_is_refused(tmp_path):
    toml = rms_norm_copy(tmp_path)
    toml.write_text(toml.read_text().replace('name = "my_rms_norm"\n', 'name = "my_add"\n'))
    custom = custom_ops.declared(toml.parents[1])
    with pytest.raises(ops.OpDeclarationError, match=r"\['my_add'\] declared more than once"):
        custom_ops.check_unique([op.name for op in ops.declared_ops()], custom)


def test_the_record_carries_the_custom_ops():
    from cuda_ext_example import BUILD_INFO

    assert BUILD_INFO["custom_ops"] == [op.record() for op in device_code.every_op()[1]]
