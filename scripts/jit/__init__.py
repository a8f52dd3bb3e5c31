"""The edit-and-run loop of an author: this checkout's csrc/ and ops/ built at run time for
this machine's GPU and loaded next to the installed wheel (loader.py; `make jit` checks
every op with it)."""

from .loader import NAMESPACE, load

__all__ = ["NAMESPACE", "load"]
