"""python -m lab.wine_check's parts that need no Wine: its bad-input script passes here
(so a failure under Wine is Wine's or the DLL's, not the script's), and what keeps Wine 8.0's
own msvcp140.dll (a double free on every torch error) out of the run stays in place."""

from __future__ import annotations

import subprocess
import sys

from lab.wine_check import __main__ as wine_check


def test_the_bad_input_script_passes_on_this_machine():
    run = subprocess.run(
        [sys.executable, "-c", wine_check.BAD_INPUT], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("RuntimeError: cuda_ext_example.my_add: "), run.stdout


def test_microsofts_msvcp140_is_pinned_and_loaded_instead_of_wines():
    assert "msvcp140=n,b" in wine_check.DLL_OVERRIDES.split(";")
    assert "winedbg.exe=d" in wine_check.DLL_OVERRIDES.split(";")  # a crash fails at once
    pin = wine_check.MSVC_RUNTIME_PIN.read_text()
    assert "msvc-runtime==" in pin and "--hash=sha256:" in pin
