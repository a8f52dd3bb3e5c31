"""Renames the project: package, import name, op namespace, docs and tests (make rename)."""
