"""ci/lib/newer_releases.py: the line ci/test.sh's summary prints about torch_npu releases newer
than MAX_TORCH_NPU (a warning, never a failure, nothing when the index cannot be reached)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "ci" / "lib" / "newer_releases.py"


def _max_torch_npu() -> tuple[int, int]:
    scope: dict = {}
    exec((REPO / "torch_npu_pinpool" / "_version.py").read_text(), scope)
    return scope["MAX_TORCH_NPU"]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_a_newer_release_is_a_warning_naming_it():
    """Each newer minor release is named once (its newest post-release), against the maximum the
    package supports; release candidates are not releases."""
    major, minor = _max_torch_npu()
    cur, nxt, after = f"{major}.{minor}", f"{major}.{minor + 1}", f"{major}.{minor + 2}"
    versions = f"{cur}.0, {nxt}.0, {nxt}.0.post1, {after}.0rc1, 2.1.0.post17"
    r = _run("--versions", versions)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        f"WARNING: torch_npu {nxt}.0.post1 is on the index and not supported yet (supported: up "
        f"to {cur}.x, MAX_TORCH_NPU in torch_npu_pinpool/_version.py)"
    )


def test_nothing_newer_names_the_newest_release():
    major, minor = _max_torch_npu()
    r = _run("--versions", f"2.8.0.post5, {major}.{minor}.0, {major}.{minor - 1}.0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        f"index: newest torch_npu {major}.{minor}.0; supported up to {major}.{minor}.x"
    )


def test_a_newer_torch_without_its_torch_npu_is_pending():
    """torch has a release past MAX_TORCH_NPU and torch_npu none of that line (torch 2.15.0
    before torch_npu 2.15, issue #35): a PENDING line naming the compile check and what adding the
    pair takes; a torch line whose torch_npu is out is not pending (the WARNING names it)."""
    major, minor = _max_torch_npu()
    cur, nxt, after = f"{major}.{minor}", f"{major}.{minor + 1}", f"{major}.{minor + 2}"
    r = _run("--versions", f"{cur}.0", "--torch-versions", f"{cur}.0+cpu, {nxt}.0, {nxt}.1rc1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == (
        f"PENDING: torch {nxt}.0 is on the index, torch_npu {nxt} is not yet (until then: bash "
        f"ci/lib/compile_check.sh check {nxt}.0; when it ships: a ci/lib/pairs.sh entry and "
        "MAX_TORCH_NPU in torch_npu_pinpool/_version.py)"
    )
    r = _run("--versions", f"{cur}.0, {nxt}.0", "--torch-versions", f"{nxt}.0, {after}.0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith(f"WARNING: torch_npu {nxt}.0 is on the index")
    assert r.stdout.splitlines()[1].startswith(f"PENDING: torch {after}.0 is on the index")
    r = _run("--versions", f"{cur}.0", "--torch-versions", f"{cur}.1")
    assert r.stdout.splitlines() == [f"index: newest torch_npu {cur}.0; supported up to {cur}.x"]


def test_unreachable_index_is_silent(tmp_path):
    """No index (pip pointed at a closed local port, no config, no local wheels): no output,
    exit 0."""
    env = {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "",
        "PIP_NO_INDEX": "",
    }
    r = _run("--timeout", "60", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
