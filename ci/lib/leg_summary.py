"""Write one test leg's machine-readable summary: ``LEG.json`` in the results directory.

    python ci/lib/leg_summary.py --leg "2.14" --pair 2.14 --junit RUN.xml --out DIR

Run with the leg's own interpreter (the pair's env): the torch / torch_npu builds are read from
its installed distributions, the counts from pytest's JUnit XML, the commit from git. One file
per leg; a later run of the same leg replaces it. ``ci/render_results.py`` renders the files
into docs/test-results.md. Never fails the leg: a problem is printed and the exit is 0.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def counts(junit: Path) -> dict[str, int]:
    """passed / skipped / failed (failures + errors) over every test suite of a JUnit XML."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {"tests": 0, "skipped": 0, "failures": 0, "errors": 0}
    for suite in suites:
        for key in total:
            total[key] += int(suite.get(key, 0))
    failed = total["failures"] + total["errors"]
    return {
        "passed": total["tests"] - total["skipped"] - failed,
        "skipped": total["skipped"],
        "failed": failed,
    }


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def torch_build() -> str:
    """torch's version as the wheel names it (``2.14.0+cu130``): the local part tells the build."""
    try:
        import torch

        return str(torch.__version__)
    except Exception:  # importing torch may need the pair's workaround: the metadata then
        return version("torch")


def commit() -> str:
    """The checkout's short commit, ``+changes`` when its tracked files differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short=7", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def slug(leg: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", leg).strip("-")


def summary(leg: str, pair: str, arch: str, junit: Path, rc: int) -> dict[str, object]:
    found = counts(junit)
    return {
        "leg": leg,
        "pair": pair,
        "arch": arch,
        "torch": torch_build(),
        "torch_npu": version("torch_npu"),
        "commit": commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        **found,
        "result": "PASS" if rc == 0 and found["failed"] == 0 else "FAIL",
        "source": "ci/test.sh",
        # The CANN version the simulator reported (SIMCANN_CANN_VERSION; unset: none, an empty
        # string): set for a build that needs one to import (ci/lib/pairs.sh, PAIR_CANN).
        "cann_version": os.environ.get("SIMCANN_CANN_VERSION", ""),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leg", required=True, help='the leg\'s name: "2.14", "2.14 as-npu"')
    parser.add_argument("--pair", required=True)
    parser.add_argument("--arch", default="x86_64")
    parser.add_argument("--junit", required=True, type=Path)
    parser.add_argument("--rc", type=int, default=0, help="the leg's exit status")
    parser.add_argument("--out", required=True, type=Path, help="the results directory")
    args = parser.parse_args(argv)
    try:
        data = summary(args.leg, args.pair, args.arch, args.junit, args.rc)
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"{slug(args.leg)}.json"
        path.write_text(json.dumps(data, indent=2) + "\n")
    except (OSError, ET.ParseError) as e:
        print(f"leg_summary: no summary for leg {args.leg}: {e}", file=sys.stderr)
        return 0
    print(f"leg summary: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
