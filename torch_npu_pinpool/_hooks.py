"""Hooks on ``torch_npu.npu.graphs.NPUGraph``: keep our capture registry in step with the
runtime's capture status.

``torch.npu.graph``, ``make_graphed_callables`` and graph trees all go through the methods of
this class, so patching the class attributes covers them.

* torch_npu <= 2.10 ("backport") tells the host allocator nothing: ``capture_begin`` /
  ``capture_end`` register the capture (see Note [Backport capture registration] in
  csrc/module.cpp); the graph's use of its pool is released by ``reset`` or, because the C++
  destructor calls the C++ ``reset`` directly, by a ``weakref.finalize`` on the graph.
* torch_npu >= 2.11 ("native-present") calls begin/end_allocate_to_pool and release_pool on
  the registered allocator itself; the hooks only repair the failure paths torch_npu leaves
  behind (a capture_begin that fails after begin_allocate_to_pool; a capture_end that fails
  after end_allocate_to_pool leaves a pool use nobody releases; on 2.11 a capture_end whose
  runtime call fails never calls end_allocate_to_pool at all).
* Both: ``replay`` tells the allocator which stream the graph ran on, so retiring a pool waits
  for exactly those replays.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

_ID = "_pinpool_id"  # the graph's pool id, set once capture_end succeeded
_TOKEN = "_pinpool_token"  # the capture registration(s) underway
_USE = "_pinpool_use"  # backport: the graph's use of its pool


class _PoolUse:
    """A graph's use of its pool, released exactly once (reset or garbage collection)."""

    __slots__ = ("_ext", "_id", "_released", "__weakref__")

    def __init__(self, ext: Any, pool_id: tuple[int, int]) -> None:
        self._ext, self._id, self._released = ext, pool_id, False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._ext.release_pool(self._id)


def _pool_arg(args: tuple, kwargs: dict) -> tuple[int, int]:
    pool = args[0] if args else kwargs.get("pool")
    if pool is None:
        return (0, 0)
    return (int(pool[0]), int(pool[1]))


def _refuse_expandable_segments() -> None:
    conf = os.environ.get("PYTORCH_NPU_ALLOC_CONF", "").replace(" ", "").lower()
    if "pin_memory_expandable_segments:true" in conf:
        raise RuntimeError(
            "torch_npu_pinpool: graph capture is not supported with "
            "PYTORCH_NPU_ALLOC_CONF=pin_memory_expandable_segments:True: torch_npu's copy "
            "kernels do not report every use of expandable pinned blocks to the host "
            "allocator, so a captured block could not be kept alive for its graph. Remove "
            "pin_memory_expandable_segments from PYTORCH_NPU_ALLOC_CONF to capture graphs "
            "(eager pinned memory works either way)."
        )


def install(ext: Any, native_pools: bool) -> None:
    from torch_npu.npu.graphs import NPUGraph

    if getattr(NPUGraph, "_pinpool_hooked", False):
        return
    orig_begin = NPUGraph.capture_begin
    orig_end = NPUGraph.capture_end
    orig_replay = NPUGraph.replay
    orig_reset = NPUGraph.reset

    def remember_pool(graph: Any) -> None:
        graph.__dict__[_ID] = tuple(graph.pool())

    if native_pools:

        def capture_begin(self, *args, **kwargs):
            _refuse_expandable_segments()
            seq = ext.seq()
            try:
                result = orig_begin(self, *args, **kwargs)
            except BaseException:
                # torch_npu called begin_allocate_to_pool before aclmdlRICaptureBegin.
                ext.abort_captures_since(seq)
                raise
            # Note [Capture that ended without telling the allocator] (csrc/module.cpp)
            tokens = ext.captures_since(seq)
            for token in tokens:
                ext.watch_capture(token)
            self.__dict__[_TOKEN] = tokens
            return result

        def capture_end(self):
            seq = ext.seq()
            tokens = self.__dict__.pop(_TOKEN, [])
            try:
                orig_end(self)
            except BaseException:
                # torch_npu >= 2.12: end_allocate_to_pool ran, the capture is over without a
                # graph, and reset() only releases pools of graphs that have one: release it.
                for pool_id in ext.ended_since(seq):
                    ext.release_pool(pool_id)
                # torch_npu 2.11 raised before end_allocate_to_pool: abort what is over.
                live = [token for token in tokens if ext.capture_active(token)]
                for token in tokens:
                    if token not in live:
                        ext.abort_capture(token)
                if live:
                    self.__dict__[_TOKEN] = live
                raise
            for token in tokens:
                ext.forget_capture(token)
            remember_pool(self)

        def reset(self):
            self.__dict__.pop(_ID, None)
            return orig_reset(self)

    else:

        def capture_begin(self, *args, **kwargs):
            _refuse_expandable_segments()
            token = ext.begin_capture(_pool_arg(args, kwargs))
            try:
                result = orig_begin(self, *args, **kwargs)
                ext.set_capture_model(token)
            except BaseException:
                if ext.capture_active(token):  # set_capture_model failed: cannot happen
                    raise
                ext.abort_capture(token)
                raise
            self.__dict__[_TOKEN] = token
            return result

        def capture_end(self):
            token = self.__dict__.get(_TOKEN)
            try:
                orig_end(self)
            except BaseException:
                # Still capturing (ended on the wrong stream): keep the registration so a
                # correct retry works. Otherwise the capture is over without a graph.
                if token is not None and not ext.capture_active(token):
                    self.__dict__.pop(_TOKEN, None)
                    ext.abort_capture(token)
                raise
            if token is None:  # capture began before activation: not ours
                return
            del self.__dict__[_TOKEN]
            pool_id = tuple(self.pool())
            ext.end_capture(token, pool_id)
            use = _PoolUse(ext, pool_id)
            finalizer = weakref.finalize(self, use.release)
            finalizer.atexit = False
            self.__dict__[_USE] = use
            self.__dict__[_ID] = pool_id

        def reset(self):
            self.__dict__.pop(_ID, None)
            use = self.__dict__.pop(_USE, None)
            try:
                return orig_reset(self)
            finally:
                if use is not None:
                    use.release()

    def replay(self):
        pool_id = self.__dict__.get(_ID)
        if pool_id is not None:
            ext.note_replay(pool_id)
        return orig_replay(self)

    for name, fn, orig in (
        ("capture_begin", capture_begin, orig_begin),
        ("capture_end", capture_end, orig_end),
        ("replay", replay, orig_replay),
        ("reset", reset, orig_reset),
    ):
        fn.__name__ = name
        fn.__qualname__ = f"NPUGraph.{name}"
        fn.__doc__ = getattr(orig, "__doc__", None)
        fn.__wrapped__ = orig
        setattr(NPUGraph, name, fn)
    NPUGraph._pinpool_hooked = True
