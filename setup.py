"""Build torch_npu_pinpool against the torch and torch_npu installed in this environment.

    pip install --no-build-isolation .

No CANN toolkit is needed: the ACL headers come from the torch_npu wheel and the runtime is
whatever torch_npu loads.
"""

from __future__ import annotations

import os
import re
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
# Importing torch must not autoload torch_npu (and with it the CANN runtime) at build time.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")


def _fail(message: str) -> None:
    sys.exit(f"\ntorch_npu_pinpool: {message}\n")


def _version() -> str:
    with open(os.path.join(HERE, "torch_npu_pinpool", "_version.py")) as f:
        return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", version).groups()
    return int(major), int(minor)


def _torch_npu_root() -> str:
    """The installed torch_npu package directory, found without importing it (importing
    torch_npu needs the CANN runtime, which the build does not)."""
    import importlib.util

    spec = importlib.util.find_spec("torch_npu")
    if spec is None or not spec.submodule_search_locations:
        _fail(
            "torch_npu is not installed in this environment. Install the torch_npu that "
            "matches your torch first (torch_npu X requires torch X)."
        )
    return list(spec.submodule_search_locations)[0]


def _torch_npu_version(root: str) -> str:
    with open(os.path.join(root, "version.py")) as f:
        return re.search(r"__version__ = '([^']+)'", f.read()).group(1)


def _extensions():
    try:
        import torch
        from torch.utils.cpp_extension import CppExtension
    except ImportError:
        _fail(
            "torch is not importable in the build environment. Build with the torch you "
            "run on: pip install --no-build-isolation .  (plain `pip install .` builds in "
            "an isolated environment without your torch)."
        )
    root = _torch_npu_root()
    npu_version = _torch_npu_version(root)
    if _major_minor(npu_version) != _major_minor(torch.__version__):
        _fail(
            f"torch_npu {npu_version} does not pair with torch {torch.__version__}: "
            "torch_npu X requires torch X. Install matching versions."
        )
    if _major_minor(npu_version) < (2, 8):
        _fail(f"torch_npu {npu_version} is too old; torch_npu_pinpool needs >= 2.8.0.")

    include = os.path.join(root, "include")
    # The ACL headers' root moved inside the wheel (see csrc/version_shim.h).
    candidates = [include, os.path.join(include, "third_party", "acl", "inc")]
    include_dirs = [d for d in candidates if os.path.isdir(d)]
    lib_dir = os.path.join(root, "lib")
    return [
        CppExtension(
            name="torch_npu_pinpool._C",
            sources=["csrc/module.cpp", "csrc/pin_pool_allocator.cpp"],
            include_dirs=include_dirs,
            library_dirs=[lib_dir],
            libraries=["torch_npu"],
            extra_compile_args=["-O2", "-fvisibility=hidden"],
            # Find libtorch_npu.so (and torch's libs) next to us in site-packages.
            extra_link_args=[
                "-Wl,-rpath,$ORIGIN/../torch_npu/lib",
                "-Wl,-rpath,$ORIGIN/../torch/lib",
                "-Wl,--allow-shlib-undefined",
            ],
        )
    ]


def _cmdclass():
    from torch.utils.cpp_extension import BuildExtension

    return {"build_ext": BuildExtension.with_options(use_ninja=False)}


if __name__ == "__main__":
    ext_modules = _extensions()
    setup(version=_version(), ext_modules=ext_modules, cmdclass=_cmdclass())
