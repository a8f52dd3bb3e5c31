"""The benchmark: measuring (benchmark.py, on a GPU) apart from reporting (report.py, pure)."""
