"""The one exception every release gate raises: what was wrong, and how to fix it."""

from __future__ import annotations


class GateFailure(Exception):
    def __init__(self, gate: str, reason: str, fix: str):
        super().__init__(f"[{gate}] {reason}\n  how to fix: {fix}")
        self.gate = gate
        self.reason = reason
        self.fix = fix
