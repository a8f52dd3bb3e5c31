"""cuda_ext_example: PyTorch CUDA (and CPU) ops, each declared once in ops/.

    >>> import torch, cuda_ext_example
    >>> cuda_ext_example.my_add(torch.arange(5), torch.arange(5) + 10)
    tensor([10, 12, 14, 16, 18])
    >>> cuda_ext_example.my_square(torch.arange(4))
    tensor([0, 1, 4, 9])

The ops are also ``torch.ops.cuda_ext_example.<name>``; ``OP_NAMES`` lists them.
"""

from ._build_info import load_build_info
from ._loader import load_extension, started_as_tool

LOAD_ERROR: ImportError | None = None
OP_NAMES: tuple[str, ...] = ()
SUPPORTED_DTYPES: tuple = ()
try:
    BUILD_INFO = load_extension()
except ImportError as exc:
    if not started_as_tool():
        raise
    # Only for `python -m cuda_ext_example doctor`: it reports this.
    BUILD_INFO, LOAD_ERROR = load_build_info() or {}, exc
else:
    from .ops import OP_NAMES, SUPPORTED_DTYPES, register

    # One Python function per declared op: cuda_ext_example.my_add, .my_square, ...
    globals().update(register())

__version__ = BUILD_INFO.get("version", "unknown")
__all__ = ["BUILD_INFO", "OP_NAMES", "SUPPORTED_DTYPES", "__version__", *OP_NAMES]
