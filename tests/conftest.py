"""Shared fixtures. The tests import the *installed* cuda_ext_example (make test
installs the repaired wheel first), never the source tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
from filelock import FileLock

import cuda_ext_example

ROOT = Path(__file__).resolve().parent.parent
HAS_CUDA = torch.cuda.is_available()

if Path(cuda_ext_example.__file__).resolve().parent == ROOT / "src" / "cuda_ext_example":
    raise RuntimeError(
        "tests imported cuda_ext_example from the source tree; run `make test` "
        "(it installs the built wheel) and call pytest, not python -m pytest"
    )


class DeclaredOp:
    """One op of ops/*/ops.toml as the tests see it: its declared dtypes, sample arguments
    (its tensors from the declared samples or the core's, then its scalars' defaults or
    examples), its results (outputs, then the inputs it updates in place, on copies) and the
    check against its reference: bit for bit, or within the declared tolerance."""

    def __init__(self, name: str):
        from cuda_ext_example import op_checks

        self.__name__ = name
        self.declaration = cuda_ext_example.ops.DECLARATIONS[name]
        self.function = getattr(cuda_ext_example, name)
        self.reference = op_checks.reference(self.declaration, FUNCTIONS)
        self.inputs = cuda_ext_example.ops.tensor_names(self.declaration)
        self.arity = len(self.inputs)
        self.mutates = [a["name"] for a in self.declaration["arguments"] if a["mutable"]]
        self.numbers = [a["name"] for a in self.declaration["arguments"] if a["number"]]
        self.dtypes = [getattr(torch, d) for d in self.declaration["dtypes"]]
        self.scalars = [a["sample"] for a in self.declaration["arguments"][self.arity :]]
        self.outputs = len(self.declaration["outputs"])
        self.functional = not self.mutates and self.outputs == 1
        self.differentiable = self.declaration["backward"] is not None
        self.broadcasts = self.declaration["broadcasts"]

    def __call__(self, *args):
        return self.function(*args)

    def arguments(self, n: int, dtype, device, seed: int = 0) -> list:
        """Its declared samples of size n (seeded), tensors then scalars."""
        from cuda_ext_example import op_checks

        return op_checks.sample_arguments(self.declaration, n, dtype, device, seed)

    def sample(self, shape, dtype, device, seed: int = 0) -> list:
        """Its tensors for an op that broadcasts, each of `shape` (the core's samples)."""
        assert self.broadcasts, f"{self.__name__} does not broadcast: use arguments(n, ...)"
        n = 1
        for size in shape:
            n *= size
        tensors = self.arguments(n, dtype, device, seed)[: self.arity]
        return [t.reshape(shape) for t in tensors]

    def results(self, tensors, function=None) -> tuple:
        """function(*tensors, *scalars)'s results (tensors alone: the samples' scalars)."""
        from cuda_ext_example import op_checks

        args = list(tensors) + self.scalars[len(tensors) - self.arity :]
        return op_checks.results(function or self.function, self.declaration, args)

    def expected(self, tensors) -> tuple:
        return self.results(tensors, self.reference)

    def check(self, tensors, function=None) -> tuple:
        """Runs the op (or `function`, called like it) and its reference on `tensors` (its
        arguments, or its tensors alone); asserts they agree as the declaration says;
        returns the op's results."""
        from cuda_ext_example import op_checks

        ours = self.results(tensors, function)
        problem = op_checks.difference(self.declaration, ours, self.expected(tensors))
        assert problem is None, f"{self.__name__} {tensors[0].dtype}: {problem}"
        return ours

    def __repr__(self) -> str:
        return self.__name__


FUNCTIONS = {name: getattr(cuda_ext_example, name) for name in cuda_ext_example.OP_NAMES}
# Every declared op (the per-op tests run on each: `any_op`), the functional ones (one new
# output, nothing updated in place), the differentiable ones, and the adds (`op`: the tests
# of the elementwise core, run on a + b itself, its classic arange, its numbers).
DECLARED = {name: DeclaredOp(name) for name in cuda_ext_example.OP_NAMES}
FUNCTIONAL = {name: op for name, op in DECLARED.items() if op.functional}
DIFFERENTIABLE = {name: op for name, op in DECLARED.items() if op.differentiable}
OPS = {
    name: op for name, op in DECLARED.items() if op.declaration["reference"] == "torch.add(a, b)"
}

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _mem_available_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def pytest_collection_modifyitems(config, items):
    count = torch.cuda.device_count() if HAS_CUDA else 0
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU"))
        if "multigpu" in item.keywords and count < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2 GPUs, found {count}"))
        if "large" in item.keywords and _mem_available_gib() < 16:
            item.add_marker(pytest.mark.skip(reason="needs 16 GiB of free host memory"))
    # The release and slow tests first: make test's workers start the long builds at once
    # and the quick tests fill the gaps, instead of one long build ending the run alone.
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in ("release", "slow")))


def pytest_report_header(config):
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return [
        f"cuda_ext_example {cuda_ext_example.__version__} "
        f"from {Path(cuda_ext_example.__file__).parent}",
        f"torch {torch.__version__} (CUDA {torch.version.cuda}), GPUs: {gpus or 'none'}",
        f"CEE build: {cuda_ext_example.BUILD_INFO}",
    ]


@pytest.fixture(scope="session")
def good_wheel() -> Path:
    """The one repaired wheel of this session (make test / make install builds it): the
    release tests plant their faults in copies of it."""
    wheels = sorted((ROOT / "wheelhouse").glob("*.whl"))
    assert len(wheels) == 1, (
        f"expected one repaired wheel in wheelhouse/, found {wheels}: make repair"
    )
    return wheels[0]


@pytest.fixture(scope="session")
def windows_wheel() -> Path:
    """This checkout's Windows wheel (make wheel ARCH=win_amd64: zig cross-links the DLL
    against torch's win_amd64 import library; rebuilt only when a source changed): the
    Windows gates' tests plant their faults in copies of it."""
    # make test's workers each ask for it: one builds, the others then find it built.
    (ROOT / "build").mkdir(exist_ok=True)
    with FileLock(ROOT / "build" / "windows-wheel.lock"):
        run = subprocess.run(
            ["make", "--no-print-directory", "wheel", "ARCH=win_amd64"],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    (wheel,) = (ROOT / "build" / "win_amd64" / "dist").glob("*.whl")
    return wheel


@pytest.fixture(params=list(OPS), ids=list(OPS))
def op(request):
    return OPS[request.param]


@pytest.fixture(params=list(DECLARED), ids=list(DECLARED))
def any_op(request):
    return DECLARED[request.param]


@pytest.fixture(params=list(FUNCTIONAL), ids=list(FUNCTIONAL))
def functional_op(request):
    return FUNCTIONAL[request.param]


@pytest.fixture(params=list(DIFFERENTIABLE), ids=list(DIFFERENTIABLE))
def diff_op(request):
    return DIFFERENTIABLE[request.param]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(scope="session")
def cfg():
    """The build targets of pyproject.toml, as a release must carry them."""
    from buildtools import config

    return config.load(dev_spec="")


@pytest.fixture(scope="session")
def torch_include():
    from buildtools.toolchain import torch_paths

    return torch_paths()[0]
