"""What ``import torch_npu_pinpool`` changes in this process, seen from outside the plugin
(docs/what-it-changes.md; test/pinpool/test_what_it_changes.py): every function or class of
torch / torch_npu / the graph classes whose object changed or appeared, the origin of the NPU's
``aten::copy_`` kernel, whether the registered host allocator is the plugin's, c10's allocator
settings, the number of exit handlers, the environment, logging handlers, and the files in the
working directory - each before and after the import.

Run with ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` (importing torch then activates nothing); plugin
on, and off (``TORCH_NPU_PINPOOL=0``: nothing may change). Imports torch and torch_npu itself,
not ``scenario``, which would activate the plugin first.
"""

from __future__ import annotations

import atexit
import inspect
import logging
import os
import types
from typing import Any

import torch
import torch_npu
import torch_npu.npu.graphs
from _lib.result import report  # torch-free


def _owners() -> dict[str, Any]:
    """Where the plugin could patch something a user calls: the modules and graph classes."""
    candidates = [
        ("torch", torch),
        ("torch_npu", torch_npu),
        ("torch_npu.npu", torch_npu.npu),
        ("torch.npu", getattr(torch, "npu", None)),
        ("torch_npu.npu.graphs", torch_npu.npu.graphs),
        ("torch.accelerator", getattr(torch, "accelerator", None)),
        ("NPUGraph", torch_npu.npu.graphs.NPUGraph),
        ("torch.accelerator.Graph", getattr(getattr(torch, "accelerator", None), "Graph", None)),
    ]
    seen: set[int] = set()
    owners = {}
    for name, owner in candidates:
        if owner is not None and id(owner) not in seen:  # torch.npu may be torch_npu.npu
            seen.add(id(owner))
            owners[name] = owner
    return owners


def _attributes() -> dict[str, Any]:
    """Every attribute of every owner, as stored (no descriptor is called)."""
    out = {}
    for owner_name, owner in _owners().items():
        names = dir(owner) if isinstance(owner, type) else list(vars(owner))
        for name in names:
            try:
                out[f"{owner_name}.{name}"] = inspect.getattr_static(owner, name)
            except AttributeError:
                continue
    return out


def _copy_kernel() -> str:
    """The file that registered the PrivateUse1 kernel of aten::copy_ ("" if none)."""
    for line in torch._C._dispatch_dump_table("aten::copy_").splitlines():
        if line.startswith("PrivateUse1:"):
            return os.path.basename(line.split("registered at ", 1)[-1].split(":")[0])
    return ""


def _settings() -> str | None:
    get = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
    return get() if get is not None else None


def _handlers() -> int:
    return len(logging.getLogger().handlers) + len(logging.getLogger("torch_npu_pinpool").handlers)


def _snapshot() -> dict[str, Any]:
    return {
        "attributes": _attributes(),
        "copy_kernel": _copy_kernel(),
        "settings": _settings(),
        "exit_handlers": atexit._ncallbacks(),
        "environ": dict(os.environ),
        "log_handlers": _handlers(),
    }


before = _snapshot()
import torch_npu_pinpool  # noqa: E402  the change under test

after = _snapshot()
old, new = before["attributes"], after["attributes"]
changed = sorted(k for k in old.keys() & new.keys() if old[k] is not new[k])
added = sorted(
    k for k in new.keys() - old.keys() if not isinstance(new[k], types.ModuleType)
)
out = {
    "torch": torch.__version__,
    "torch_npu": torch_npu.__version__,
    "active": torch_npu_pinpool.is_active(),
    "changed": changed,
    "added": added,
    "copy_kernel": [before["copy_kernel"], after["copy_kernel"]],
    "settings": [before["settings"], after["settings"]],
    "exit_handlers_added": after["exit_handlers"] - before["exit_handlers"],
    "environ_changed": sorted(
        k
        for k in before["environ"].keys() | after["environ"].keys()
        if before["environ"].get(k) != after["environ"].get(k)
    ),
    "log_handlers_added": after["log_handlers"] - before["log_handlers"],
    "files": sorted(os.listdir(".")),
    "host_func_launchers": sorted(
        n for n in ("_launch_host_func", "_launch_host_func_pending") if hasattr(torch_npu.npu, n)
    ),
}
report(out)
