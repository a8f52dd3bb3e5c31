"""The lab: the equipment that measures the template, not part of what a kernel author copies
and not shipped in the wheel or the sdist. lab/README.md says what each tool measures.

    python -m lab.bench ...                GB/s of each workload's op against its peers
    python -m lab.gpu ...                  a built wheel on a GPU machine: suite, tools, bench
    python -m lab.tune ...                 a GPU's launch shapes: measure, then derive the table
    python -m lab.aarch64_check ...        the aarch64 wheel under qemu-user
    python -m lab.free_threaded_check ...  the wheel on a free-threaded CPython 3.14t
    python -m lab.wine_check ...           the Windows wheel under Wine

Run them from the repository root (python -m puts it on sys.path; no path edits).
"""
