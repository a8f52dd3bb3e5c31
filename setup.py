"""Builds cuda_ext_example._C; everything declarative lives in pyproject.toml.

The extension is compiled by buildtools/ (NVRTC for the device code, zig for the
host code and the glibc-2.17 link), tagged abi3 for the oldest CPython that
pyproject.toml's python-limited-api names.
"""

import sys
from pathlib import Path

from setuptools import Extension, setup

sys.path.insert(0, str(Path(__file__).resolve().parent))  # buildtools/, next to this file
from buildtools.platform_check import require_supported_platform  # noqa: E402

require_supported_platform()  # first: a clear message, not a failed compile

from buildtools import config, cross  # noqa: E402
from buildtools.build_ext import ZigNvrtcBuildExt  # noqa: E402

wheel_options = {"py_limited_api": config.load(dev_spec="").abi_tag}
if cross.target_arch() != cross.host_arch():  # make wheel ARCH=aarch64
    wheel_options["plat_name"] = f"linux_{cross.target_arch()}"

setup(
    ext_modules=[
        Extension(
            "cuda_ext_example._C",
            # Not read: buildtools/build_ext.py builds from csrc/ and ops/ (its HOST_SOURCES
            # and the op declarations); setuptools only wants the list to be non-empty.
            sources=["csrc/ops.cpp"],
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": ZigNvrtcBuildExt},
    options={"bdist_wheel": wheel_options},
)
