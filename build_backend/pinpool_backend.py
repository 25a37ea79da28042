"""In-tree PEP 517 build backend for torch_npu_pinpool: setuptools' backend, plus two things.

- Wheel and editable builds build against the torch / torch_npu of the environment being
  installed into, also under pip's build isolation (see the Note below).
- Source distributions need no torch: the backend tells setup.py to leave the extension out
  (``_TORCH_NPU_PINPOOL_SDIST=1``), so ``setup.py`` only collects files.

pyproject.toml names it (``build-backend = "pinpool_backend"``, ``backend-path =
["build_backend"]``); MANIFEST.in puts this directory into the sdist, so a build from the sdist
uses it too.

Note [Building against the installed torch]
-------------------------------------------
The extension links against libtorch / libtorch_npu and compiles against their headers, so it
must be built with the very torch and torch_npu it will run with, never with a torch that a
build front end downloaded. pyproject.toml therefore does not list torch in
``build-system.requires`` (under build isolation pip would install the newest torch from PyPI,
which pairs with no torch_npu installed here, and is a multi-GB download).

Under build isolation pip runs this backend with the interpreter of the target environment,
but a ``sitecustomize`` it generates drops that environment's site-packages from ``sys.path``
(only the isolated directory holding ``requires`` stays). ``sysconfig`` and ``site`` still
name the target environment's directories, because the interpreter and its prefix are
unchanged. So, for wheel and editable builds, when ``torch`` is not importable the backend
appends those directories to ``sys.path``: at the end, so the isolated setuptools / wheel
still win over any older copy in the target environment. setup.py then finds the user's torch
and torch_npu and builds against them. ``.pth`` files in those directories are not processed
(nothing there needs to run for a build; torch_npu is located, not imported).

This cannot work where the front end builds with another interpreter (``python -m build`` and
``uv`` build in a fresh venv of their own): torch stays unimportable and setup.py stops with a
message naming the fix (``pip install .`` with the pip of the environment that has torch_npu,
or ``pip install --no-build-isolation .`` / ``python -m build --no-isolation`` there). With
``--no-build-isolation`` torch is importable already and the backend changes nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import site
import sys
import sysconfig

from setuptools import build_meta as _setuptools

# Read by setup.py: "1" while building an sdist (no extension, no torch needed).
SDIST_ENV = "_TORCH_NPU_PINPOOL_SDIST"


def _target_site_dirs() -> list[str]:
    """The target environment's site-packages, as its interpreter's configuration names them
    (also under build isolation, which only rewrites ``sys.path``)."""
    paths = sysconfig.get_paths()
    dirs = [paths.get("purelib"), paths.get("platlib")]
    if hasattr(site, "getsitepackages"):  # a venv with system site-packages lists those too
        dirs.extend(site.getsitepackages())
    seen: list[str] = []
    for d in dirs:
        if d and os.path.isdir(d) and d not in seen:
            seen.append(d)
    return seen


def _find_installed_torch() -> None:
    """Note [Building against the installed torch]: make the target environment's torch
    importable for setup.py when build isolation hid it."""
    if importlib.util.find_spec("torch") is not None:
        return
    known = {os.path.normcase(os.path.abspath(p)) for p in sys.path}
    for d in _target_site_dirs():
        if os.path.normcase(os.path.abspath(d)) not in known:
            sys.path.append(d)
    importlib.invalidate_caches()


@contextlib.contextmanager
def _sdist_mode():
    old = os.environ.get(SDIST_ENV)
    os.environ[SDIST_ENV] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(SDIST_ENV, None)
        else:
            os.environ[SDIST_ENV] = old


# --- sdist: no torch ---------------------------------------------------------------------------


def get_requires_for_build_sdist(config_settings=None):
    with _sdist_mode():
        return _setuptools.get_requires_for_build_sdist(config_settings)


def build_sdist(sdist_directory, config_settings=None):
    with _sdist_mode():
        return _setuptools.build_sdist(sdist_directory, config_settings)


# --- wheel and editable: against the installed torch / torch_npu ------------------------------


def get_requires_for_build_wheel(config_settings=None):
    _find_installed_torch()
    return _setuptools.get_requires_for_build_wheel(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _find_installed_torch()
    return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _find_installed_torch()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def get_requires_for_build_editable(config_settings=None):
    _find_installed_torch()
    return _setuptools.get_requires_for_build_editable(config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    _find_installed_torch()
    return _setuptools.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _find_installed_torch()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
