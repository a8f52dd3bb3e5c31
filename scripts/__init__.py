"""The project's tools, not shipped in the wheel, one package per job:

    python -m scripts.release ...   build, audit, repair, gate, upload, prove (make release)
    python -m scripts.bench ...     GB/s and host time against torch.add, torch.compile, Triton
    python -m scripts.gpu ...       everything a lent GPU machine runs, and the GPU-side tools

Run them from the repository root (python -m puts it on sys.path; no path edits).
"""
