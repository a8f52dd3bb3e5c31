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
reference = "torch.add(x, x)"
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
        (GOOD.replace('reference = "torch.add(x, x)"\n', ""), RULE, "missing `reference`"),
        (GOOD.replace('"vectorized"', '"tiled"'), RULE, "kernel = 'tiled'; one of"),
        (GOOD.replace('x = "2"', 'y = "2"'), RULE, "[derivatives] must name every input"),
        (GOOD.replace('["x"]', '["a", "b", "c", "d", "e", "f", "g", "h", "i"]'), RULE,
         "1 to 8 distinct names"),
        (GOOD.replace('"my_twice"', '"my-twice"'), RULE, "is not an identifier"),
        (GOOD + 'dtypes = ["float32"]\n', RULE, "unknown keys ['dtypes'] in [[op]] my_twice"),
        ("typo = 1\n" + GOOD, RULE, "unknown keys ['typo']; known:"),
        ("rule = ", RULE, "not valid TOML"),
    ],
    ids=["no rule.h", "no such struct", "no reference", "unknown kernel", "derivatives",
         "nine inputs", "bad name", "misplaced key", "unknown key", "broken TOML"],
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
    with pytest.raises(ops.OpDeclarationError, match=r"dtypes \['bool'\]: a non-empty list of"):
        ops.declared_ops(root, dtypes=("float32",))


def test_the_record_carries_the_declarations_of_ops():
    from cuda_ext_example import BUILD_INFO

    assert BUILD_INFO["ops"] == [op.record() for op in ops.declared_ops()]


RICH = """
rule = "Step"
inputs = ["param", "grad"]
mutates = ["param"]
outputs = []
nonnegative = ["grad"]
dtypes = ["float32", "float64"]
reference = "torch.sub(param, grad, alpha=lr)"
[scalars]
lr = { type = "float", example = 0.1 }
times = { type = "int", default = 2 }
nesterov = { type = "bool", default = false }
[derived]
twice_lr = "2 * lr"
[tolerance]
float32 = { rtol = 1e-6, atol = 1e-6 }
[[op]]
name = "my_step"
kernel = "simple"
"""
STEP_RULE = "struct Step {};\n"


def test_a_declaration_with_scalars_and_an_in_place_update(tmp_path):
    (op,) = ops.declared_ops(declare(tmp_path, RICH, STEP_RULE, "step"),
                             dtypes=("float16", "float32", "float64"))  # fmt: skip
    assert op.schema == (
        "my_step(Tensor(a!) param, Tensor grad, float lr, int times=2, bool nesterov=False) -> ()"
    )
    assert op.dtypes == ("float32", "float64")
    assert op.tolerance == {"float32": {"rtol": 1e-6, "atol": 1e-6},
                            "float64": {"rtol": 0.0, "atol": 0.0}}  # fmt: skip
    assert [s.sample for s in op.scalars] == [0.1, 2, False]
    assert op.derived == {"twice_lr": "2 * lr"}
    assert op.record()["mutates"] == ["param"] and op.record()["outputs"] == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (('inputs = ["param", "grad"]', 'inputs = "pg"'), "a list of identifiers"),
        (('reference = "torch.sub(', 'reference = "torch.subb('),
         "torch.subb does not exist (torch has no 'subb') in torch"),
        (('reference = "torch.sub(param, grad', 'reference = "torch.sub(param, gard'),
         "unknown name 'gard'"),
        (('reference = "torch.sub(param, grad, alpha=lr)"', 'reference = "torch.sub(param,"'),
         "not a Python expression"),
        ((", example = 0.1 }", " }"), "give a default, or an example value"),
        (('times = { type = "int", default = 2 }', 'times = { type = "int", default = 2.5 }'),
         "default = 2.5 is not a int"),
        (('nesterov = { type = "bool", default = false }', 'nesterov = { type = "bool", '
          'example = false }'), "has no default but follows one that has"),
        (('dtypes = ["float32", "float64"]', 'dtypes = ["float32", "int8"]'),
         "a float scalar needs float dtypes only"),
        (('mutates = ["param"]', 'mutates = ["weight"]'), "mutates names ['weight'], not inputs"),
        (('mutates = ["param"]', "mutates = []"), "an op with no output must update an input"),
        (("float32 = { rtol", "int8 = { rtol"), "[tolerance]: keys are the op's dtypes"),
        (('twice_lr = "2 * lr"', 'lr = "2"'), "a derived scalar has the name of another"),
        (('[[op]]', '[derivatives]\nparam = "1"\ngrad = "1"\n[[op]]'),
         "[derivatives] are for ops with one output"),
    ],
    ids=["inputs a string", "misspelt torch function", "unknown name", "broken reference",
         "no default nor example", "default of another type", "default then none",
         "float scalar for integers", "mutates a non-input", "nothing out", "tolerance key",
         "derived name taken", "derivatives of an in-place op"],
)  # fmt: skip
def test_a_bad_rich_declaration_names_the_key_and_the_fix(tmp_path, change, problem):
    root = declare(tmp_path, RICH.replace(*change), STEP_RULE, "step")
    with pytest.raises(ops.OpDeclarationError) as caught:
        ops.declared_ops(root, dtypes=("float32", "float64", "int8"))
    assert str(caught.value).startswith(f"{Path('ops', 'step', 'ops.toml')}: ")
    assert problem in str(caught.value), str(caught.value)


def test_one_input_with_derivatives_of_another_name_says_which(tmp_path):
    root = declare(tmp_path, GOOD.replace('x = "2"', 'y = "2"'))
    with pytest.raises(ops.OpDeclarationError, match=r"must name every input \['x'\], got \['y'\]"):
        ops.declared_ops(root, dtypes=("float32",))


def test_a_reference_module_lends_its_functions(tmp_path):
    root = declare(tmp_path, GOOD.replace('"torch.add(x, x)"', '"twice(x)"'))
    with pytest.raises(ops.OpDeclarationError, match="unknown name 'twice'"):
        ops.declared_ops(root, dtypes=("float32",))
    (root / "twice" / "reference.py").write_text("def twice(x):\n    return x + x\n")
    (op,) = ops.declared_ops(root, dtypes=("float32",))
    assert op.has_reference_module and op.reference == "twice(x)"
