"""cuda_ext_example: elementwise add as PyTorch CUDA (and CPU) ops.

    >>> import torch, cuda_ext_example
    >>> cuda_ext_example.my_add(torch.arange(5), torch.arange(5) + 10)
    tensor([10, 12, 14, 16, 18])

The ops are also ``torch.ops.cuda_ext_example.my_add`` / ``my_fast_add``.
"""

from ._build_info import load_build_info
from ._loader import load_extension, started_as_tool

LOAD_ERROR: ImportError | None = None
try:
    BUILD_INFO = load_extension()
except ImportError as exc:
    if not started_as_tool():
        raise
    # Only for `python -m cuda_ext_example doctor` / `inspect`: they report this.
    BUILD_INFO, LOAD_ERROR = load_build_info() or {}, exc
else:
    from .ops import SUPPORTED_DTYPES, my_add, my_fast_add, register_python_parts

    register_python_parts()

__version__ = BUILD_INFO.get("version", "unknown")
__all__ = ["BUILD_INFO", "SUPPORTED_DTYPES", "__version__", "my_add", "my_fast_add"]
