"""The ``sitecustomize`` of the programs ``python -m torch_npu_pinpool audit`` runs.

The command copies this file as ``sitecustomize.py`` into a temporary directory that it puts
first on the program's ``PYTHONPATH``. At interpreter start it

* runs the ``sitecustomize`` it shadows, if there is one;
* activates torch_npu_pinpool right after the program imports torch_npu: also with
  ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` and when the program never imports torch_npu_pinpool;
* once activated, notes its command line in ``TORCH_NPU_PINPOOL_AUDIT_DIR`` (``proc-PID.txt``,
  for the command's per-process summary);
* at exit, notes in ``TORCH_NPU_PINPOOL_AUDIT_DIR`` why the plugin is not active, if the program
  imported torch_npu and it is not.

It imports nothing but the standard library until torch_npu is imported.
"""

from __future__ import annotations

import atexit
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_failure: str | None = None


def _run_shadowed_sitecustomize() -> None:
    paths = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # what site.py does with a failing sitecustomize
        print(
            f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(e).__name__}: {e}",
            file=sys.stderr,
        )


def _activate() -> None:
    global _failure
    try:
        import torch_npu_pinpool

        if torch_npu_pinpool.activate() is torch_npu_pinpool.Activation.SWITCHED_OFF:
            _failure = "TORCH_NPU_PINPOOL=0 turns it off"
            return
    except Exception as e:
        _failure = f"{type(e).__name__}: {e}"
        return
    _note("proc", " ".join(sys.argv))


def _note(what: str, text: str) -> None:
    audit_dir = os.environ.get("TORCH_NPU_PINPOOL_AUDIT_DIR")
    if not audit_dir:
        return
    try:
        with open(os.path.join(audit_dir, f"{what}-{os.getpid()}.txt"), "w") as f:
            f.write(f"{text}\n")
    except OSError:
        pass


class _ActivateAfterTorchNpu:
    """A meta path finder that answers nothing itself: it lets the others find torch_npu, and
    makes the loader activate the plugin once torch_npu's module has run. Used once."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch_npu":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is not None and hasattr(loader, "exec_module"):
            inner = loader.exec_module

            def exec_module(module):
                inner(module)
                _activate()

            loader.exec_module = exec_module
        return spec


def _note_why_not_active() -> None:
    audit_dir = os.environ.get("TORCH_NPU_PINPOOL_AUDIT_DIR")
    if not audit_dir or "torch_npu" not in sys.modules:
        return  # nothing to audit: the program never imported torch_npu
    plugin = sys.modules.get("torch_npu_pinpool")
    if plugin is not None and plugin.is_active():
        return
    reason = _failure or "torch_npu_pinpool did not load"
    _note("status", f"{' '.join(sys.argv)}\n{reason}")


_run_shadowed_sitecustomize()
if "torch_npu" in sys.modules:  # imported by the shadowed sitecustomize already
    _activate()
else:
    sys.meta_path.insert(0, _ActivateAfterTorchNpu())
atexit.register(_note_why_not_active)
