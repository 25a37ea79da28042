"""The torch_npu releases on the package index newer than this version supports, and the torch
releases newer than that whose torch_npu is not out yet (pending).

Run by ci/test.sh for its summary (issue #18): a new torch_npu release should be noticed by the
next CI run, not by a user whose ``pip install .`` refuses it. Prints one line, and never fails:

    WARNING: torch_npu 2.15.0 is on the index and not supported yet (supported: up to 2.14.x, ...)
    index: newest torch_npu 2.14.0; supported up to 2.14.x       (nothing newer)

and, when torch has a newer release than any torch_npu pairs with (issue #35: torch 2.15.0
shipped before torch_npu 2.15), a second line:

    PENDING: torch 2.15.0 is on the index, torch_npu 2.15 is not yet (until then: bash
    ci/lib/compile_check.sh check 2.15.0; ...)

and nothing at all when the index cannot be reached (no network, a timeout, no pip). The index
is asked through pip (``pip index versions torch_npu``, with pip's own configuration), so it is
whatever index the machine's pip uses. The supported maximum is read from
torch_npu_pinpool/_version.py, the one place that defines it, without importing the package.

    python ci/lib/newer_releases.py                    # ask the index
    python ci/lib/newer_releases.py --versions "2.13.0, 2.15.0"   # as if the index said so
    python ci/lib/newer_releases.py --versions "2.14.0" --torch-versions "2.14.0, 2.15.0"

With --versions alone the index is not asked about torch (no pending line).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSION_FILE = os.path.join(REPO, "torch_npu_pinpool", "_version.py")


def max_torch_npu() -> tuple[int, int]:
    """MAX_TORCH_NPU from torch_npu_pinpool/_version.py (executed as setup.py does)."""
    scope: dict = {}
    with open(VERSION_FILE) as f:
        exec(compile(f.read(), VERSION_FILE, "exec"), scope)
    return tuple(scope["MAX_TORCH_NPU"])  # type: ignore[return-value]


def index_versions(timeout_s: float, package: str = "torch_npu") -> list[str] | None:
    """The versions of ``package`` pip's index lists, or None if it cannot say."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", package,
           "--disable-pip-version-check", "--timeout", "5", "--retries", "0"]  # fmt: skip
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"^Available versions:\s*(.+)$", out, re.M)
    return [v.strip() for v in m.group(1).split(",") if v.strip()] if m else None


def release_key(version: str) -> tuple[int, ...] | None:
    """(major, minor, patch, post) of a release such as 2.10.0.post7; None for anything else
    (a pre-release; a local build such as torch's 2.13.0+cpu counts as its release)."""
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?(?:\+[\w.]+)?", version)
    if m is None:
        return None
    return tuple(int(g or 0) for g in m.groups())


def report(versions: list[str], supported: tuple[int, int]) -> str:
    releases = sorted((k, v) for v in versions if (k := release_key(v)) is not None)
    if not releases:
        return ""
    top = f"{supported[0]}.{supported[1]}.x"
    newer: dict[tuple[int, ...], str] = {}  # (major, minor) -> its newest release
    for key, version in releases:
        if key[:2] > supported:
            newer[key[:2]] = version
    if not newer:
        return f"index: newest torch_npu {releases[-1][1]}; supported up to {top}"
    listed = ", ".join(newer.values())
    verb = "is" if len(newer) == 1 else "are"
    return (
        f"WARNING: torch_npu {listed} {verb} on the index and not supported yet (supported: up "
        f"to {top}, MAX_TORCH_NPU in torch_npu_pinpool/_version.py)"
    )


def pending(torch_versions: list[str], npu_versions: list[str], supported: tuple[int, int]) -> str:
    """The line naming torch releases newer than ``supported`` with no torch_npu of their
    (major, minor) on the index yet, or ""."""
    npu_lines = {k[:2] for v in npu_versions if (k := release_key(v)) is not None}
    waiting: dict[tuple[int, ...], str] = {}  # (major, minor) -> its newest torch release
    for key, version in sorted((k, v) for v in torch_versions if (k := release_key(v)) is not None):
        if key[:2] > supported and key[:2] not in npu_lines:
            waiting[key[:2]] = version.split("+")[0]
    if not waiting:
        return ""
    first = next(iter(waiting.values()))
    listed = ", ".join(waiting.values())
    lines = ", ".join(f"{k[0]}.{k[1]}" for k in waiting)
    verb = "is" if len(waiting) == 1 else "are"
    return (
        f"PENDING: torch {listed} {verb} on the index, torch_npu {lines} {verb} not yet (until "
        f"then: bash ci/lib/compile_check.sh check {first}; when it ships: a ci/lib/pairs.sh "
        "entry and MAX_TORCH_NPU in torch_npu_pinpool/_version.py)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", help="comma-separated versions instead of asking the index")
    ap.add_argument("--torch-versions", help="comma-separated torch versions, likewise")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds for the index (30)")
    args = ap.parse_args()

    def split(text: str) -> list[str]:
        return [v.strip() for v in text.split(",") if v.strip()]

    if args.versions is not None:
        versions = split(args.versions)
    else:
        versions = index_versions(args.timeout)
    if args.torch_versions is not None:
        torch_versions = split(args.torch_versions)
    elif args.versions is None and versions is not None:
        torch_versions = index_versions(args.timeout, "torch")
    else:
        torch_versions = None
    supported = max_torch_npu()
    line = report(versions or [], supported)
    if line:
        print(line)
    if versions is not None and torch_versions:
        line = pending(torch_versions, versions, supported)
        if line:
            print(line)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a notice, never a failure
        print(f"(newer_releases.py: {type(e).__name__}: {e})", file=sys.stderr)
        sys.exit(0)
