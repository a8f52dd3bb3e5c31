"""Every declared op against the torch function it equals bit for bit (its ops.toml
`reference`): what doctor, the smoke test, the sanitizer run and the JIT check run, so a
new op is checked by all of them without being named anywhere."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .ops import DECLARATIONS


def reference(op: dict) -> Callable:
    """'torch.square' -> torch.square (a torch function; nothing else is looked up)."""
    path = op["reference"].split(".")
    if path[0] != "torch":
        raise ValueError(f"{op['name']}: reference {op['reference']!r} is not a torch function")
    found = torch
    for part in path[1:]:
        found = getattr(found, part)
    return found


def sample_inputs(op: dict, n: int, device, dtype=torch.float32, generator=None) -> list:
    """One tensor per input, values spread over the dtype (integers wrap past their range)."""
    return [(torch.randn(n, generator=generator) * 100).to(dtype).to(device) for _ in op["inputs"]]


def mismatches(ops_module, device, dtype=torch.float32, n: int = 1000) -> list[str]:
    """'<op> <dtype>' for each op of `ops_module` (cuda_ext_example, or the JIT's torch.ops
    namespace) whose result differs from its reference on `device`."""
    wrong = []
    for name, op in DECLARATIONS.items():
        if str(dtype).removeprefix("torch.") not in op["dtypes"]:
            continue
        inputs = sample_inputs(op, n, device, dtype)
        if not torch.equal(getattr(ops_module, name)(*inputs), reference(op)(*inputs)):
            wrong.append(f"{name} {dtype}")
    return wrong


def classic_arange(add: Callable, device) -> bool:
    """The classic smoke test: two torch.arange(5) (int64) added."""
    a = torch.arange(5, device=device)
    out = add(a, a + 10)
    return torch.equal(out, torch.add(a, a + 10)) and out.tolist() == [10, 12, 14, 16, 18]
