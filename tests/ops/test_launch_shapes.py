"""The per-GPU launch shapes (tuning/launch_shapes.toml): the compiled choice
(csrc/elementwise_launch.h, through the library's C hooks and ctypes:
cuda_ext_example._launch_shapes) is what the table says, for every
table, number of inputs, element size and tensor size, with no GPU; on a GPU every compiled
shape gives torch's answer bit for bit."""

from __future__ import annotations

import csv

import pytest
import torch

from buildtools import launch_shapes
from buildtools.launch_shapes import LaunchShapeError, Rule, Shape
from lab.tune import derive

TABLES = launch_shapes.load()
MEASUREMENTS = derive.MEASUREMENTS


@pytest.fixture(scope="module")
def compiled():
    from cuda_ext_example import _launch_shapes

    return _launch_shapes


def sizes_around(rules) -> list[int]:
    """Each rule's edges: its limit, one byte over, and 0."""
    out = [0, 1, 2**40]
    for rule in rules:
        if rule.up_to_bytes is not None:
            out += [rule.up_to_bytes - 1, rule.up_to_bytes, rule.up_to_bytes + 1]
    return out


def test_the_wheel_compiles_every_shape_the_tables_name(compiled):
    assert [Shape(*s) for s in compiled.vector_shapes()] == list(TABLES.compiled(False))


def vectorized_ops() -> list[str]:
    from cuda_ext_example.ops import DECLARATIONS

    return [name for name, op in DECLARATIONS.items() if op["kernel"] == "vectorized"]


@pytest.mark.parametrize("table", TABLES.tables, ids=[t.gpu for t in TABLES.tables])
@pytest.mark.parametrize("inputs", [1, 2, 3])
@pytest.mark.parametrize("element_bytes", launch_shapes.ELEMENT_BYTES)
def test_compiled_choice_is_the_tables(compiled, table, inputs, element_bytes):
    shapes = [Shape(*s) for s in compiled.vector_shapes()]
    gpu = table.gpu if table.gpu != launch_shapes.DEFAULT else "a GPU nobody measured"
    # No op: the inputs-N list; each vectorized op: its own list where the table has one.
    for op in [None, *vectorized_ops()]:
        for nbytes in sizes_around(table.rules_for(inputs, element_bytes, op)):
            args = (gpu, inputs, element_bytes, nbytes) + ((op,) if op else ())
            name, index = compiled.launch_shape(*args)
            assert name == table.gpu
            expected = table.shape_for(inputs, element_bytes, nbytes, op)
            assert shapes[index] == expected, (gpu, op, inputs, element_bytes, nbytes)


def test_an_op_may_have_lists_of_its_own(tmp_path):
    # An op with heavier math (GELU's tanh) measured on its own: its lists come first, the
    # other ops keep their inputs-N list; only that op compiles its own shapes.
    path = tmp_path / "launch_shapes.toml"
    path.write_text(
        "[default]\ninputs-1 = [{access = 16, block = 256, per-thread = 4}]\n"
        "op-my_gelu.element-2 = [{up-to-bytes = 4096, access = 8, block = 256, per-thread = 1},"
        " {access = 16, block = 128, per-thread = 1}]\n"
    )
    tables = launch_shapes.load(path)
    (table,) = tables.tables
    assert tables.own_ops() == ["my_gelu"]
    assert table.shape_for(1, 2, 4096, "my_gelu") == Shape(8, 256, 1)
    assert table.shape_for(1, 2, 4097, "my_gelu") == Shape(16, 128, 1)
    assert table.shape_for(1, 2, 4096, "my_square") == Shape(16, 256, 4)
    assert table.shape_for(1, 2, 4096) == Shape(16, 256, 4)
    assert tables.used_for(1, 2, "my_gelu") == {Shape(8, 256, 1), Shape(16, 128, 1)}
    assert tables.used_for(1, 2, "my_square") == {Shape(16, 256, 4)}
    assert len(tables.compiled(False)) == 3


def test_the_measured_tables_differ_by_element_size():
    """float32 and bfloat16 want different shapes (lab/tune/measurements): were the lists not
    told apart by element size, the test above could not tell a launcher that ignores it."""
    table = TABLES.tables[0]
    assert table.rules_for(2, 2) != table.rules_for(2, 4)


def test_unlisted_counts_and_sizes_take_the_nearest_listed_below():
    table = launch_shapes.GpuTable("t", "", {
        1: {2: (Rule(None, Shape(16, 128, 1)),), 4: (Rule(None, Shape(16, 256, 1)),)},
        2: {launch_shapes.ANY_ELEMENT: (Rule(None, Shape(8, 256, 1)),)},
    })  # fmt: skip
    assert table.rules_for(3, 4) == table.rules[2][launch_shapes.ANY_ELEMENT]  # 3 inputs: 2's
    assert table.rules_for(1, 8) == table.rules[1][4]  # 8-byte elements: the 4-byte list
    assert table.rules_for(1, 1) == table.rules[1][2]  # 1-byte: none below, the smallest


def test_bad_arguments_are_refused(compiled):
    with pytest.raises(ValueError, match="inputs must be 1..3"):
        compiled.launch_shape("x", 4, 4, 10)
    with pytest.raises(ValueError, match="element_bytes >= 1"):
        compiled.launch_shape("x", 1, 0, 10)
    with pytest.raises(ValueError, match="bytes >= 0, got 1, 4, -1"):
        compiled.launch_shape("x", 1, 4, -1)
    with pytest.raises(ValueError, match="not a compiled shape"):
        compiled.force_launch_shape(len(compiled.vector_shapes()))
    with pytest.raises(ValueError, match="-2 is not a compiled shape"):
        compiled.force_launch_shape(-2)
    compiled.force_launch_shape(-1)  # the tables again: no error


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[gpu.x]\ninputs-1 = [{access = 16, block = 256, per-thread = 1}]\n",
         "needs \\[default\\]"),
        ("[default]\ninputs-1 = [{up-to-bytes = 5, access = 16, block = 256, per-thread = 1}]\n",
         "last shape must have no up-to-bytes"),
        ("[default]\ninputs-1 = [{access = 4, block = 256, per-thread = 1}]\n", "access = 4"),
        ("[default]\ninputs-1 = [{access = 16, block = 100, per-thread = 1}]\n", "block 100"),
        ("[default]\ninputs-1 = [{access = 16, block = 1056, per-thread = 1}]\n", "block 1056"),
        ("[default]\ninputs-1 = [{access = 16, block = 16, per-thread = 1}]\n", "block 16"),
        ("[default]\ninputs-9 = [{access = 16, block = 256, per-thread = 1}]\n", "inputs-9"),
        ("[default]\ninputs-1 = [{access = 16, block = 256, per-thread = 1}]\n"
         "op-my-gelu = [{access = 16, block = 256, per-thread = 1}]\n",
         "unknown key 'op-my-gelu'; inputs-1 .. inputs-3, op-<op name> or measured"),
        ("[default]\ninputs-1 = [{access = 16, block = 256, per-thread = 1}]\n"
         "op-my_gelu.element-3 = [{access = 16, block = 256, per-thread = 1}]\n",
         "op-my_gelu.element-3"),
        ("[default]\ninputs-1.element-3 = [{access = 16, block = 256, per-thread = 1}]\n",
         "inputs-1.element-3"),
        ("[default]\ninputs-1.bytes-4 = [{access = 16, block = 256, per-thread = 1}]\n",
         "inputs-1.bytes-4"),
        ("[default]\ninputs-1 = [{up-to-bytes = 9, access = 16, block = 256, per-thread = 1},\n"
         "  {up-to-bytes = 8, access = 8, block = 256, per-thread = 1},\n"
         "  {access = 8, block = 256, per-thread = 1}]\n", "must increase"),
        # the load flavour: one of the named ones, the file and the entry named
        ('[default]\ninputs-1 = [{access = 16, block = 256, per-thread = 1, load = "evict"}]\n',
         r"launch_shapes.toml \[default\] inputs-1: load = 'evict'; one of \['default', "
         r"'evict-first'\]"),
        ("[default]\ninputs-1 = [{access = 16, block = 256, per-thread = 1, load = 1}]\n",
         "load = 1; one of"),
        ('[candidates]\nshapes = [{access = 16, block = 128, per-thread = 2, load = "ef"}]\n'
         "[default]\ninputs-1 = [{access = 16, block = 256, per-thread = 1}]\n",
         r"\[candidates\]: load = 'ef'"),
        # a misspelt key is refused, not ignored (it would compile the read-only load)
        ('[default]\ninputs-1 = [{access = 16, block = 256, per-thread = 1, laod = "evict-first"'
         "}]\n", r"unknown keys \['laod'\]"),
    ],
)  # fmt: skip
def test_a_bad_table_is_refused_with_its_fault(tmp_path, text, problem):
    path = tmp_path / "launch_shapes.toml"
    path.write_text(text)
    with pytest.raises(LaunchShapeError, match=problem):
        launch_shapes.load(path)


def test_a_block_need_not_be_a_power_of_two(tmp_path):
    # 768 threads: two blocks fill 75% of an SM's threads.
    path = tmp_path / "launch_shapes.toml"
    path.write_text("[default]\ninputs-1 = [{access = 16, block = 768, per-thread = 1}]\n")
    assert list(launch_shapes.load(path).compiled(False)) == [Shape(16, 768, 1)]


def test_a_shape_may_load_its_inputs_evict_first(tmp_path):
    # A load flavour per shape; absent, the read-only load.
    path = tmp_path / "launch_shapes.toml"
    path.write_text(
        "[candidates]\n"
        'shapes = [{access = 16, block = 128, per-thread = 2, load = "evict-first"}]\n'
        "[default]\ninputs-1 = [\n"
        '  {up-to-bytes = 4096, access = 16, block = 128, per-thread = 2, load = "evict-first"},\n'
        '  {up-to-bytes = 8192, access = 16, block = 128, per-thread = 2, load = "default"},\n'
        "  {access = 16, block = 128, per-thread = 2}]\n"
    )
    table = launch_shapes.load(path)
    evict_first = Shape(16, 128, 2, "evict-first")
    assert table.candidates == (evict_first,)
    default = table.tables[0]
    assert [rule.shape for rule in default.rules[1][launch_shapes.ANY_ELEMENT]] == [
        evict_first, Shape(16, 128, 2), Shape(16, 128, 2)
    ]  # fmt: skip
    assert Shape(16, 128, 2) == Shape(16, 128, 2, "default")  # the old three fields: default
    assert default.shape_for(1, 4, 4096) == evict_first
    assert default.shape_for(1, 4, 4097) == Shape(16, 128, 2)
    # Two instances of one access, block and per-thread: the read-only one sorts first.
    assert list(table.compiled(False)) == [Shape(16, 128, 2), evict_first]
    assert str(Shape(16, 128, 2)) == "16B x2 /128"  # the labels of the CSVs, as before
    assert str(evict_first) == "16B x2 /128 evict-first"


def test_the_generated_table_carries_the_load_flavour():
    extra = {Shape(8, 256, 1), Shape(16, 128, 2), Shape(16, 128, 2, "evict-first")}
    shapes = launch_shapes.LaunchShapes((), (TABLES.tables[0],))
    lines = launch_shapes.c_tables(shapes, tuple(sorted(set(TABLES.compiled(False)) | extra)))

    def row(access, block, per_thread, load):
        fields = f".access_bytes = {access}, .block = {block}, .per_thread = {per_thread}"
        return f"    {{{fields}, .load = {load}}},"

    assert row(8, 256, 1, 0) in lines and row(16, 128, 2, 0) in lines
    assert row(16, 128, 2, 1) in lines  # VectorShape::load indexes cee_load_names
    assert 'static const char* const cee_load_names[2] = {"default", "evict-first"};' in lines


def test_an_evict_first_shape_is_a_kernel_instance_of_its_own(monkeypatch):
    from buildtools import declarations, device_code

    decl = declarations.load()
    monkeypatch.setenv("CEE_TUNING_CANDIDATES", "1")  # make tune-wheel
    tuning = [k.expression for k in device_code.instances(decl)]
    head = "cee::elementwise_vectorized<cee_rule_add::Signature, float, 16, 128, 2, "
    assert head + "cee::kLoadEvictFirst>" in tuning
    assert head + "cee::kLoadReadOnly>" in tuning
    # The release build: the flavours the tables name (today only the read-only load: the
    # kernels it has always compiled, the flavour now spelt out).
    monkeypatch.delenv("CEE_TUNING_CANDIDATES")
    release = [k.expression for k in device_code.instances(decl)]
    flavours = {e.rsplit(", ", 1)[1] for e in release if "elementwise_vectorized" in e}
    assert flavours == {device_code.LOAD_CONSTANTS[s.load] + ">" for s in TABLES.compiled(False)}


def test_each_evict_first_candidate_has_its_read_only_twin():
    """The tuner times an evict-first shape to weigh it against the same shape's read-only
    load: both must be candidates."""
    evict_first = [s for s in TABLES.candidates if s.load == "evict-first"]
    assert evict_first, "no evict-first candidate in tuning/launch_shapes.toml"
    for shape in evict_first:
        twin = Shape(shape.access, shape.block, shape.per_thread)
        assert twin in TABLES.candidates, shape


def test_tuning_candidates_compile_only_when_asked(tmp_path, monkeypatch):
    # A table of its own, so that the switch is tested whatever tuning/ lists today.
    path = tmp_path / "launch_shapes.toml"
    path.write_text(
        "[candidates]\nshapes = [{access = 8, block = 512, per-thread = 2},\n"
        "  {access = 16, block = 256, per-thread = 1}]\n"
        "[default]\ninputs-1 = [{up-to-bytes = 4096, access = 16, block = 256, per-thread = 1},\n"
        "  {access = 16, block = 128, per-thread = 4}]\n"
        '[gpu."X"]\ninputs-2 = [{access = 8, block = 256, per-thread = 1}]\n'
    )
    table = launch_shapes.load(path)
    named = [Shape(8, 256, 1), Shape(16, 128, 4), Shape(16, 256, 1)]
    every = sorted([*named, Shape(8, 512, 2)])
    assert table.candidates == (Shape(8, 512, 2), Shape(16, 256, 1))
    monkeypatch.delenv("CEE_TUNING_CANDIDATES", raising=False)
    assert list(table.compiled()) == named
    for value in ("0", "", "yes"):  # only "1" asks
        monkeypatch.setenv("CEE_TUNING_CANDIDATES", value)
        assert list(table.compiled()) == named, value
    monkeypatch.setenv("CEE_TUNING_CANDIDATES", "1")
    assert list(table.compiled()) == every
    # An explicit argument overrides the environment, either way.
    assert list(table.compiled(False)) == named
    monkeypatch.delenv("CEE_TUNING_CANDIDATES")
    assert list(table.compiled(True)) == every


def test_the_table_keeps_every_measured_shape_as_a_candidate():
    """A tuning wheel (make tune-wheel) compiles [candidates]: every shape lab/tune/measurements
    timed must stay one, or the next measurement cannot time the shapes the tables dropped."""
    measured = {
        derive.parse_shape(m["shape"])
        for path in sorted(MEASUREMENTS.glob("*.csv"))
        for m in csv.DictReader(path.read_text().splitlines())
        if m["shape"] not in derive.NOT_SHAPES
    }
    assert measured, "no measurements in lab/tune/measurements"
    named = set(TABLES.compiled(False))
    assert measured - named, "every measured shape is in a table: this test proves nothing"
    assert measured <= set(TABLES.candidates), sorted(measured - set(TABLES.candidates))


@pytest.mark.gpu
def test_every_compiled_shape_equals_the_reference_on_this_gpu(compiled, any_op):
    """Per-GPU tables mean a GPU runs only its own shapes; forcing each one runs them all here:
    odd sizes (the tail), every dtype the op has."""
    op = any_op.declaration
    if op["kernel"] != "vectorized":
        pytest.skip("only the vectorized kernel has launch shapes")
    try:
        for index in range(len(compiled.vector_shapes())):
            compiled.force_launch_shape(index)
            for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.float64):
                if dtype in any_op.dtypes:
                    for n in (1, 37, 4096 * 3 + 5, 2**20 + 3):
                        any_op.check(any_op.sample((n,), dtype, "cuda"))
    finally:
        compiled.force_launch_shape(-1)


@pytest.mark.gpu
def test_the_tuner_times_each_shape_the_reference_and_the_copy_in_every_round(compiled):
    from lab.bench.timing import Settings
    from lab.tune import measure

    shapes = [Shape(*s) for s in compiled.vector_shapes()][:2]
    op = measure.vectorized_ops()[2]
    settings = Settings(5, 20, rounds=3)  # the tuner's budgets, fewer rounds
    times = measure.time_cell(op, "float32", 2**20, shapes, settings)
    assert set(times) == {str(s) for s in shapes} | {measure.REFERENCE, measure.COPY}
    assert all(len(rounds) == 3 and min(rounds) > 0 for rounds in times.values())
    relative = measure.vs_reference(times)
    assert relative[measure.REFERENCE] == (1.0, 0.0)
    # a shape's ratio is its time over the reference's round by round, not of their medians
    first = str(shapes[0])
    ratios = sorted(a / b for a, b in zip(times[first], times[measure.REFERENCE], strict=True))
    assert relative[first][0] == pytest.approx(ratios[1])
