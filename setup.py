"""Builds cuda_ext_example's library; everything declarative lives in pyproject.toml.

The library is compiled by buildtools/ (NVRTC for the device code, zig for the host
code and the glibc-2.17 link). It is no CPython extension module (torch loads it), so
the wheel is tagged py3-none-<platform> (buildtools/wheel_tags.py).
"""

import sys
from pathlib import Path

from setuptools import Extension, setup

sys.path.insert(0, str(Path(__file__).resolve().parent))  # buildtools/, next to this file
from buildtools.platform_check import require_supported_platform  # noqa: E402

require_supported_platform()  # first: a clear message, not a failed compile

from buildtools import cross  # noqa: E402
from buildtools.build_ext import ZigNvrtcBuildExt  # noqa: E402
from buildtools.wheel_tags import Py3NoneWheel  # noqa: E402

wheel_options = {}
if cross.is_windows(cross.target_arch()):  # make wheel ARCH=win_amd64
    wheel_options["plat_name"] = cross.target_arch()
elif cross.target_arch() != cross.host_arch():  # make wheel ARCH=aarch64
    wheel_options["plat_name"] = f"linux_{cross.target_arch()}"

setup(
    ext_modules=[
        Extension(
            # Where the library goes (cuda_ext_example/); buildtools/build_ext.py names it
            # config.LIBRARY, not as the module this names.
            "cuda_ext_example._C",
            # Not read: buildtools/build_ext.py builds from csrc/ and ops/ (its HOST_SOURCES
            # and the op declarations); setuptools only wants the list to be non-empty.
            sources=["csrc/ops.cpp"],
        )
    ],
    cmdclass={"build_ext": ZigNvrtcBuildExt, "bdist_wheel": Py3NoneWheel},
    options={"bdist_wheel": wheel_options},
)
