"""The benchmark: measuring (benchmark.py, on a GPU) apart from reporting (report.py, pure).

The experiments of benchmarks/NOTES.md, each run as `python -m scripts.bench.NAME`:
compare_wheels (two builds of the wheel in one GPU session; make compare-nvrtc),
host_overhead (host time per call), tune_variants (the kernel variants of tune_variants.cu),
variant_pairs (two of those variants alone and followed by a next op).
"""
