"""`make jit`: builds csrc/ and ops/ with scripts.jit and checks every JIT-built
op against its torch reference on every device there is.
    python -m lab.gpu.jit_check [CSRC]

Exit status 0 when every op matches, 1 otherwise; what went wrong is one line (no GPU, no
NVRTC, a build error, a mismatch), not a traceback."""

from __future__ import annotations

import sys
import time

PROG = "lab.gpu.jit_check"


def main(argv: list[str]) -> int:
    import torch

    from cuda_ext_example.op_checks import mismatches
    from scripts import jit

    source = argv[0] if argv else None
    start = time.perf_counter()
    try:
        ops = jit.load(source, verbose=False)
    except (OSError, RuntimeError, ImportError) as exc:  # no GPU, no NVRTC, a build error
        print(f"{PROG}: the JIT build failed: {exc}", file=sys.stderr)
        return 1
    print(f"JIT build + load: {time.perf_counter() - start:.1f} s -> torch.ops.{jit.NAMESPACE}")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        wrong = [w for dtype in (torch.float32, torch.bfloat16, torch.int64)
                 for w in mismatches(ops, device, dtype, n=100_003)]  # fmt: skip
        if wrong:
            print(f"{PROG}: {device}: JIT-built ops differ from torch: {wrong}", file=sys.stderr)
            return 1
        print(f"{device}: every op (JIT) matches its torch reference")
    print("JIT OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
