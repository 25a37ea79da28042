"""The package version and the torch_npu releases it supports: the one place they are written
down. Plain Python with no imports beyond ``os``: setup.py executes this file without importing
the package (pyproject.toml reads ``__version__`` from it statically)."""

from __future__ import annotations

import os

__version__ = "0.1.0"

# The oldest torch_npu build this version supports, as (major, minor, micro, post), and the newest
# release, as (major, minor); inclusive. Older builds are refused; newer releases are refused
# unless ALLOW_UNTESTED_ENV is set (then: one warning). 2.8.0.post2 is the first build whose
# pinned memory goes through ATen's host-allocator registry (at::setHostAllocator /
# getHostAllocator), the one place the plugin takes it over: torch_npu 2.8.0 pins with and
# records events on its own allocator directly, and no registry entry reaches it.
MIN_TORCH_NPU = (2, 8, 0, 2)
MAX_TORCH_NPU = (2, 14)
ALLOW_UNTESTED_ENV = "TORCH_NPU_PINPOOL_ALLOW_UNTESTED"


def major_minor(version: str) -> tuple[int, int]:
    """(major, minor) of a torch / torch_npu version string ("2.10.0.post7+cpu" -> (2, 10))."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def release(version: str) -> tuple[int, int, int, int]:
    """(major, minor, micro, post) of a torch_npu version ("2.8.0.post2+cpu" -> (2, 8, 0, 2);
    a dev or rc suffix counts as the release it precedes)."""
    parts = (version.split("+")[0].split(".") + ["0", "0"])[:4]

    def lead(part: str) -> int:  # "0rc1" -> 0, "post2" -> 0
        digits = part[: len(part) - len(part.lstrip("0123456789"))]
        return int(digits or 0)

    post = lead(parts[3][4:]) if parts[3].startswith("post") else 0
    return lead(parts[0]), lead(parts[1]), lead(parts[2]), post


def min_torch_npu() -> str:
    """MIN_TORCH_NPU as torch_npu spells it ("2.8.0.post2")."""
    major, minor, micro, post = MIN_TORCH_NPU
    return f"{major}.{minor}.{micro}" + (f".post{post}" if post else "")


def env_off(name: str) -> bool:
    """Whether the switch ``name`` is turned off (0, false, off, no; any case). Unset: on."""
    return os.environ.get(name, "1").strip().lower() in ("0", "false", "off", "no")


def supported_range() -> str:
    return f"torch_npu {min_torch_npu()} to {MAX_TORCH_NPU[0]}.{MAX_TORCH_NPU[1]}.x"


def allow_untested() -> bool:
    return os.environ.get(ALLOW_UNTESTED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def check_torch_npu(version: str, what: str) -> tuple[str | None, str | None]:
    """``(refusal, warning)`` for torch_npu ``version``; ``what`` is the verb ("build",
    "activate") the messages use. At most one of the two is set."""
    mm = major_minor(version)
    if release(version) < MIN_TORCH_NPU:
        why = ""
        if mm == MIN_TORCH_NPU[:2]:
            why = (
                f"torch_npu {version} pins memory with its own allocator, not through ATen's "
                "host-allocator registry, which is where the plugin takes it over. "
            )
        return (
            f"torch_npu {version} is too old: torch_npu_pinpool {__version__} needs torch_npu >= "
            f"{min_torch_npu()} (it supports {supported_range()}). {why}"
            "Upgrade torch_npu, with the torch release it requires.",
            None,
        )
    if mm > MAX_TORCH_NPU:
        if allow_untested():
            return None, (
                f"torch_npu {version} is newer than the releases torch_npu_pinpool {__version__} "
                f"is tested with ({supported_range()}); {ALLOW_UNTESTED_ENV}=1 is set, so it "
                f"will {what} anyway, untested."
            )
        return (
            f"torch_npu {version} is newer than the releases torch_npu_pinpool {__version__} is "
            f"tested with ({supported_range()}). Set {ALLOW_UNTESTED_ENV}=1 to {what} it anyway "
            f"(untested), or use torch_npu {MAX_TORCH_NPU[0]}.{MAX_TORCH_NPU[1]}.x.",
            None,
        )
    return None, None
