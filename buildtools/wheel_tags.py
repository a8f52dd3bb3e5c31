"""bdist_wheel that tags the wheel py3-none-<platform>.

setuptools tags a wheel with compiled code for the building CPython (cp311-cp311) or, with
py_limited_api, its stable ABI (cp310-abi3), both of which installers refuse on another
ABI (abi3 on a free-threaded CPython). The library uses no CPython API at all (torch loads
it), so the honest tags are Python 3, no ABI, and the platform: config.PYTHON_TAGS.
"""

from __future__ import annotations

from setuptools.command.bdist_wheel import bdist_wheel

from . import config


class Py3NoneWheel(bdist_wheel):
    def get_tag(self) -> tuple[str, str, str]:
        _, _, platform = super().get_tag()
        python, abi = config.PYTHON_TAGS.split("-")
        return python, abi, platform
