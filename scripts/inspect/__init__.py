"""What a built binary (a wheel, or the extension .so itself) contains, read without the
package installed:

    python -m scripts.inspect WHEEL_OR_SO [--ptx] [--sass] [--symbols]

binary_info reads ELF and fatbin facts, shim_versions dates the torch shims a binary
imports, report prints both (the command); the release gates use the first two.
"""
