"""The project's tools, not shipped in the wheel, one package per job:

    python -m scripts.release ...   build, audit, repair, gate, upload, prove (make release)
    python -m scripts.bench ...     GB/s of each workload's op against torch, torch.compile, Triton
    python -m scripts.gpu ...       the suite, tools and sanitizers against a wheel on a GPU machine
    python -m scripts.tune ...      a GPU's launch shapes: measure, then derive the table
    python -m scripts.inspect ...   what a built wheel or .so contains (make inspect)
    from scripts import jit         this checkout's csrc/ and ops/ built at run time (make jit)

Run them from the repository root (python -m puts it on sys.path; no path edits).
"""
