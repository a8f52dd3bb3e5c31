"""The RMSNorm workloads on fake timings: their shapes, the command line, the targets (median
and every shape against the best peer; the forward against the size-matched copy) and the
report, where sizes are named shapes rather than 2^k. No GPU."""

from __future__ import annotations

import pytest

from lab.bench import benchmark, report, rms_norm, timing

FORWARD, TRAIN = rms_norm.FORWARD, rms_norm.TRAIN
ROOFLINE = 3000.0
GBPS = {"torch rms_norm": 1800.0, "torch.compile": 2000.0, "liger": 2100.0, "quack": 2400.0,
        "my_rms_norm": 2500.0, report.COPY: 2700.0}  # fmt: skip


def records(workload, overrides=None, cases=rms_norm.CASES):
    out = []
    for dtype in ("bfloat16", "float32"):
        for code in cases:
            numel = rms_norm.shape_of(code)[0] * rms_norm.shape_of(code)[1]
            for impl, gbps in {**GBPS, **(overrides or {}).get((code, dtype), {})}.items():
                nbytes = workload.tensors * numel * report.DTYPE_BYTES[dtype]
                out.append(workload.record(code, dtype, impl, [nbytes / (gbps * 1e9) * 1e3]))
    return out


def test_the_cases_are_the_llm_shapes_in_order():
    shapes = [rms_norm.shape_of(c) for c in rms_norm.CASES]
    assert shapes == [(r, h) for r in (4096, 16384, 65536) for h in (1024, 2048, 4096, 8192, 16384)]
    assert list(rms_norm.CASES) == sorted(rms_norm.CASES)  # the plot's lines run in order
    assert FORWARD.label(rms_norm.case(16384, 4096)) == "16384x4096"
    assert FORWARD.input_shapes(rms_norm.case(4096, 1024)) == [(4096, 1024), (1024,)]
    assert TRAIN.input_shapes(rms_norm.case(4096, 1024))[2] == (4096, 1024)
    assert FORWARD.gbps(rms_norm.case(4096, 1024), "bfloat16", 1.0) == pytest.approx(
        2 * 4096 * 1024 * 2 / 1e-3 / 1e9
    )


def test_cli_takes_the_workloads_own_shapes_or_some_of_them_by_name(capsys):
    args = benchmark.parse_args(["--workload", "rms_norm_train"])
    assert args.sizes == list(rms_norm.CASES) and args.dtypes == ["bfloat16", "float32"]
    assert benchmark.parse_args(["--workload", "rms_norm", "--quick"]).sizes == list(
        rms_norm.QUICK_CASES
    )
    some = benchmark.parse_args(["--workload", "rms_norm", "--sizes", "65536x4096, 4096x1024"])
    assert some.sizes == [rms_norm.case(4096, 1024), rms_norm.case(65536, 4096)]
    for bad, got in (("20", "20"), ("4096x1024,4096x1000", "4096x1000"), (",", "none")):
        with pytest.raises(SystemExit):
            benchmark.parse_args(["--workload", "rms_norm", "--sizes", bad])
        said = capsys.readouterr().err
        assert "measures its own shapes: name them from 4096x1024, 4096x2048, " in said
        assert f"(got {got})" in said


def test_targets_pass_when_ours_beats_every_peer_and_nears_the_copy():
    targets = FORWARD.targets(records(FORWARD), ROOFLINE)
    assert [t.status for t in targets] == [report.PASS] * 3
    assert "median 1.042x" in targets[0].measured  # 2500 / 2400


def test_one_slow_shape_misses_every_shape_but_not_the_median():
    slow = {(rms_norm.case(4096, 1024), "bfloat16"): {"my_rms_norm": 2000.0}}
    median, every, copy = FORWARD.targets(records(FORWARD, slow), ROOFLINE)
    assert median.status == report.PASS
    assert every.status == report.MISS and "bfloat16 4096x1024 0.833x" in every.measured
    assert copy.status == report.PASS  # 4096 x 1024 is below 2^26 elements: not judged


def test_the_copy_target_judges_the_forward_from_2_26_elements():
    slow = {(rms_norm.case(65536, 1024), "float32"): {"my_rms_norm": 2400.0, "quack": 2300.0}}
    copy = FORWARD.targets(records(FORWARD, slow), ROOFLINE)[2]
    assert copy.status == report.MISS and "float32 65536x1024 0.889x" in copy.measured
    assert len(TRAIN.targets(records(TRAIN), ROOFLINE)) == 2  # no copy target for training


def test_a_run_without_liger_and_quack_judges_the_peers_it_has():
    partial = [r for r in records(FORWARD) if r.impl not in ("liger", "quack")]
    median = FORWARD.targets(partial, ROOFLINE)[0]
    assert median.status == report.PASS and "median 1.250x" in median.measured


def test_a_partial_run_judges_no_target_but_names_what_it_measured():
    # Two shapes, or one dtype: no median over all shapes, no PASS for the shapes not run.
    some = (rms_norm.case(65536, 4096), rms_norm.case(16384, 16384))
    median, every, copy = FORWARD.targets(records(FORWARD, cases=some), ROOFLINE)
    assert [t.status for t in (median, every, copy)] == [report.NA] * 3
    assert "median 1.042x over the 4 of 30 shapes measured (a partial run)" in median.measured
    assert "26 not measured" in every.measured and "14 not measured" in copy.measured
    float32_only = [r for r in records(TRAIN) if r.dtype == "float32"]
    median, every = TRAIN.targets(float32_only, ROOFLINE)
    assert (median.status, every.status) == (report.NA, report.NA)
    assert "15 of 30" in median.measured
    # ...but a measured miss is a MISS however few shapes ran.
    slow = {(some[0], "float32"): {"my_rms_norm": 2000.0}}
    every = FORWARD.targets(records(FORWARD, slow, cases=some), ROOFLINE)[1]
    assert every.status == report.MISS and "float32 65536x4096 0.833x" in every.measured


def test_report_names_the_shapes(tmp_path):
    meta = {"date": "2026-11-27", "GPU": "NVIDIA H100 80GB HBM3"}
    data = records(FORWARD, cases=rms_norm.QUICK_CASES)
    paths, _, rows = report.write_reports(FORWARD, data, ROOFLINE, meta, tmp_path, "2026-11-27")
    md = paths["md"].read_text()
    assert "| 16384x8192 |" in md and "| rows x hidden |" in md
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"
    assert "65536x2048" in report.format_table(rows, FORWARD.size_name, FORWARD.label)


@pytest.mark.parametrize("workload", [rms_norm.FORWARD, rms_norm.TRAIN], ids=lambda w: w.name)
def test_ours_agrees_with_torch_within_the_workloads_tolerance_on_the_cpu(workload):
    # What the GPU run checks before it times, here on CPU tensors (torch.compile and the
    # GPU-only peers left out); a wrong dweight is caught, named by its output.
    torch = pytest.importorskip("torch")
    pytest.importorskip("cuda_ext_example")
    impls = workload.implementations(False, 2)
    for name in ("torch.compile", "liger", "quack"):
        impls.pop(name, None)
    random = lambda shape, dtype: torch.randn(shape, dtype=getattr(torch, dtype))  # noqa: E731
    inputs = workload.make_inputs(rms_norm.case(256, 96), "float32", random)
    timing.check_outputs(impls, inputs, workload.peers[0], "f32", workload.tolerance["float32"])
    if workload is rms_norm.TRAIN:
        ours = impls[rms_norm.JUDGED]
        wrong = {**impls, rms_norm.JUDGED: lambda *a: (ours(*a)[0], ours(*a)[1] * 1.01)}
        with pytest.raises(SystemExit, match="FAIL my_rms_norm f32, output 1"):
            timing.check_outputs(
                wrong, inputs, workload.peers[0], "f32", workload.tolerance["float32"]
            )


def test_the_report_names_the_peers_packages_and_their_versions():
    assert FORWARD.peer_packages == TRAIN.peer_packages
    said = benchmark.peer_versions(("pytest", "no-such-distribution-here"))
    assert said == f"pytest {pytest.__version__}, no-such-distribution-here not installed"
