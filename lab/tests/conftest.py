"""The lab's tests use the template's fixtures and markers (tests/conftest.py): they import the
installed wheel, never the source tree; `good_wheel` is this session's repaired wheel; the
gpu, multigpu and large markers skip where the machine lacks what they need."""

from tests.conftest import good_wheel, pytest_collection_modifyitems  # noqa: F401
