"""The aarch64 wheel, run on this x86_64 machine under qemu-user (python -m lab.aarch64_check).
Building it is buildtools/cross.py's job (make repair ARCH=aarch64)."""
