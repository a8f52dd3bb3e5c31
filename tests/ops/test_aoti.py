"""AOTInductor: a model that calls an elementwise op, RMSNorm forward and backward (the ops a
training step runs; AOTInductor compiles inference graphs, not autograd) and an in-place op,
exported, compiled and packaged, then loaded in a fresh process that imports only torch and
this package, and compared with eager. Where loading fails, a control model of torch's own
ops says whether the fault is the package's or the torch build's."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import cuda_ext_example

pytestmark = pytest.mark.slow  # a C++ compile of the model: about a minute on a CPU


class Model(torch.nn.Module):
    def forward(self, x, weight, grad, param, exp_avg, exp_avg_sq, step_grad):
        y = cuda_ext_example.my_fast_add(x, x)
        out = cuda_ext_example.my_rms_norm(y, weight)
        dx, dweight = cuda_ext_example.my_rms_norm_backward(grad, y, weight, 1e-6)
        cuda_ext_example.my_adamw_step(param, exp_avg, exp_avg_sq, step_grad, 1e-3, 1)
        return out, dx, dweight


class Control(torch.nn.Module):
    def forward(self, x):
        return torch.add(x, x)


def arguments(device) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(device)

    return [randn(4, 64), randn(64).abs() + 0.5, randn(4, 64), randn(64),
            randn(64), randn(64).abs(), randn(64)]  # fmt: skip


def package(model, args, path) -> str:
    exported = torch.export.export(model, tuple(a.clone() for a in args))
    return torch._inductor.aoti_compile_and_package(exported, package_path=str(path))


LOAD_AND_RUN = """
import sys, torch, cuda_ext_example
package, inputs, outputs = sys.argv[1:4]
args = torch.load(inputs)
loaded = torch._inductor.aoti_load_package(package)
results = loaded(*args)
torch.save({"results": list(results), "args": args}, outputs)
"""


def run_fresh(package_path, args, tmp_path) -> subprocess.CompletedProcess:
    torch.save(list(args), tmp_path / "in.pt")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LOAD_AND_RUN), package_path,
         tmp_path / "in.pt", tmp_path / "out.pt"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip


def test_a_packaged_model_of_our_ops_runs_in_a_fresh_process(device, tmp_path):
    args = arguments(device)
    path = package(Model(), args, tmp_path / "model.pt2")
    run = run_fresh(path, args, tmp_path)
    if run.returncode != 0:
        control = package(Control(), args[:1], tmp_path / "control.pt2")
        ran = run_fresh(control, args[:1], tmp_path)
        if ran.returncode != 0:
            pytest.skip(
                f"this torch's aoti_load_package fails for a model of torch.add alone too "
                f"(exit {ran.returncode}): {ran.stderr[-500:]}"
            )
        pytest.fail(f"our package failed where torch's own ran:\n{run.stderr[-3000:]}")
    saved = torch.load(tmp_path / "out.pt")
    eager = [a.clone() for a in args]
    want = Model()(*eager)
    for got, expected in zip(saved["results"], want, strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    for got, expected in zip(saved["args"][3:6], eager[3:6], strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)  # updated in place
