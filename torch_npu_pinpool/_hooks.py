"""Hooks on ``torch_npu.npu.graphs.NPUGraph`` and ``torch.accelerator.Graph`` (torch >= 2.13):
tell the allocator's capture registry about each graph (csrc/core/capture_hooks.cpp, Note
[Graph handles]).

``torch.npu.graph``, ``make_graphed_callables``, graph trees, TorchAir and vllm-ascend all go
through NPUGraph's methods; ``torch.accelerator.Graph`` (a Python class over ATen's graph, which
reaches torch_npu's graph past NPUGraph) has the same four. Patching the two classes' attributes
covers them. Each hook is one registry call around the original method; the registry knows the
torch_npu mode (whether torch_npu calls the pool hooks itself), so the hooks are the same on
every supported torch_npu. A graph keeps one opaque attribute: its ``_GraphRef``.
"""

from __future__ import annotations

import atexit
import weakref
from typing import Any, Callable

_HANDLE = "_pinpool_graph"
# handle -> the graph's _GraphRef, while the graph's death is unreported. Holding the reference
# here keeps it reachable, so its callback reports a garbage-collected graph even from a cycle
# (the C++ destructor calls the C++ reset directly, so only a callback sees that); a plain
# weakref, not weakref.finalize, which costs a capture ~5 us more.
_live: dict[int, weakref.ref] = {}
_ext: Any = None  # the extension module, set by install()
_NPUGraph: Any = None  # torch_npu.npu.graphs.NPUGraph, set by install()
_exiting = False  # after atexit: deaths are not reported (as weakref.finalize with atexit=False)


@atexit.register
def _at_exit() -> None:
    global _exiting
    _exiting = True


class _GraphRef(weakref.ref):
    """A graph's registry handle (``id``): the weak reference the graph keeps in its
    ``__dict__`` and ``_live`` holds. Its death is reported exactly once: on ``reset()``, or by
    the callback when the graph is garbage-collected, whichever comes first (both pop ``id``
    from ``_live``). One object per graph, and no bound method: a reset frees nothing else."""

    __slots__ = ("id",)

    def __init__(self, graph: Any, handle: int) -> None:
        super().__init__(graph, _collected)
        self.id = handle
        _live[handle] = self

    def __new__(cls, graph: Any, handle: int) -> _GraphRef:
        return super().__new__(cls, graph, _collected)

    def release(self) -> None:
        if _live.pop(self.id, None) is not None:
            _ext.graph_died(self.id)


def _collected(ref: _GraphRef) -> None:
    if not _exiting:
        ref.release()


def _pool_arg(graph: Any, args: tuple, kwargs: dict) -> tuple[int, int]:
    """The pool a capture_begin call names: NPUGraph takes it as an argument,
    torch.accelerator.Graph from its constructor (``graph_pool``); (0, 0) for a private one."""
    if isinstance(graph, _NPUGraph):
        pool = args[0] if args else kwargs.get("pool")
    else:
        pool = graph.graph_pool
    return (0, 0) if pool is None else (int(pool[0]), int(pool[1]))


def _capture_begin(ext: Any, orig: Callable) -> Callable:
    def capture_begin(self, *args, **kwargs):
        # graph_begin refuses PYTORCH_NPU_ALLOC_CONF=pin_memory_expandable_segments:True
        handle = ext.graph_begin(_pool_arg(self, args, kwargs))
        try:
            result = orig(self, *args, **kwargs)
            ext.graph_capturing(handle)
        except BaseException:
            if ext.graph_begin_failed(handle):  # the runtime captures: keep protecting it
                self.__dict__[_HANDLE] = _GraphRef(self, handle)
            raise
        self.__dict__[_HANDLE] = _GraphRef(self, handle)
        return result

    return capture_begin


def _capture_end(ext: Any, orig: Callable) -> Callable:
    def capture_end(self):
        graph = self.__dict__.get(_HANDLE)
        try:
            orig(self)
        except BaseException:
            # Note [Capture that ended without telling the allocator]: kept only if the
            # runtime still captures (a retry of capture_end may work).
            if graph is not None and not ext.graph_end_failed(graph.id):
                del self.__dict__[_HANDLE]
                graph.release()
            raise
        if graph is not None:  # None: the capture began before activation, not ours
            ext.graph_end(graph.id, tuple(self.pool()))

    return capture_end


def _replay(ext: Any, orig: Callable) -> Callable:
    note = ext.graph_replay  # on every replay: a thread-local compare in C++ once noted

    def replay(self):
        graph = self.__dict__.get(_HANDLE)
        try:
            return orig(self)
        finally:  # once its work is enqueued (csrc Note [Shared fences])
            if graph is not None:
                note(graph.id)

    return replay


def _replay_audited(ext: Any, orig: Callable) -> Callable:
    """With the report on: the replay checked for written_while_queued (csrc/python/report.cpp,
    Note [Audited replay])."""
    begin, end, note = ext.audit_replay_begin, ext.audit_replay_end, ext.graph_replay

    def replay(self):
        graph = self.__dict__.get(_HANDLE)
        if graph is None:
            return orig(self)
        check = begin(graph.id)  # None: nothing to compare
        try:
            orig(self)
        finally:
            note(graph.id)  # once its work is enqueued (csrc Note [Shared fences])
        if check is not None:
            end(check)

    return replay


def _reset(ext: Any, orig: Callable) -> Callable:
    died = ext.graph_died
    scope = ext.hooked_reset if ext.aten_host_pools else None

    def reset(self):
        graph = self.__dict__.get(_HANDLE)
        if graph is None:  # not made through the hooks: its release_pool counts as such
            return orig(self)
        # torch_npu's reset first: if it raises, the graph can still replay, so its blocks
        # stay its own (the plugin's state is as it was before the call). Its release_pool is
        # this graph's, not another's (csrc Note [Releases without hooks]); torch < 2.11 has
        # no release_pool, so no scope to open.
        if scope is not None:
            scope(True)
            try:
                result = orig(self)
            finally:
                scope(False)
        else:
            result = orig(self)
        del self.__dict__[_HANDLE]
        if _live.pop(graph.id, None) is not None:  # graph.release(), inlined
            died(graph.id)
        return result

    return reset


def _finalizer(orig: Callable | None) -> Callable:
    """``__del__``: a collected graph is reset through its hook before torch_npu's destructor
    resets it again, so its release_pool is known to be its own."""

    def __del__(self):
        if not _exiting and self.__dict__.get(_HANDLE) is not None:
            self.reset()
        if orig is not None:
            orig(self)

    return __del__


_HOOKS = {
    "capture_begin": _capture_begin,
    "capture_end": _capture_end,
    "replay": _replay,
    "reset": _reset,
}


def _host_function(ext: Any, orig: Callable) -> Callable:
    """With the report on: a host function launched on an NPU stream may write pinned memory in
    stream order, so reads enqueued after it are not checked (csrc/audit/audit.cpp, Note [What
    written_while_queued sees])."""

    def launch(*args, **kwargs):
        ext.audit_host_function()
        return orig(*args, **kwargs)

    return launch


def _patch(
    owner: Any, name: str, hook: Callable, orig: Callable | None, qualname: str
) -> None:
    hook.__name__ = name
    hook.__qualname__ = qualname
    hook.__doc__ = getattr(orig, "__doc__", None)
    if orig is not None:
        hook.__wrapped__ = orig
    setattr(owner, name, hook)


def _graph_classes() -> list[Any]:
    """The classes a capture goes through: NPUGraph, and torch.accelerator.Graph where torch has
    it (>= 2.13)."""
    import torch

    classes = [_NPUGraph]
    accelerator_graph = getattr(getattr(torch, "accelerator", None), "Graph", None)
    if accelerator_graph is not None and not issubclass(_NPUGraph, accelerator_graph):
        classes.append(accelerator_graph)
    return classes


def install(ext: Any, audit: bool = False) -> None:
    """Patch the graph classes once; the originals stay reachable as ``__wrapped__``. ``audit``:
    the report is on (its replay hook, and torch_npu's host-function launchers)."""
    import torch_npu
    from torch_npu.npu.graphs import NPUGraph

    global _ext, _NPUGraph
    if getattr(NPUGraph, "_pinpool_hooked", False):
        return
    _ext, _NPUGraph = ext, NPUGraph
    hooks = dict(_HOOKS, replay=_replay_audited) if audit else _HOOKS
    classes = _graph_classes()
    # Every original first: a torch without one of them raises here with nothing patched.
    originals = {(cls, name): getattr(cls, name) for cls in classes for name in hooks}
    for (cls, name), orig in originals.items():
        _patch(cls, name, hooks[name](ext, orig), orig, f"{cls.__name__}.{name}")
    for cls in classes:
        orig_del = cls.__dict__.get("__del__")
        _patch(cls, "__del__", _finalizer(orig_del), orig_del, f"{cls.__name__}.__del__")
        cls._pinpool_hooked = True
    if audit:
        for name in ("_launch_host_func", "_launch_host_func_pending"):
            orig = getattr(torch_npu.npu, name, None)
            if orig is not None:
                _patch(torch_npu.npu, name, _host_function(ext, orig), orig, name)
