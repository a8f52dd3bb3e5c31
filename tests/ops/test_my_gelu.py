"""my_gelu: what its declaration cannot say. The declared-op tests compare it with
torch.nn.functional.gelu(approximate="tanh") within the declared tolerance."""

import torch

import cuda_ext_example


def test_where_the_curve_bends(device):
    # The declared-op tests' values (|x| ~ 100) sit where GELU is x or 0: here, near 0.
    x = torch.linspace(-6, 6, 10001, device=device)
    for dtype, tol in ((torch.float32, 1e-6), (torch.float64, 1e-12)):
        got = cuda_ext_example.my_gelu(x.to(dtype))
        want = torch.nn.functional.gelu(x.to(dtype), approximate="tanh")
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_backward_matches_torchs(device):
    x = torch.linspace(-4, 4, 1001, device=device, dtype=torch.float64, requires_grad=True)
    cuda_ext_example.my_gelu(x).sum().backward()
    want = x.detach().clone().requires_grad_()
    torch.nn.functional.gelu(want, approximate="tanh").sum().backward()
    torch.testing.assert_close(x.grad, want.grad)
