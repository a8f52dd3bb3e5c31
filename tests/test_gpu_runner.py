"""scripts/gpu/__main__.py, what a lent GPU machine runs: which tests `suite -- ARGS` runs."""

from scripts.gpu.__main__ import pytest_targets


def test_suite_runs_every_test_unless_tests_are_named():
    assert pytest_targets([]) == ["tests"]
    assert pytest_targets(["-k", "launch_shape", "-x"]) == ["tests"]  # options only


def test_named_tests_run_alone():
    # Before, the named files ran next to the whole tree: `-- tests/test_wheel.py` ran all.
    assert pytest_targets(["tests/test_wheel.py", "tests/test_inspect.py"]) == []
    assert pytest_targets(["tests/test_wheel.py::test_wheel_size", "-x"]) == []
    assert pytest_targets(["nowhere/test_wheel.py"]) == ["tests"]  # not a file here
