"""my_gelu's derivative, in Python: what its ops.toml [derivatives] calls."""

import torch


def gelu_tanh_derivative(x):
    """d/dx of 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi), computed in float32
    at least (as torch's own gelu backward does for the 16-bit floats, where x^3 overflows)."""
    t = x.to(torch.promote_types(x.dtype, torch.float32))
    k = 0.7978845608028654
    tanh = torch.tanh(k * (t + 0.044715 * t**3))
    slope = 0.5 * (1 + tanh) + 0.5 * t * (1 - tanh**2) * k * (1 + 3 * 0.044715 * t**2)
    return slope.to(x.dtype)
