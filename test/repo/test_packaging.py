"""Packaging: the supported torch_npu range at activation and at build time, the build's
refusals, and the sdist.

Releases that have no test environment (torch_npu 2.7.1, 2.15.0) are stood in for by a stub
``torch_npu`` package put first on ``PYTHONPATH`` (``__version__``, ``version.py`` and the
``_autoload`` its entry point names): the version gates read nothing else, so they run before
any of torch_npu's internals would be touched. The build checks run the in-tree backend
(``build_backend/pinpool_backend.py``) in a subprocess, on a copy of the source tree, and stop
before compiling anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALLOW = "TORCH_NPU_PINPOOL_ALLOW_UNTESTED"
RANGE = "torch_npu 2.8.0.post2 to 2.14.x"
TOO_NEW = "2.15.0"  # the first torch_npu release above MAX_TORCH_NPU


def _torch_minor() -> tuple[int, int]:
    major, minor = metadata.version("torch").split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _stub_torch_npu(root: Path, version: str) -> str:
    """A ``torch_npu`` package that only says which release it is; returns the directory to put
    on PYTHONPATH."""
    pkg = root / f"stub-{version}" / "torch_npu"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        f'__version__ = "{version}"\n\n\ndef _autoload():  # its torch.backends entry point\n'
        "    pass\n"
    )
    (pkg / "version.py").write_text(f"__version__ = '{version}'\n")
    (pkg / "include").mkdir()
    (pkg / "lib").mkdir()
    return str(pkg.parent)


def _with_pythonpath(path: str, **extra: str) -> dict[str, str]:
    old = os.environ.get("PYTHONPATH")
    env = {"PYTHONPATH": path + (os.pathsep + old if old else "")}
    env.update(extra)
    return env


# --- activation ---------------------------------------------------------------------------------

EXPLICIT_IMPORT = r"""
import torch_npu
try:
    import torch_npu_pinpool
    result = {"raised": None, "stub": torch_npu.__version__}
except Exception as e:
    result = {"raised": type(e).__name__, "message": str(e), "stub": torch_npu.__version__}
"""


@pytest.mark.parametrize(
    "version, expect",
    [
        ("2.7.1", ["too old", ">= 2.8.0.post2"]),
        # 2.8.0 itself pins outside ATen's host-allocator registry: below the minimum, and why.
        ("2.8.0", ["too old", ">= 2.8.0.post2", "host-allocator registry"]),
        (TOO_NEW, ["newer", RANGE, f"{ALLOW}=1"]),
    ],
)
def test_activation_refuses_unsupported_torch_npu(run_isolated, tmp_path, version, expect):
    """``import torch_npu_pinpool`` refuses torch_npu builds outside 2.8.0.post2-2.14 with a message
    naming the minimum, or the tested range and the override."""
    stub = _stub_torch_npu(tmp_path, version)
    r = run_isolated(EXPLICIT_IMPORT, env=_with_pythonpath(stub, **{ALLOW: ""})).result
    assert r["stub"] == version, "the stub torch_npu was not the one imported"
    assert r["raised"] == "RuntimeError", r
    for text in expect:
        assert text in r["message"], r["message"]


AUTOLOAD = r"""
import logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s %(message)s")
import torch   # torch's backend autoload: torch_npu's and torch_npu_pinpool's entry points
import torch_npu
pp = sys.modules.get("torch_npu_pinpool")
result = {
    "stub": torch_npu.__version__,
    "loaded": pp is not None,
    "active": pp is not None and pp.is_active(),
}
"""


@pytest.mark.parametrize(
    "version, expect",
    [
        ("2.7.1", ">= 2.8.0.post2"),
        ("2.8.0", ">= 2.8.0.post2"),
        (TOO_NEW, f"Set {ALLOW}=1 to activate"),
    ],
)
def test_autoload_refusal_never_breaks_import_torch(run_isolated, tmp_path, version, expect):
    """Through the ``torch.backends`` entry point a refused torch_npu is a logged warning, not
    an exception: ``import torch`` still works (torch turns an exception from an entry point,
    even one raised while importing the module, into a failed ``import torch``)."""
    stub = _stub_torch_npu(tmp_path, version)
    env = _with_pythonpath(stub, TORCH_DEVICE_BACKEND_AUTOLOAD="1", **{ALLOW: ""})
    r = run_isolated(AUTOLOAD, env=env)
    assert r.result == {"stub": version, "loaded": True, "active": False}
    warnings = [line for line in r.stdout.splitlines() if "not activated" in line]
    assert len(warnings) == 1 and expect in warnings[0], r.stdout


UNTESTED = r"""
import logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s %(message)s")
import torch, torch_npu
torch_npu.__version__ = "2.15.0"   # the real torch_npu, claiming a release newer than tested
try:
    import torch_npu_pinpool
    torch_npu_pinpool.activate()
    torch_npu_pinpool.mode()
    result = {"active": torch_npu_pinpool.is_active()}
except RuntimeError as e:
    result = {"error": str(e)}
"""


def test_untested_torch_npu_override(run_isolated):
    """A torch_npu newer than 2.14 is refused; with TORCH_NPU_PINPOOL_ALLOW_UNTESTED=1 the
    plugin activates on it, with exactly one warning."""
    refused = run_isolated(UNTESTED, env={ALLOW: ""})
    assert "error" in refused.result and f"{ALLOW}=1" in refused.result["error"]
    allowed = run_isolated(UNTESTED, env={ALLOW: "1"})
    assert allowed.result == {"active": True}
    warnings = [line for line in allowed.stdout.splitlines() if "untested" in line]
    assert len(warnings) == 1 and RANGE in warnings[0], allowed.stdout


IMPORT_FIRST = r"""
import torch_npu_pinpool    # imports torch, whose autoload calls our entry point on this thread
result = {"active": torch_npu_pinpool.is_active()}
"""


def test_import_plugin_first_with_autoload(run_isolated):
    """``import torch_npu_pinpool`` before torch with backend autoload on: the entry point runs
    inside that import (nested activation on the same thread) and must neither deadlock nor
    fail."""
    r = run_isolated(IMPORT_FIRST, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}, timeout=180)
    assert r.result == {"active": True}


# --- build ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory) -> Path:
    """The checkout's tracked and untracked-but-not-ignored files (what ci/lib/install-plugin.sh
    copies), without build output."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout ({e})")
    dest = tmp_path_factory.mktemp("src")
    for name in filter(None, listed.decode().split("\0")):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


BACKEND = r"""
import os, sys
for name in os.environ.get("HIDE", "").split():
    sys.modules[name] = None          # as if not installed: find_spec -> None, import fails
sys.path.insert(0, "build_backend")
import pinpool_backend
hook = getattr(pinpool_backend, os.environ["HOOK"])
print("BUILT:", hook(os.environ["OUT"]))
"""


def _backend(src: Path, hook: str, out: Path, env: dict[str, str] | None = None, hide: str = ""):
    full = dict(os.environ)
    full.pop(ALLOW, None)  # only where a test sets it
    full.update(env or {})
    full.update({"HOOK": hook, "OUT": str(out), "HIDE": hide})
    return subprocess.run(
        [sys.executable, "-c", BACKEND],
        cwd=src,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _other_supported_release() -> str:
    return "2.9.0" if _torch_minor() != (2, 9) else "2.8.0.post2"


@pytest.mark.parametrize(
    "case",
    ["no torch", "no torch_npu", "too old", "too new", "mismatch"],
)
def test_build_refuses(source_copy, tmp_path, case):
    """setup.py stops before compiling, non-zero, with a message naming what is wrong and the
    fix. "too old" is checked before the torch / torch_npu pairing (stub 2.7.1 pairs with no
    torch in any test env, yet the message is the minimum)."""
    env: dict[str, str] = {}
    hide = ""
    if case == "no torch":
        hide, expect = "torch", ["torch is not importable", "--no-build-isolation", "pip install ."]
    elif case == "no torch_npu":
        hide, expect = "torch_npu", ["torch_npu is not installed"]
    elif case == "too old":
        env = _with_pythonpath(_stub_torch_npu(tmp_path, "2.7.1"))
        expect = ["2.7.1 is too old", ">= 2.8.0.post2"]
    elif case == "too new":
        env = _with_pythonpath(_stub_torch_npu(tmp_path, TOO_NEW))
        expect = [f"{TOO_NEW} is newer", RANGE, f"Set {ALLOW}=1 to build"]
    else:
        env = _with_pythonpath(_stub_torch_npu(tmp_path, _other_supported_release()))
        expect = ["does not pair with torch", "torch_npu X requires torch X"]
    r = _backend(source_copy, "build_wheel", tmp_path / "dist", env, hide)
    assert r.returncode != 0, r.stdout + r.stderr
    for text in expect:
        assert text in r.stderr, r.stderr[-3000:]
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())


def test_build_untested_override(source_copy, tmp_path):
    """With TORCH_NPU_PINPOOL_ALLOW_UNTESTED=1 a torch_npu newer than 2.14 passes the gate
    with one warning; this stub then stops at the pairing check (no test env has torch 2.15)."""
    stub = _stub_torch_npu(tmp_path, TOO_NEW)
    r = _backend(
        source_copy, "build_wheel", tmp_path / "dist", _with_pythonpath(stub, **{ALLOW: "1"})
    )
    assert f"Set {ALLOW}=1 to build" not in r.stderr
    assert r.stderr.count("WARNING") == 1 and "will build anyway, untested" in r.stderr
    if _torch_minor() != (2, 15):
        assert r.returncode != 0 and "does not pair with torch" in r.stderr, r.stderr[-3000:]


def test_pip_no_build_isolation_refusal(source_copy, tmp_path):
    """The same refusal through pip (``--no-build-isolation``, as on an offline machine):
    non-zero exit, the message in pip's output."""
    stub = _stub_torch_npu(tmp_path, TOO_NEW)
    full = dict(os.environ)
    full.update(_with_pythonpath(stub))
    full.pop(ALLOW, None)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
         "--no-build-isolation", "--no-deps", "--no-index", str(source_copy)],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert f"{TOO_NEW} is newer" in out and f"{ALLOW}=1" in out, out[-3000:]


def test_sdist_needs_no_torch_and_holds_the_sources(source_copy, tmp_path):
    """The backend's sdist builds with torch and torch_npu unimportable, and holds what a wheel
    build from it needs: the C++ sources and headers, the package, the backend, the docs."""
    r = _backend(source_copy, "build_sdist", tmp_path / "dist", hide="torch torch_npu")
    assert r.returncode == 0, r.stdout + r.stderr
    (sdist,) = (tmp_path / "dist").glob("torch_npu_pinpool-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    csrc = {p.relative_to(source_copy).as_posix() for p in (source_copy / "csrc").rglob("*")}
    assert {p for p in csrc if p.endswith((".h", ".cpp"))} <= names
    assert any(p.endswith(".h") for p in csrc) and any(p.endswith(".cpp") for p in csrc)
    # Every layer's folder (docs/design.md, "Shape"), the audit's and the test-only ones too.
    for layer in ("core", "copy", "audit", "runtime", "testing", "python"):
        assert any(n.startswith(f"csrc/{layer}/") and n.endswith(".cpp") or
                   n.startswith(f"csrc/{layer}/") and n.endswith(".h") for n in names), layer
    for needed in [
        "setup.py",
        "pyproject.toml",
        "MANIFEST.in",
        "README.md",
        "CHANGELOG.md",
        "LICENSE",
        "build_backend/pinpool_backend.py",
        "torch_npu_pinpool/__init__.py",
        "torch_npu_pinpool/_version.py",
        "torch_npu_pinpool/_hooks.py",
        "torch_npu_pinpool/__main__.py",
    ]:
        assert needed in names, sorted(names)
    assert not any(n.endswith((".so", ".o", ".pyc")) for n in names), sorted(names)
    # Not the simulated CANN runtime, a component of its own (simcann/README.md), nor the tests.
    assert not any(n.startswith(("simcann/", "test/")) for n in names), sorted(names)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces -> '-'."""
    text = heading.strip().lower()
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def test_sdist_resolves_every_readme_link(source_copy, tmp_path):
    """Every relative link of README.md (docs, CONTRIBUTING, the bench page and plot, the
    license) names a file the sdist holds, and every '#anchor' a heading of the page it names."""
    import re

    r = _backend(source_copy, "build_sdist", tmp_path / "dist", hide="torch torch_npu")
    assert r.returncode == 0, r.stdout + r.stderr
    (sdist,) = (tmp_path / "dist").glob("torch_npu_pinpool-*.tar.gz")
    with tarfile.open(sdist) as tar:
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp_path / "x", **safe)
    (root,) = (tmp_path / "x").iterdir()
    readme = (root / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    relative = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(relative) > 10, relative  # the page's links were found at all
    broken = []
    for link in relative:
        path, _, anchor = link.partition("#")
        target = root / path if path else root / "README.md"
        if not target.is_file():
            broken.append(f"{link}: no {path} in the sdist")
            continue
        if anchor and target.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", target.read_text(), flags=re.M)
            if anchor not in {_anchor(h) for h in headings}:
                broken.append(f"{link}: no heading '#{anchor}' in {path or 'README.md'}")
    assert not broken, "README links broken in the sdist (MANIFEST.in):\n" + "\n".join(broken)


def test_a_rebuild_never_reuses_a_built_extension(source_copy, tmp_path):
    """Note [No stale extension] in setup.py: with a built ``_C`` newer than every source in the
    build directory (a checkout built before a torch_npu upgrade), the build compiles again
    instead of skipping it as up to date. Stopped as soon as it says which."""
    import re
    import signal
    import sysconfig

    build_lib = tmp_path / "lib"
    (build_lib / "torch_npu_pinpool").mkdir(parents=True)
    (build_lib / "torch_npu_pinpool" / f"_C{sysconfig.get_config_var('EXT_SUFFIX')}").touch()
    cmd = [sys.executable, "setup.py", "-v", "build_ext", "--build-lib", str(build_lib)]
    cmd += ["--build-temp", str(tmp_path / "temp")]
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    env.pop(ALLOW, None)
    child = subprocess.Popen(cmd, cwd=source_copy, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    try:
        for line in child.stdout:
            seen.append(line)
            if re.search(r"(building|skipping) 'torch_npu_pinpool\._C'", line):
                break
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # its own session: the compilers it started too
        child.wait()
    said = "".join(seen)
    assert "building 'torch_npu_pinpool._C' extension" in said, said[-3000:]
