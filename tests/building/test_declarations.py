"""One parser for every op (buildtools/declarations.py): an op with a `rule` (the core's host
function and kernels) and an op with a `function` and `kernels` (its own host.h and
kernels.cuh) read from the same ops.toml keys. A bad declaration stops the build with its
file, the op and what is wrong; the declarations in ops/ are what the build record carries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from buildtools import declarations

ROOT = Path(__file__).resolve().parents[2]

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


def pyproject(folder: Path, dtypes) -> Path:
    """A pyproject.toml whose core dtypes are `dtypes` (what load reads of it)."""
    path = folder / "pyproject.toml"
    path.write_text(
        f"[tool.cuda_ext_example.elementwise]\ndtypes = {json.dumps(list(dtypes))}\n"
        "simple-block = 256\n"
    )
    return path


def load(root: Path, dtypes=None) -> declarations.Declarations:
    """The declarations of the ops folder `root`, over the core dtypes `dtypes` (None:
    pyproject.toml's)."""
    if dtypes is None:
        return declarations.load(root)
    return declarations.load(root, pyproject(root.parent, dtypes))


def declare(tmp_path: Path, toml: str, rule: str | None = RULE, folder: str = "twice") -> Path:
    """ops/<folder>/ops.toml (and rule.h) under tmp_path; returns the ops folder."""
    root = tmp_path / "ops"
    (root / folder).mkdir(parents=True)
    (root / folder / "ops.toml").write_text(toml)
    if rule is not None:
        (root / folder / "rule.h").write_text(rule)
    return root


def rms_norm_copy(tmp_path: Path, folder: str = "rms_norm") -> Path:
    """ops/ with a copy of the RMSNorm folder only; returns its ops.toml."""
    shutil.copytree(ROOT / "ops" / "rms_norm", tmp_path / "ops" / folder)
    return tmp_path / "ops" / folder / "ops.toml"


def refused(root: Path, dtypes=None) -> str:
    """The OpDeclarationError's message of loading `root`."""
    with pytest.raises(declarations.OpDeclarationError) as caught:
        load(root, dtypes)
    return str(caught.value)


# --------------------------------------------------------------------------- ops with a rule


def test_a_good_declaration_reads_back(tmp_path):
    decl = load(declare(tmp_path, GOOD), dtypes=("float32", "int8"))
    (op,) = decl.ops
    assert op.schema == "my_twice(Tensor x) -> Tensor"
    assert op.elementwise and op.rule == "Twice" and op.kernel == "vectorized"
    assert op.folder == "twice" and op.signature == "cee_rule_twice::Signature"
    assert op.function is None and op.kernels == ()
    assert op.dtypes == ("float32", "int8")
    # the backward and the jvp, from [derivatives]
    assert op.backward == "((unbroadcast(grad * (2), x) if needs_grad[0] else None),)"
    assert op.jvp == "tangent_sum(None if tangent_x is None else tangent_x * (2))"
    assert [d.name for d in decl.dtypes] == ["float32", "int8"]
    assert decl.libraries == ["my_twice_float32", "my_twice_int8"]
    assert decl.dtype_mask(op) == 0b11


@pytest.mark.parametrize(
    ("toml", "rule", "problem"),
    [
        (GOOD, None, "[[op]] my_twice: no rule.h next to it"),
        (GOOD.replace('rule = "Twice"', 'rule = "Thrice"'), RULE, "rule.h has no `struct Thrice`"),
        (GOOD.replace('reference = "torch.add(x, x)"\n', ""), RULE, "missing `reference`"),
        (GOOD.replace('"vectorized"', '"tiled"'), RULE, "kernel = 'tiled'; one of"),
        (GOOD.replace('x = "2"', 'y = "2"'), RULE, "[derivatives] must name every tensor input"),
        (GOOD.replace('["x"]', '["a", "b", "c", "d", "e", "f", "g", "h", "i"]'), RULE,
         "1 to 8 distinct names"),
        (GOOD.replace('"my_twice"', '"my-twice"'), RULE, "op name 'my-twice' is not an identifier"),
        (GOOD + "typo = 1\n", RULE, "[[op]] my_twice: unknown keys ['typo']"),
        ("typo = 1\n" + GOOD, RULE, "unknown keys ['typo']; known:"),
        ("rule = ", RULE, "not valid TOML"),
        (GOOD[: GOOD.index("[[op]]")], RULE, "no [[op]] entry"),
        (GOOD.replace('rule = "Twice"\n', ""), RULE, "give either `rule`"),
        (GOOD + 'tags = ["fast"]\n', RULE, "[[op]] my_twice: unknown keys ['tags']"),
    ],
    ids=["no rule.h", "no such struct", "no reference", "unknown kernel", "derivatives",
         "nine inputs", "bad name", "unknown key in [[op]]", "unknown key", "broken TOML",
         "no [[op]]", "neither rule nor function", "unknown tag"],
)  # fmt: skip
def test_a_bad_declaration_names_its_file_and_the_problem(tmp_path, toml, rule, problem):
    message = refused(declare(tmp_path, toml, rule), dtypes=("float32",))
    # Named as an author sees it in the checkout (the temporary ops folder's twice/ops.toml;
    # spelt from parts: no tracked file may name a path the repository lacks).
    assert message.startswith(f"{Path('ops', 'twice', 'ops.toml')}: "), message
    assert problem in message, message


def test_a_folder_that_is_no_identifier_is_refused(tmp_path):
    message = refused(declare(tmp_path, GOOD, folder="my-twice"), dtypes=("float32",))
    assert "the folder name 'my-twice' must be an identifier" in message


def test_an_op_declared_twice_is_refused(tmp_path):
    root = declare(tmp_path, GOOD)
    (root / "again").mkdir()
    (root / "again" / "ops.toml").write_text(GOOD)
    (root / "again" / "rule.h").write_text(RULE)
    with pytest.raises(declarations.OpDeclarationError,
                       match=r"\['my_twice'\] declared more than once"):  # fmt: skip
        load(root, dtypes=("float32",))


def test_no_op_at_all_is_refused(tmp_path):
    (tmp_path / "ops").mkdir()
    with pytest.raises(declarations.OpDeclarationError, match="no op declared in"):
        load(tmp_path / "ops", dtypes=("float32",))


def test_dtypes_outside_the_core_are_refused(tmp_path):
    root = declare(tmp_path, 'dtypes = ["bool"]\n' + GOOD)
    message = refused(root, dtypes=("float32",))
    assert "[[op]] my_twice: dtypes ['bool']: a non-empty list of the core's ['float32']" in message


def test_core_dtypes_unknown_to_the_build_are_refused(tmp_path):
    root = declare(tmp_path, GOOD)
    unknown = r"pyproject.toml elementwise dtypes: \['complex32'\] unknown"
    with pytest.raises(declarations.OpDeclarationError, match=unknown):
        load(root, dtypes=("float32", "complex32"))


def test_top_level_keys_are_every_ops_unless_it_says_otherwise(tmp_path):
    # rule, inputs, reference, dtypes and [derivatives] are shared; the second op takes
    # other dtypes and another kernel.
    toml = (
        'dtypes = ["float32", "int8"]\n'
        + GOOD
        + ('[[op]]\nname = "my_twice_simple"\nkernel = "simple"\ndtypes = ["int8"]\n')
    )
    decl = load(declare(tmp_path, toml), dtypes=("float32", "int8"))
    first, second = decl.ops
    assert (first.name, first.kernel, first.dtypes) == ("my_twice", "vectorized",
                                                        ("float32", "int8"))  # fmt: skip
    assert (second.name, second.kernel, second.dtypes) == ("my_twice_simple", "simple", ("int8",))
    for op in decl.ops:
        assert op.rule == "Twice" and op.inputs == ("x",) and op.reference == "torch.add(x, x)"
        assert op.backward == first.backward
    assert decl.libraries == ["my_twice_float32", "my_twice_int8", "my_twice_simple_int8"]


RICH = """
rule = "Step"
inputs = ["param", "grad"]
mutates = ["param"]
outputs = []
dtypes = ["float32", "float64"]
reference = "torch.sub(param, grad, alpha=lr)"
samples = { grad = "torch.rand(n, dtype=dtype)" }
checks = ["lr >= 0", "times >= 1"]
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
    decl = load(
        declare(tmp_path, RICH, STEP_RULE, "step"), dtypes=("float16", "float32", "float64")
    )
    (op,) = decl.ops
    assert op.schema == (
        "my_step(Tensor(a!) param, Tensor grad, float lr, int times=2, bool nesterov=False) -> ()"
    )
    assert op.dtypes == ("float32", "float64")
    assert op.tolerance == {"float32": {"rtol": 1e-6, "atol": 1e-6},
                            "float64": {"rtol": 0.0, "atol": 0.0}}  # fmt: skip
    assert [s.sample for s in op.scalars] == [0.1, 2, False]
    assert op.derived == {"twice_lr": "2 * lr"}
    assert op.samples == {"grad": "torch.rand(n, dtype=dtype)"}
    assert op.checks == ("lr >= 0", "times >= 1")
    assert op.mutates == ("param",) and op.outputs == ()
    assert op.backward is None and op.jvp is None  # no [derivatives]: not differentiable
    record = op.record()
    assert record["outputs"] == [] and record["kernel"] == "simple" and record["broadcasts"]
    assert record["checks"] == ["lr >= 0", "times >= 1"]
    assert [(a["name"], a["type"], a["mutable"], a["sample"]) for a in record["arguments"]] == [
        ("param", "Tensor", True, None), ("grad", "Tensor", False, None),
        ("lr", "float", False, 0.1), ("times", "int", False, 2),
        ("nesterov", "bool", False, False),
    ]  # fmt: skip


def test_checks_are_cpp_conditions_of_the_scalars(tmp_path):
    # &&, || and ! (C++): what the generated check_<op> runs on every call.
    toml = RICH.replace('"times >= 1"]', '"0 <= lr && lr < 1", "!nesterov || times > 1"]')
    (op,) = load(declare(tmp_path, toml, STEP_RULE, "step"), dtypes=("float32", "float64")).ops
    assert op.checks == ("lr >= 0", "0 <= lr && lr < 1", "!nesterov || times > 1")


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
        (('times = { type = "int"', 'times = { type = "double"'),
         '[scalars] times: { type = "float" | "int" | "bool", default = ... }'),
        (('dtypes = ["float32", "float64"]', 'dtypes = ["float32", "int8"]'),
         "a float scalar needs float dtypes only"),
        (('mutates = ["param"]', 'mutates = ["weight"]'), "mutates names ['weight'], not inputs"),
        (('mutates = ["param"]', 'mutates = ["param"]\nnumbers = ["param"]'),
         "['param']: a number cannot be updated in place"),
        (('mutates = ["param"]', "mutates = []"), "an op with no output must update an input"),
        (("outputs = []", 'outputs = ["grad"]'), "outputs ['grad'] are also arguments"),
        (("float32 = { rtol", "int8 = { rtol"), "[tolerance]: keys are the op's dtypes"),
        (('twice_lr = "2 * lr"', 'lr = "2"'), "a derived scalar has the name of another"),
        (("[[op]]", '[derivatives]\nparam = "1"\ngrad = "1"\n[[op]]'),
         "[derivatives] are for ops with one output"),
        (('samples = { grad = "', 'samples = { weight = "'),
         "samples: { <tensor input> = \"Python expression of dtype and n\" } "
         "for ['param', 'grad']"),
        (('"torch.rand(n, dtype=dtype)"', '"torch.rand(m, dtype=dtype)"'),
         "samples.grad = 'torch.rand(m, dtype=dtype)': unknown name 'm'"),
        (('"times >= 1"]', '"times >= 1 and lr < 1"]'),
         "checks 'times >= 1 and lr < 1': write &&, ||, ! (C++)"),
        (('"times >= 1"]', '"not nesterov"]'), "checks 'not nesterov': write &&, ||, ! (C++)"),
        (('"times >= 1"]', '"param > 0"]'),
         "checks 'param > 0' = 'param > 0': unknown name 'param'"),
        (('checks = ["lr >= 0", "times >= 1"]', 'checks = "lr >= 0"'),
         "checks = [\"min_val <= max_val\"]: a list of conditions"),
    ],
    ids=["inputs a string", "misspelt torch function", "unknown name", "broken reference",
         "no default nor example", "default of another type", "default then none",
         "unknown scalar type", "float scalar for integers", "mutates a non-input",
         "number updated in place", "nothing out", "output named as an input", "tolerance key",
         "derived name taken", "derivatives of an in-place op", "samples of an unknown input",
         "samples of an unknown name", "checks with and", "checks with not",
         "checks of a tensor", "checks not a list"],
)  # fmt: skip
def test_a_bad_rich_declaration_names_the_key_and_the_fix(tmp_path, change, problem):
    assert change[0] in RICH, change[0]
    message = refused(declare(tmp_path, RICH.replace(*change), STEP_RULE, "step"),
                      dtypes=("float32", "float64", "int8"))  # fmt: skip
    assert message.startswith(f"{Path('ops', 'step', 'ops.toml')}: [[op]] my_step"), message
    assert problem in message, message


def test_one_input_with_derivatives_of_another_name_says_which(tmp_path):
    root = declare(tmp_path, GOOD.replace('x = "2"', 'y = "2"'))
    with pytest.raises(declarations.OpDeclarationError,
                       match=r"must name every tensor input \['x'\], got \['y'\]"):  # fmt: skip
        load(root, dtypes=("float32",))


def test_a_reference_module_lends_its_functions(tmp_path):
    root = declare(tmp_path, GOOD.replace('"torch.add(x, x)"', '"twice(x)"'))
    assert "reference = 'twice(x)': unknown name 'twice'" in refused(root, dtypes=("float32",))
    (root / "twice" / "reference.py").write_text("def twice(x):\n    return x + x\n")
    (op,) = load(root, dtypes=("float32",)).ops
    assert op.has_reference_module and op.reference == "twice(x)"


def test_a_reference_module_that_does_not_parse_is_refused(tmp_path):
    root = declare(tmp_path, GOOD)
    (root / "twice" / "reference.py").write_text("def twice(x):\n    return x +\n")
    assert "reference.py does not parse: line 2" in refused(root, dtypes=("float32",))


# ---------------------------------------------------------- ops with their own host and kernels


def test_the_rms_norm_declaration_reads_back(tmp_path):
    toml = rms_norm_copy(tmp_path)
    decl = load(toml.parents[1])
    forward, backward = decl.ops
    assert forward.schema == "my_rms_norm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor"
    assert not forward.elementwise and forward.rule is None and forward.kernel is None
    assert forward.function == "rms_norm_forward" and backward.function == "rms_norm_backward"
    assert backward.outputs == ("dx", "dweight") and backward.inputs == ("grad", "x", "weight")
    assert backward.schema == (
        "my_rms_norm_backward(Tensor grad, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)"
    )
    assert forward.backward == "my_rms_norm_backward(grad, x, weight, eps)"
    assert forward.jvp is None and backward.backward is None
    # the file's top-level dtypes and checks are both ops'
    for op in (forward, backward):
        assert op.dtypes == ("float16", "bfloat16", "float32", "float64")
        assert op.checks == ("eps >= 0",)
    assert [t.name for t in backward.kernels] == ["rms_norm_backward", "rms_norm_weight_grad"]
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
    assert decl.libraries[:2] == ["my_rms_norm_float16", "my_rms_norm_bfloat16"]


def test_without_when_every_combination_is_compiled(tmp_path):
    toml = rms_norm_copy(tmp_path)
    text = toml.read_text()
    start = text.index('when = "')
    toml.write_text(text[:start] + text[text.index("\n", start) + 1 :])
    forward = load(toml.parents[1]).ops[0]
    assert len(forward.instances()) == 4 * 2 * 5 * 2


def test_one_parser_reads_both_kinds_side_by_side(tmp_path):
    toml = rms_norm_copy(tmp_path)
    declare(tmp_path / "more", GOOD)
    shutil.move(tmp_path / "more" / "ops" / "twice", toml.parents[1] / "twice")
    decl = load(toml.parents[1])
    assert [(op.name, op.elementwise) for op in decl.ops] == [
        ("my_rms_norm", False), ("my_rms_norm_backward", False), ("my_twice", True),
    ]  # fmt: skip
    assert decl.libraries[-1] == "my_twice_uint8"  # by op, each in the core's dtype order


def test_a_top_level_key_an_op_gives_itself_is_its_own(tmp_path):
    toml = rms_norm_copy(tmp_path)
    toml.write_text(toml.read_text().replace(
        'name = "my_rms_norm_backward"\n', 'name = "my_rms_norm_backward"\nchecks = ["eps > 0"]\n'
    ))  # fmt: skip
    forward, backward = load(toml.parents[1]).ops
    assert forward.checks == ("eps >= 0",) and backward.checks == ("eps > 0",)
    assert forward.dtypes == backward.dtypes == ("float16", "bfloat16", "float32", "float64")


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("\ndtypes = [", "\nwhatever = 1\ndtypes = [", r"unknown keys \['whatever'\]; known:"),
        (
            'scalars = { eps = { type = "float", default = 1e-6 } }',
            'scalars = { eps = { type = "float", default = 1e-6 }, '
            'scale = { type = "float", example = 2.0 } }',
            r"\[scalars\] scale: has no default but follows one that has",
        ),
        (
            'scalars = { eps = { type = "float", default = 1e-6 } }',
            'scalars = { eps = { type = "double", default = 1e-6 } }',
            r'\[scalars\] eps: \{ type = "float" \| "int" \| "bool", default = ... \}',
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
            'backward = "my_rms_norm_backward(grad, x, weight, eps)"',
            'backward = "my_rms_norm_bwd(grad, x, weight, eps)"',
            "my_rms_norm backward: unknown name 'my_rms_norm_bwd'",
        ),
        (
            'backward = "my_rms_norm_backward(grad, x, weight, eps)"',
            'backward = "my_rms_norm_backward(grad, x, weight, epsilon)"',
            "my_rms_norm backward: unknown name 'epsilon'",
        ),
        (
            'backward = "my_rms_norm_backward(grad, x, weight, eps)"',
            'backward = "my_rms_norm_backward(grad, x, weight,"',
            "my_rms_norm backward = .*: not a Python expression",
        ),
        (
            'backward = "my_rms_norm_backward(grad, x, weight, eps)"',
            'backward = "my_rms_norm_backward(grad, x, weight, eps)"\n'
            'derivatives = { x = "1", weight = "1" }',
            r"my_rms_norm: give \[derivatives\] or backward, not both",
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
            'samples = { x = "torch.randn(6, n, dtype=dtype)", ',
            "samples = { ",
            r"samples: give one for each of \['x'\] \(the checks run the op on them\)",
        ),
        (
            'samples = { x = "torch.randn(6, n, dtype=dtype)", ',
            'samples = { x = "torch.randn(6, n, dtype=dtype)", bias = "torch.ones(n)", ',
            r"samples: \{ <tensor input> = .* for \['x', 'weight'\]",
        ),
        ('dtypes = ["float16",', 'dtypes = ["complex32", "float16",', "dtypes .*complex32"),
        (
            'name = "my_rms_norm"\n',
            'name = "my rms norm"\n',
            "op name 'my rms norm' is not an identifier",
        ),
        (
            'function = "rms_norm_forward"',
            'function = "rms_norm_forward"\nrule = "RmsNorm"',
            "my_rms_norm: give either `rule` .* or `function` and `kernels`",
        ),
        (
            'function = "rms_norm_forward"',
            'function = "rms_norm_forward"\nkernel = "vectorized"',
            r"my_rms_norm: \['kernel'\] are for ops with a `rule`",
        ),
        (
            "kernels = { rms_norm_backward = { vector = [true, false], "
            "per_thread = [0, 1, 2, 4] }, rms_norm_weight_grad = {} }\n",
            "",
            r"my_rms_norm_backward: missing `kernels`",
        ),
        (
            'function = "rms_norm_backward"\nkernels = {',
            'function = "rms_norm_backward"\nwhatever = {',
            r"my_rms_norm_backward: unknown keys \['whatever'\]",
        ),
        ('checks = ["eps >= 0"]', 'checks = ["eps >= 0 and eps < 1"]',
         r"checks 'eps >= 0 and eps < 1': write &&, \|\|, ! \(C\+\+\)"),
        ('checks = ["eps >= 0"]', 'checks = ["eps >= 0 or eps < 1"]',
         r"checks 'eps >= 0 or eps < 1': write &&, \|\|, ! \(C\+\+\)"),
        ('checks = ["eps >= 0"]', 'checks = ["x.numel() > 0"]',
         r"checks 'x.numel\(\) > 0' = .*: unknown name 'x'; it may use eps"),
        ('checks = ["eps >= 0"]', 'checks = ["torch.pi > eps"]', "unknown name 'torch'"),
    ],
    ids=["unknown key", "scalar default then none", "unknown scalar type", "no such function",
         "no such kernel", "values not ints", "when: unknown name", "when: none left",
         "when: raises", "backward: unknown op", "backward: unknown name",
         "backward: broken", "derivatives and backward", "reference: unknown name",
         "reference: misspelt torch", "samples: one missing", "samples: unknown input",
         "dtypes outside the core", "bad name", "rule and function", "a rule's key",
         "function without kernels", "unknown key in [[op]]", "checks: and", "checks: or",
         "checks: a tensor", "checks: torch"],
)  # fmt: skip
def test_a_bad_function_declaration_names_its_file_op_and_problem(tmp_path, old, new, problem):
    toml = rms_norm_copy(tmp_path)
    text = toml.read_text()
    assert old in text, old
    toml.write_text(text.replace(old, new, 1))
    with pytest.raises(declarations.OpDeclarationError,
                       match=f"^ops/rms_norm/ops.toml: .*{problem}"):  # fmt: skip
        load(toml.parents[1])


@pytest.mark.parametrize("missing", ["host.h", "kernels.cuh"])
def test_a_folder_without_its_kernels_or_host_functions_is_refused(tmp_path, missing):
    toml = rms_norm_copy(tmp_path)
    (toml.parent / missing).unlink()
    with pytest.raises(declarations.OpDeclarationError,
                       match=f"`function` needs {missing} next to it"):  # fmt: skip
        load(toml.parents[1])


def test_an_op_of_either_kind_under_anothers_name_is_refused(tmp_path):
    toml = rms_norm_copy(tmp_path)
    toml.write_text(toml.read_text().replace('name = "my_rms_norm"\n', 'name = "my_add"\n'))
    shutil.copytree(ROOT / "ops" / "add", toml.parents[1] / "add")
    with pytest.raises(declarations.OpDeclarationError,
                       match=r"\['my_add'\] declared more than once"):  # fmt: skip
        load(toml.parents[1])


def test_a_backward_may_call_its_folders_reference_functions(tmp_path):
    # A backward names other ops and reference.py's functions: those of the folder read,
    # wherever the ops folder is (here a folder the checkout's ops/ does not have).
    toml = rms_norm_copy(tmp_path, folder="norm_copy")
    toml.write_text(toml.read_text().replace(
        'backward = "my_rms_norm_backward(grad, x, weight, eps)"',
        'backward = "rms_norm_gradients(grad, x, weight, eps)"',
    ))  # fmt: skip
    forward = load(toml.parents[1]).ops[0]
    assert forward.backward == "rms_norm_gradients(grad, x, weight, eps)"


# --------------------------------------------------------------------------- the checkout's ops


def test_the_checkouts_declarations_read_back():
    decl = declarations.load()
    names = [op.name for op in decl.ops]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert {"my_add", "my_fast_add", "my_rms_norm", "my_rms_norm_backward"} <= set(names)
    folders = {p.parent.name for p in (ROOT / "ops").glob("*/ops.toml")}
    assert {op.folder for op in decl.ops} == folders
    for op in decl.ops:  # one kind or the other, never both
        assert op.elementwise == (op.function is None) == (op.kernel in declarations.KERNELS)
    assert decl.libraries == [f"{op.name}_{d}" for op in decl.ops for d in op.dtypes]


def test_the_record_carries_the_declarations_of_every_op():
    from cuda_ext_example import BUILD_INFO

    assert "custom_ops" not in BUILD_INFO  # one list: both kinds
    assert BUILD_INFO["ops"] == [op.record() for op in declarations.load().ops]
