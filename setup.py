"""Build torch_npu_pinpool's extension against the torch and torch_npu installed in the
environment being installed into:

    pip install .

Metadata lives in pyproject.toml, the version in torch_npu_pinpool/_version.py, and the
in-tree build backend (build_backend/pinpool_backend.py) finds the installed torch under pip's
build isolation. No CANN toolkit is needed: the ACL headers come from the torch_npu wheel and
the runtime is whatever torch_npu loads. An sdist needs no torch (the backend sets
_TORCH_NPU_PINPOOL_SDIST=1 and the extension is left out).
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


def _version_info() -> dict:
    """torch_npu_pinpool/_version.py, executed without importing the package (whose
    ``__init__`` imports torch_npu)."""
    namespace: dict = {}
    path = os.path.join(HERE, "torch_npu_pinpool", "_version.py")
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), namespace)
    return namespace


def _import_torch():
    try:
        import torch
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError as e:
        _fail(
            f"torch is not importable by the Python that builds this package ({sys.executable}:"
            f" {e}). The extension is built against the torch and torch_npu you run, so build"
            " it with the Python of the environment that has them: `pip install .` with that"
            " environment's pip (its build finds the installed torch even under build"
            " isolation), or `pip install --no-build-isolation .` / `python -m build"
            " --no-isolation` there. Front ends that build in a separate environment of their"
            " own (`python -m build`, uv) need the no-isolation form."
        )
    return torch, BuildExtension, CppExtension


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
        return re.search(r"__version__ = ['\"]([^'\"]+)['\"]", f.read()).group(1)


# Note [Sanitized builds]: TORCH_NPU_PINPOOL_SANITIZE=address,undefined (or =thread) builds the
# extension instrumented, for ci/lib/sanitize.sh; docs/testing.md says how to run one. A test
# build, never one to deploy: torch_npu_pinpool._C.sanitizers says what it was built with (""
# for a normal build), and every process that imports it needs that compiler's sanitizer
# runtime loaded first, e.g. with gcc (libstdc++ too: python does not link it, and ASan must see
# it at start to intercept __cxa_throw, which torch_npu uses):
#   TORCH_NPU_PINPOOL_SANITIZE=address,undefined pip install --no-deps --force-reinstall .
#   LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libstdc++.so.6)" \
#     PYTHONMALLOC=malloc python -m torch_npu_pinpool doctor      # prints `sanitized build:`
SANITIZERS = ("address", "undefined", "thread")


def _sanitizer_args() -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """Compile flags, link flags and macros for ``TORCH_NPU_PINPOOL_SANITIZE`` (unset: none)."""
    value = os.environ.get("TORCH_NPU_PINPOOL_SANITIZE", "").replace(" ", "")
    if not value:
        return [], [], []
    kinds = value.split(",")
    if not set(kinds) <= set(SANITIZERS) or ("thread" in kinds and len(kinds) > 1):
        _fail(
            f"TORCH_NPU_PINPOOL_SANITIZE={value!r} is not a sanitizer set this build knows: use"
            " 'address,undefined', 'address', 'undefined' or 'thread' (thread combines with"
            " nothing), or unset it for a normal build."
        )
    sanitize = "-fsanitize=" + ",".join(kinds)
    print(f"\ntorch_npu_pinpool: sanitized build ({sanitize})\n", file=sys.stderr)
    # -fno-wrapv: Python's flags carry -fwrapv, which defines signed overflow, and UBSan then
    # never checks it; an overflowing byte count is a bug here either way.
    compile_args = [sanitize, "-fno-omit-frame-pointer", "-g", "-O1", "-fno-wrapv"]
    return compile_args, [sanitize], [("PINPOOL_SANITIZERS", '"' + ",".join(kinds) + '"')]


# csrc/ by layer (docs/design.md, "Shape"): the allocator and everything it needs, and the
# bindings (csrc/python/, by layer); the audit report (Note [Observer hooks]) is a unit of its own
# that a build may leave out; the injected sanitizer defects go only into sanitized builds.
# Sources include each other from csrc/.
CORE_SOURCES = [
    "csrc/core/pin_pool_allocator.cpp",
    "csrc/core/block_map.cpp",
    "csrc/core/graph_registry.cpp",
    "csrc/core/fence_queue.cpp",
    "csrc/core/capture_hooks.cpp",
    "csrc/core/graph_pools.cpp",
    "csrc/core/large_blocks.cpp",
    "csrc/core/base_unpin.cpp",
    "csrc/copy/pageable_copy_guard.cpp",
    "csrc/copy/strided_pinned_copy.cpp",
    "csrc/runtime/npu_runtime.cpp",
    "csrc/runtime/fork_gate.cpp",
    "csrc/python/module.cpp",
    "csrc/python/allocator.cpp",
    "csrc/python/host_cache_api.cpp",
    "csrc/python/report.cpp",
]
AUDIT_SOURCES = [
    "csrc/audit/audit.cpp",
    "csrc/audit/audit_sites.cpp",
    "csrc/audit/completion_probe.cpp",
    "csrc/audit/ending_signals.cpp",
]
SANITIZER_SOURCES = ["csrc/testing/sanitizer_selftest.cpp"]


def _audit_sources() -> list[str]:
    """``TORCH_NPU_PINPOOL_AUDIT=0`` builds without the audit report (then
    ``TORCH_NPU_PINPOOL_REPORT`` only warns); unset or 1: with it."""
    value = os.environ.get("TORCH_NPU_PINPOOL_AUDIT", "1").strip()
    if value not in ("0", "1", ""):
        _fail(f"TORCH_NPU_PINPOOL_AUDIT={value!r}: use 0 (build without the audit report) or 1.")
    return [] if value == "0" else AUDIT_SOURCES


def _extensions(info: dict):
    torch, BuildExtension, CppExtension = _import_torch()
    root = _torch_npu_root()
    npu_version = _torch_npu_version(root)
    # The supported range first: "too old" says more than "does not pair with your torch".
    refusal, warning = info["check_torch_npu"](npu_version, "build")
    if refusal:
        _fail(refusal)
    if warning:
        print(f"\ntorch_npu_pinpool: WARNING: {warning}\n", file=sys.stderr)
    mm = info["major_minor"]
    if mm(npu_version) != mm(torch.__version__):
        _fail(
            f"torch_npu {npu_version} does not pair with torch {torch.__version__}: "
            "torch_npu X requires torch X. Install matching versions."
        )

    include = os.path.join(root, "include")
    # The ACL headers' root moved inside the wheel (see csrc/runtime/version_shim.h).
    candidates = [include, os.path.join(include, "third_party", "acl", "inc")]
    include_dirs = [os.path.join(HERE, "csrc")] + [d for d in candidates if os.path.isdir(d)]
    lib_dir = os.path.join(root, "lib")
    san_compile, san_link, san_macros = _sanitizer_args()
    ext = CppExtension(
        name="torch_npu_pinpool._C",
        sources=CORE_SOURCES + _audit_sources() + (SANITIZER_SOURCES if san_macros else []),
        include_dirs=include_dirs,
        library_dirs=[lib_dir],
        libraries=["torch_npu"],
        define_macros=san_macros + [("PINPOOL_AUDIT", "1" if _audit_sources() else "0")],
        # -g0: no debug info (Python's CFLAGS carry -g, a third of the compile time against
        # torch's headers); a sanitizer build's own -g comes after it.
        extra_compile_args=["-O2", "-g0", "-fvisibility=hidden", *san_compile],
        # Find libtorch_npu.so (and torch's libs) next to us in site-packages.
        extra_link_args=[
            "-Wl,-rpath,$ORIGIN/../torch_npu/lib",
            "-Wl,-rpath,$ORIGIN/../torch/lib",
            "-Wl,--allow-shlib-undefined",
            *san_link,
        ],
    )
    # ninja compiles the sources in parallel (MAX_JOBS, default: every core); without ninja on
    # the build's path torch falls back to compiling them one by one.
    return [ext], {"build_ext": _always_compiled(BuildExtension)}


# Note [No stale extension]: `pip install .` builds in the checkout's build/, and setuptools skips
# an extension whose built file is newer than its sources ("skipping ... (up-to-date)"): it knows
# nothing of the torch / torch_npu headers, the torch release or the build switches
# (TORCH_NPU_PINPOOL_AUDIT, _SANITIZE). So the documented reinstall after a torch_npu upgrade,
# `pip install --force-reinstall --no-deps .`, would put back the _C built for the old torch.
# Every build compiles every source
# (test/repo/test_packaging.py::test_a_rebuild_never_reuses_a_built_extension).
def _always_compiled(base: type) -> type:
    class BuildExt(base):
        def finalize_options(self) -> None:
            super().finalize_options()
            self.force = True

    return BuildExt


if __name__ == "__main__":
    if os.environ.get("_TORCH_NPU_PINPOOL_SDIST") == "1":
        setup()  # an sdist: sources only (MANIFEST.in), no torch needed
    else:
        ext_modules, cmdclass = _extensions(_version_info())
        setup(ext_modules=ext_modules, cmdclass=cmdclass)
