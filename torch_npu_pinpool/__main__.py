"""``python -m torch_npu_pinpool doctor``: versions, mode, and a self-test capture.
``python -m torch_npu_pinpool audit -- PROGRAM ARGS``: run a program with the audit report on
(``_audit.py``)."""

from __future__ import annotations

import argparse
import ctypes
import os
import sys


def _runtime() -> str:
    """The CANN runtime in use: the simulator (it exports ``simcann_*``) or the toolkit."""
    try:
        lib = ctypes.CDLL("libascendcl.so", mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        return f"not loadable ({e})"
    if hasattr(lib, "simcann_state_id"):
        return "simulated CANN runtime (test/simcann)"
    home = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH") or ""
    version = ""
    for candidate in ("version.cfg", "compiler/version.info", "runtime/version.info"):
        path = os.path.join(home, candidate)
        if home and os.path.exists(path):
            with open(path) as f:
                version = f.read().strip().splitlines()[0]
            break
    return f"CANN {version or '(version unknown)'}"


def _sanitizers() -> str:
    """The sanitizers the extension was built with ("" for a normal build)."""
    try:
        from . import _C
    except ImportError:
        return ""
    return str(getattr(_C, "sanitizers", ""))


def self_test() -> tuple[bool, str]:
    """Capture a copy from a pinned input, free it, pin other bytes, replay: the replay must
    still read the captured bytes."""
    import torch
    import torch_npu

    n = 4096
    torch.npu.set_device(0)
    dev = torch.zeros(n, device="npu")
    stream = torch.npu.Stream()
    torch.npu.synchronize()
    graph = torch.npu.NPUGraph()
    with torch.npu.stream(stream):
        with torch.npu.graph(graph, stream=stream):
            src = torch.full((n,), 7.0).pin_memory()
            dev.copy_(src, non_blocking=True)
            del src
        torch.npu.synchronize()
        torch_npu.npu.host_empty_cache()
        others = [torch.full((n,), -1.0).pin_memory() for _ in range(4)]
        graph.replay()
        torch.npu.synchronize()
    seen = sorted(set(dev.cpu().tolist()))
    del others, graph
    ok = seen == [7.0]
    return ok, f"replay read {seen} (expected [7.0])"


def doctor() -> int:
    import torch

    try:
        import torch_npu
    except ImportError as e:
        print(f"torch_npu: not importable ({e})")
        return 1
    import torch_npu_pinpool as pp

    print(f"torch:              {torch.__version__}")
    print(f"torch_npu:          {torch_npu.__version__}")
    print(f"runtime:            {_runtime()}")
    print(f"torch_npu_pinpool:  {pp.__version__}")
    print(f"mode:               {pp.mode()}")
    print(f"active:             {pp.is_active()}")
    sanitizers = _sanitizers()
    if sanitizers:  # a test build (TORCH_NPU_PINPOOL_SANITIZE): say so, it is not for production
        print(f"sanitized build:    {sanitizers} (TORCH_NPU_PINPOOL_SANITIZE; a test build)")
    if not pp.is_active():
        print("self-test:          skipped (allocator not active; TORCH_NPU_PINPOOL=0?)")
        return 1
    try:
        ok, detail = self_test()
    except Exception as e:  # report, do not crash
        ok, detail = False, f"{type(e).__name__}: {e}"
    print(f"self-test:          {'PASS' if ok else 'FAIL'}: {detail}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["audit"]:
        from . import _audit

        return _audit.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m torch_npu_pinpool")
    parser.add_argument("command", choices=["doctor", "audit"])
    parser.parse_args(argv)
    return doctor()


if __name__ == "__main__":
    sys.exit(main())
