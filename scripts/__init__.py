"""The template's tools, not shipped in the wheel, one package per job:

    python -m scripts.release ...   build, audit, repair, gate, upload, prove (make release)
    python -m scripts.inspect ...   what a built wheel or .so contains (make inspect)
    python -m scripts.rename ...    the project renamed (a copy's first step)
    from scripts import jit         this checkout's csrc/ and ops/ built at run time (make jit)

The measuring equipment (benchmarks, GPU-machine runs, launch-shape tuning, the checks under
qemu, Wine and a free-threaded CPython) is lab/'s. Run them from the repository root
(python -m puts it on sys.path; no path edits).
"""
