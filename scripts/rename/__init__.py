"""Renames the project: package, import name, op namespace, docs and tests
(python -m scripts.rename NAME)."""
