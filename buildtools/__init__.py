"""Build helpers for cuda_ext_example (used by setup.py only, never shipped)."""
