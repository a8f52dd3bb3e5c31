"""`make jit`: builds csrc/ with cuda_ext_example.jit and checks the JIT-built ops
against torch.add on every device there is.   python -m scripts.gpu.jit_check [CSRC]"""

import sys
import time

import torch

from cuda_ext_example import jit

source = sys.argv[1] if len(sys.argv) > 1 else None
start = time.perf_counter()
ops = jit.load(source, verbose=False)
print(f"JIT build + load: {time.perf_counter() - start:.1f} s -> torch.ops.{jit.NAMESPACE}")
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
for device in devices:
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        a = torch.randn(100_003, device=device).mul(100).to(dtype)
        b = torch.randn(100_003, device=device).mul(100).to(dtype)
        for name in ("my_add", "my_fast_add"):
            out = getattr(ops, name)(a, b)
            assert torch.equal(out, torch.add(a, b)), (name, device, dtype)
    print(f"{device}: my_add and my_fast_add (JIT) match torch.add")
print("JIT OK")
