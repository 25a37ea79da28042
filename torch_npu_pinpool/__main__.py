"""The command line: ``python -m torch_npu_pinpool COMMAND``.

``doctor``: versions, mode, whether the plugin is active (and why not), a self-test capture.
``audit [--json PATH] [--interval S] -- PROGRAM [ARGS...]``: run a program with the audit report on
(``_audit.py``).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import sys
from types import ModuleType
from typing import Callable

PROG = "python -m torch_npu_pinpool"

# command -> one-line description (the top-level --help lists them).
COMMANDS: dict[str, str] = {
    "doctor": "check the installation: versions, mode, activation, and a capture self-test",
    "audit": "run a program with the audit report on: what the plugin prevented, and races "
    "(audit --help)",
}


def _runtime() -> str:
    """The CANN runtime in use: the simulator (it exports ``simcann_*``) or the toolkit."""
    try:
        lib = ctypes.CDLL("libascendcl.so", mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        return f"not loadable ({e})"
    if hasattr(lib, "simcann_state_id"):
        return "simulated CANN runtime (simcann)"
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

    from ._host_cache import host_empty_cache

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
        host_empty_cache()  # torch_npu.npu's, or through the registry where a build lacks it
        others = [torch.full((n,), -1.0).pin_memory() for _ in range(4)]
        graph.replay()
        torch.npu.synchronize()
    seen = sorted(set(dev.cpu().tolist()))
    del others, graph
    ok = seen == [7.0]
    return ok, f"replay read {seen} (expected [7.0])"


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _missing_extension() -> str | None:
    """Why the compiled extension cannot be found, naming the fix; None when it is there."""
    if importlib.util.find_spec(f"{__package__}._C") is not None:
        return None
    here = _package_dir()
    checkout = os.path.dirname(here)
    if os.path.exists(os.path.join(checkout, "setup.py")) and os.path.isdir(
        os.path.join(checkout, "csrc")
    ):
        return (
            f"{here} is a source checkout's package, with no built extension (_C); Python "
            "imports it because the current directory comes first on its path. "
            "Install the plugin (`pip install .`), then run doctor from another directory "
            "(`cd /tmp && python -m torch_npu_pinpool doctor`)."
        )
    return (
        f"the compiled extension (_C) is missing from {here}: reinstall the plugin with this "
        "environment's pip (`pip install --force-reinstall --no-deps .` in its source)."
    )


def _autoload_line() -> str:
    """Whether torch's backend autoload activates the plugin in the user's programs. torch
    autoloads only when ``TORCH_DEVICE_BACKEND_AUTOLOAD`` is unset or exactly ``1``
    (``torch._is_device_backend_autoload_enabled``): any other value, ``true`` or `` 1``
    included, turns it off."""
    value = os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")
    if value != "1":
        return (
            f"off (TORCH_DEVICE_BACKEND_AUTOLOAD={value}; torch autoloads only when it is "
            "unset or 1): add `import torch_npu_pinpool` to programs"
        )
    try:
        from importlib.metadata import entry_points

        names = [e.name for e in entry_points(group="torch.backends")]
    except Exception:  # metadata unreadable: say nothing wrong
        names = []
    if "torch_npu_pinpool" not in names:
        return (
            "the plugin's torch.backends entry point is not installed: programs must "
            "`import torch_npu_pinpool`, or install the plugin with pip"
        )
    return "on (importing torch activates the plugin)"


def _activation_problem(pp: ModuleType) -> str | None:
    """Activate the plugin here (the CLI's own import does not); why it is inactive, or None."""
    if pp._disabled():
        return "skipped (the plugin is switched off: TORCH_NPU_PINPOOL=0)"
    missing = _missing_extension()
    if missing:
        return f"skipped: {missing}"
    try:
        pp.activate()
    except Exception as e:  # a refusal (unsupported torch_npu) or a build mismatch
        return f"skipped (activation failed: {e})"
    if not pp.is_active():
        return "skipped (another host allocator replaced the plugin's after activation)"
    return None


def doctor() -> int:
    """Print what is installed and whether the plugin works; 0 only when the self-test passes."""
    import torch

    try:
        import torch_npu
    except ImportError as e:
        print(f"torch_npu: not importable ({e})")
        return 1
    import torch_npu_pinpool as pp

    problem = _activation_problem(pp)
    print(f"torch:              {torch.__version__}")
    print(f"torch_npu:          {torch_npu.__version__}")
    print(f"runtime:            {_runtime()}")
    print(f"torch_npu_pinpool:  {pp.__version__} ({_package_dir()})")
    try:
        print(f"mode:               {pp.mode()}")
    except Exception as e:  # an unsupported torch_npu: the activation line says why
        print(f"mode:               none ({e})")
    print(f"autoload:           {_autoload_line()}")
    print(f"active:             {pp.is_active()}")
    sanitizers = _sanitizers()
    if sanitizers:  # a test build (TORCH_NPU_PINPOOL_SANITIZE): say so, it is not for production
        print(f"sanitized build:    {sanitizers} (TORCH_NPU_PINPOOL_SANITIZE; a test build)")
    if problem:
        print(f"self-test:          {problem}")
        return 1
    try:
        ok, detail = self_test()
    except Exception as e:  # report, do not crash
        ok, detail = False, f"{type(e).__name__}: {e}"
    print(f"self-test:          {'PASS' if ok else 'FAIL'}: {detail}")
    return 0 if ok else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="torch_npu_pinpool: pinned host memory that is correct inside ACLGraph "
        "capture.",
        epilog=f"`{PROG} COMMAND --help` shows a command's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text, add_help=name != "audit")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["audit"]:  # audit parses its own arguments: the program's must stay as is
        from . import _audit

        return _audit.main(argv[1:])
    args = _parser().parse_args(argv)
    commands: dict[str, Callable[[], int]] = {"doctor": doctor}
    return commands[args.command]()


if __name__ == "__main__":
    sys.exit(main())
