"""Print the build requirements of a repository that its Python environment lacks, one a line.

    python ci/npu/missing_build_reqs.py REPO

Used by ci/npu/run-tests.sh before `pip install --no-build-isolation`, which builds with
whatever the environment has. Reads `[build-system] requires` of REPO/pyproject.toml (the
PEP 517 default `setuptools>=40.8.0`, `wheel` without one), adds `wheel` when the installed
setuptools is older than 70.1 (which has no bdist_wheel of its own), and never lists torch or
torch_npu: those belong to the runner and are never installed by the script.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import sys

NEVER = {"torch", "torch_npu"}


def read_requires(repo: str) -> list[str]:
    default = ["setuptools>=40.8.0", "wheel"]
    path = os.path.join(repo, "pyproject.toml")
    if not os.path.exists(path):
        return default
    try:
        import tomllib
    except ImportError:  # Python < 3.11: a plain look at the requires list
        with open(path, encoding="utf-8") as f:
            text = f.read()
        m = re.search(r"^\[build-system\][^\[]*?requires\s*=\s*\[(.*?)\]", text, re.S | re.M)
        return re.findall(r"[\"']([^\"']+)[\"']", m.group(1)) if m else default
    with open(path, "rb") as f:
        data = tomllib.load(f)
    return list(data.get("build-system", {}).get("requires", default))


def name_of(req: str) -> str:
    return re.split(r"[\s<>=!~;\[]", req.strip(), maxsplit=1)[0]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def installed(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    reqs = read_requires(sys.argv[1])
    try:  # pip vendors packaging; without it only presence is checked
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.version import Version
    except ImportError:
        Requirement = Version = None  # type: ignore[assignment,misc]

    setuptools_version = installed("setuptools")
    if (
        Version is not None
        and setuptools_version
        and Version(setuptools_version) < Version("70.1")
        and "wheel" not in {norm(name_of(r)) for r in reqs}
    ):
        reqs.append("wheel")

    for req in reqs:
        name = name_of(req)
        if norm(name) in NEVER:
            continue
        have = installed(name)
        ok = have is not None
        if ok and Requirement is not None:
            try:
                ok = Requirement(req).specifier.contains(have, prereleases=True)
            except Exception:  # an unparsable requirement: presence is enough
                pass
        if not ok:
            print(req)
    return 0


if __name__ == "__main__":
    sys.exit(main())
