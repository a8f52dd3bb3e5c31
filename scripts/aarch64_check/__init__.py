"""The aarch64 wheel, run on this x86_64 machine under qemu-user (python -m scripts.aarch64_check;
make aarch64-check). Building it is buildtools/cross.py's job."""
