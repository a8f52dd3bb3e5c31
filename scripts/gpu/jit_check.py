"""`make jit`: builds csrc/ and ops/ with cuda_ext_example.jit and checks every JIT-built
op against its torch reference on every device there is.
    python -m scripts.gpu.jit_check [CSRC]"""

import sys
import time

import torch

from cuda_ext_example import jit
from cuda_ext_example.op_checks import mismatches

source = sys.argv[1] if len(sys.argv) > 1 else None
start = time.perf_counter()
ops = jit.load(source, verbose=False)
print(f"JIT build + load: {time.perf_counter() - start:.1f} s -> torch.ops.{jit.NAMESPACE}")
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
for device in devices:
    wrong = [w for dtype in (torch.float32, torch.bfloat16, torch.int64)
             for w in mismatches(ops, device, dtype, n=100_003)]  # fmt: skip
    assert not wrong, (device, wrong)
    print(f"{device}: every op (JIT) matches its torch reference")
print("JIT OK")
