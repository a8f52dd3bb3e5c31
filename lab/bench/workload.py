"""What a benchmark workload declares (add.py, square.py): its implementations, inputs,
traffic, sizes and targets. A new op's workload is one more such declaration."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .report import COPY, DTYPE_BYTES, Record, Target, size_label, spread_pct
from .timing import Settings


@dataclass(frozen=True)
class Extra:
    """What a workload measures besides its GB/s cells (the add's host time per call): its
    targets, its section of the report and its lines on stdout."""

    targets: list[Target] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)
    text: str = ""


@dataclass(frozen=True)
class Workload:
    name: str  # --workload NAME, the report's title and file names
    peers: tuple[str, ...]  # the first is the reference every implementation must equal
    ours: tuple[str, ...]  # this package's ops; the last is the one the targets judge
    input_shapes: Callable[[int], list[tuple[int, ...]]]  # size -> each input's shape
    about: str  # the report's sentence on what one call does and how GB/s is counted
    size_name: str  # what a size counts, for the tables and the plot
    sizes: str  # default --sizes (log2), then --quick's
    quick_sizes: str
    max_log2: int
    dtypes: tuple[str, ...]  # default --dtypes
    # GPU side: (compile_dynamic, sizes to compile for) -> name -> fn(*inputs) for every peer
    # and ours; and what else the workload measures.
    implementations: Callable[[bool, int], dict[str, Callable]]
    targets: Callable[[Sequence[Record], float], list[Target]]  # (records, roofline)
    extra: Callable[[Settings], Extra] | None = None
    # Tensors read or written per call, where it is not each input read and one output
    # written (an in-place update reads and writes what it updates).
    traffic: int | None = None
    # {dtype: {rtol, atol}, or a list of them, one per output}: how close the implementations
    # must agree before they are timed (torch.testing's), where not bit for bit; and what
    # each returns to compare (an in-place update returns the tensors it updated).
    tolerance: dict[str, dict[str, float] | list[dict[str, float]]] | None = None
    # Random inputs made fit for the op (the AdamW step's exp_avg_sq >= 0).
    prepare: Callable[[list], list] | None = None
    # Sizes it measures instead of 2^k, in order (RMSNorm's rows x hidden shapes, each a code
    # that input_shapes reads), their names, and --quick's: --sizes does not apply then.
    # Distributions the peers come from (liger-kernel, ...): their versions go in the report.
    peer_packages: tuple[str, ...] = ()
    cases: tuple[int, ...] = ()
    quick_cases: tuple[int, ...] = ()
    case_label: Callable[[int], str] | None = None

    def label(self, size: int) -> str:
        """How the tables name a size: 2^k, or the case's name."""
        return self.case_label(size) if self.case_label else size_label(size)

    def plot_x(self, size: int) -> int:
        """Where a size sits on the plot's x axis: log2(size), or the case's position."""
        return self.cases.index(size) if self.cases else size.bit_length() - 1

    def make_inputs(self, size: int, dtype: str, random_tensor: Callable) -> list:
        tensors = [random_tensor(shape, dtype) for shape in self.input_shapes(size)]
        return self.prepare(tensors) if self.prepare else tensors

    @property
    def judged(self) -> str:
        return self.ours[-1]

    @property
    def impls(self) -> tuple[str, ...]:
        """Every implementation in report order: peers, ours, then the size-matched copy."""
        return (*self.peers, *self.ours, COPY)

    @property
    def tensors(self) -> int:
        """Tensors of traffic per call: each input read, the output written (or `traffic`)."""
        return self.traffic or len(self.input_shapes(1)) + 1

    def gbps(self, size: int, dtype: str, ms: float) -> float:
        """GB/s (1e9 bytes) of one call at `size`: every tensor read or written once."""
        numel = math.prod(self.input_shapes(size)[0])
        return self.tensors * numel * DTYPE_BYTES[dtype] / (ms * 1e-3) / 1e9

    def record(self, size: int, dtype: str, impl: str, rounds_ms: Sequence[float]) -> Record:
        """One cell timed in rounds: their median, spread and GB/s."""
        ms = statistics.median(rounds_ms)
        return Record(
            size,
            dtype,
            impl,
            ms,
            self.gbps(size, dtype, ms),
            spread_pct(rounds_ms),
            tuple(rounds_ms),
        )
