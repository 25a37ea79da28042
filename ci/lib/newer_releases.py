"""The torch_npu releases on the package index newer than this version supports.

Run by ci/test.sh for its summary (issue #18): a new torch_npu release should be noticed by the
next CI run, not by a user whose ``pip install .`` refuses it. Prints one line, and never fails:

    WARNING: torch_npu 2.15.0 is on the index and not supported yet (supported: up to 2.14.x, ...)
    index: newest torch_npu 2.14.0; supported up to 2.14.x       (nothing newer)

and nothing at all when the index cannot be reached (no network, a timeout, no pip). The index
is asked through pip (``pip index versions torch_npu``, with pip's own configuration), so it is
whatever index the machine's pip uses. The supported maximum is read from
torch_npu_pinpool/_version.py, the one place that defines it, without importing the package.

    python ci/lib/newer_releases.py                    # ask the index
    python ci/lib/newer_releases.py --versions "2.13.0, 2.15.0"   # as if the index said so
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


def index_versions(timeout_s: float) -> list[str] | None:
    """The torch_npu versions pip's index lists (releases only), or None if it cannot say."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", "torch_npu",
           "--disable-pip-version-check", "--timeout", "5", "--retries", "0"]  # fmt: skip
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"^Available versions:\s*(.+)$", out, re.M)
    return [v.strip() for v in m.group(1).split(",") if v.strip()] if m else None


def release_key(version: str) -> tuple[int, ...] | None:
    """(major, minor, patch, post) of a release such as 2.10.0.post7; None for anything else."""
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?", version)
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", help="comma-separated versions instead of asking the index")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds for the index (30)")
    args = ap.parse_args()
    if args.versions is not None:
        versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    else:
        versions = index_versions(args.timeout)
    line = report(versions or [], max_torch_npu())
    if line:
        print(line)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a notice, never a failure
        print(f"(newer_releases.py: {type(e).__name__}: {e})", file=sys.stderr)
        sys.exit(0)
