"""torch_npu below the supported range: the ``2.7`` leg of ci/test.sh (the real torch 2.7.1 /
torch_npu 2.7.1.post11 wheels on the simulated runtime) and the build check of torch_npu 2.8.0
(``2.8@2.8.0``, below the minimum 2.8.0.post2: it pins outside ATen's host-allocator registry).
The plugin must refuse clearly, naming the minimum, at both places a user meets it: ``pip
install`` and activation.

Everywhere else these tests skip: run them with ``PINPOOL_PAIRS="2.7 2.8@2.8.0" bash ci/test.sh``.
"""

from __future__ import annotations

import importlib.metadata
import os
import runpy
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NPU_VERSION = importlib.metadata.version("torch_npu")
# The supported range, read where it is written down (the package is not installed here).
VERSIONS = runpy.run_path(str(REPO / "torch_npu_pinpool" / "_version.py"))
MINIMUM = VERSIONS["min_torch_npu"]()

pytestmark = pytest.mark.skipif(
    VERSIONS["release"](NPU_VERSION) >= VERSIONS["MIN_TORCH_NPU"],
    reason=f"needs torch_npu < {MINIMUM} (this is {NPU_VERSION}): "
    'PINPOOL_PAIRS="2.7 2.8@2.8.0" bash ci/test.sh',
)


def _source_copy(dest: Path) -> Path:
    """The checkout's files (tracked and untracked-but-not-ignored), as pip would get them."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    archive = dest / "src.tar"
    with tarfile.open(archive, "w") as tar:
        for name in filter(None, files):
            path = REPO / os.fsdecode(name)
            if path.exists():
                tar.add(path, arcname=os.fsdecode(name), recursive=False)
    src = dest / "src"
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    return src


def test_pip_install_refuses(tmp_path):
    """``pip install`` stops before compiling, names the installed torch_npu and the minimum,
    and installs nothing."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-build-isolation",
            "--no-deps",
            str(_source_copy(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert f">= {MINIMUM}" in out and NPU_VERSION.split("+")[0] in out, out
    show = subprocess.run(
        [sys.executable, "-m", "pip", "show", "torch_npu_pinpool"],
        capture_output=True,
        cwd=tmp_path,
    )
    assert show.returncode != 0, "pip installed torch_npu_pinpool although the build refused"


ACTIVATE = r"""
import os, sys
sys.path.insert(0, os.environ["PINPOOL_REPO"])   # the source package: nothing was installed
try:
    import torch_npu_pinpool
    result = {"raised": None}
except Exception as e:
    result = {"raised": type(e).__name__, "message": str(e)}
import torch, torch_npu                           # torch_npu itself still works
result["npu_works"] = torch.ones(4).npu().cpu().tolist() == [1.0] * 4
"""


def test_activation_refuses(run_isolated):
    """``import torch_npu_pinpool`` below the minimum raises before touching the allocator,
    naming the minimum and the off switch; torch_npu keeps working."""
    r = run_isolated(ACTIVATE, env={"PINPOOL_REPO": str(REPO)}).result
    assert r["raised"] == "RuntimeError", r
    assert f">= {MINIMUM}" in r["message"] and NPU_VERSION.split("+")[0] in r["message"], r
    assert "TORCH_NPU_PINPOOL=0" in r["message"], r
    assert r["npu_works"] is True
