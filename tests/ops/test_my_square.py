"""my_square: what its declaration cannot say. The declared-op tests (test_declared_ops.py,
test_torch_integration.py, test_torch_func.py) already run it against torch.square for
every dtype, layout, transform and torch.compile."""

import torch

import cuda_ext_example


def test_integers_wrap_as_torchs_do():
    x = torch.tensor([100, -128, 127, 16, -3], dtype=torch.int8)
    assert torch.equal(cuda_ext_example.my_square(x), torch.square(x))
    assert cuda_ext_example.my_square(x).tolist() == [16, 0, 1, 0, 9]  # 10000 mod 256 = 16
    big = torch.tensor([2**32 + 1, -(2**40)], dtype=torch.int64)
    assert torch.equal(cuda_ext_example.my_square(big), torch.square(big))


def test_backward_is_two_x_grad():
    x = torch.randn(10, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(10, dtype=torch.float64)
    cuda_ext_example.my_square(x).backward(grad)
    assert torch.equal(x.grad, 2 * x.detach() * grad)
