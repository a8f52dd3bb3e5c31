"""The benchmark, `python -m lab.bench --workload NAME` (benchmark.py): a workload
declares an op, its peers and targets (add.py, square.py; the form is workload.py's),
timing.py times them on the GPU, report.py writes the results."""
