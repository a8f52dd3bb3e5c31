"""cuda_ext_example: elementwise add as PyTorch CUDA (and CPU) ops.

    >>> import torch, cuda_ext_example
    >>> cuda_ext_example.my_add(torch.arange(5), torch.arange(5) + 10)
    tensor([10, 12, 14, 16, 18])

The ops are also ``torch.ops.cuda_ext_example.my_add`` / ``my_fast_add``.
"""

from ._loader import load_extension

BUILD_INFO = load_extension()

from .ops import SUPPORTED_DTYPES, my_add, my_fast_add, register_python_parts  # noqa: E402

register_python_parts()

__version__ = BUILD_INFO["version"]
__all__ = ["BUILD_INFO", "SUPPORTED_DTYPES", "__version__", "my_add", "my_fast_add"]
