"""The kernels Nsight Compute profiles in `python -m lab.gpu tools`: each op a few times
on 2^24 float32 and bf16 elements (large enough to stream from HBM, small enough for Nsight
Compute's replays to be quick)."""

import sys

import torch

import cuda_ext_example

if not torch.cuda.is_available():
    sys.exit("lab.gpu.ncu_target: needs a CUDA GPU (Nsight Compute profiles it)")

for dtype in (torch.float32, torch.bfloat16):
    a = torch.randn(2**24, device="cuda", dtype=dtype)
    b = torch.randn(2**24, device="cuda", dtype=dtype)
    for _ in range(2):
        cuda_ext_example.my_add(a, b)
        cuda_ext_example.my_fast_add(a, b)
        torch.add(a, b)
torch.cuda.synchronize()
