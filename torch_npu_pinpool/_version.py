"""The package version and the torch_npu releases it supports: the one place they are written
down. Plain Python with no imports beyond ``os``: setup.py executes this file without importing
the package (pyproject.toml reads ``__version__`` from it statically)."""

from __future__ import annotations

import os

__version__ = "0.1.0"

# torch_npu releases (major, minor) this version is built and tested for, inclusive. Older ones
# are refused; newer ones are refused unless ALLOW_UNTESTED_ENV is set (then: one warning).
MIN_TORCH_NPU = (2, 8)
MAX_TORCH_NPU = (2, 14)
ALLOW_UNTESTED_ENV = "TORCH_NPU_PINPOOL_ALLOW_UNTESTED"


def major_minor(version: str) -> tuple[int, int]:
    """(major, minor) of a torch / torch_npu version string ("2.10.0.post7+cpu" -> (2, 10))."""
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def env_off(name: str) -> bool:
    """Whether the switch ``name`` is turned off (0, false, off, no; any case). Unset: on."""
    return os.environ.get(name, "1").strip().lower() in ("0", "false", "off", "no")


def supported_range() -> str:
    (lo_major, lo_minor), (hi_major, hi_minor) = MIN_TORCH_NPU, MAX_TORCH_NPU
    return f"torch_npu {lo_major}.{lo_minor}.0 to {hi_major}.{hi_minor}.x"


def allow_untested() -> bool:
    return os.environ.get(ALLOW_UNTESTED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def check_torch_npu(version: str, what: str) -> tuple[str | None, str | None]:
    """``(refusal, warning)`` for torch_npu ``version``; ``what`` is the verb ("build",
    "activate") the messages use. At most one of the two is set."""
    mm = major_minor(version)
    if mm < MIN_TORCH_NPU:
        return (
            f"torch_npu {version} is too old: torch_npu_pinpool {__version__} needs torch_npu >= "
            f"{MIN_TORCH_NPU[0]}.{MIN_TORCH_NPU[1]}.0 (it supports {supported_range()}). "
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
