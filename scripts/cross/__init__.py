"""Builds for another CPU, run here under emulation (python -m scripts.cross)."""
