"""A fork server for scenario processes: an interpreter that has imported torch (and the torch
modules torch_npu's import loads), and in its second kind torch_npu too, forked once per scenario
(``_run_child`` in ``test/conftest.py``).

Note [Scenarios forked from a torch-only interpreter]
Importing torch and torch_npu costs most of a short scenario's CPU, and every test runs one or
two scenarios. A child forked from an interpreter that has imported only torch (and the torch
modules torch_npu's import loads) is what a fresh ``python SCRIPT`` is once its ``import torch``
has run, provided three things hold:
  * torch's import saw the same environment: the client forks only when the child's
    environment differs from the server's in no variable the interpreter's start or torch's
    import may read (``_IMPORT_TIME_PREFIXES``); any such difference
    (``TORCH_DEVICE_BACKEND_AUTOLOAD``, ``PYTHONPATH``, ``LD_PRELOAD``...) gets a fresh interpreter;
  * nothing of torch_npu, the plugin or the runtime is loaded: the server refuses to serve when
    ``import torch`` imported torch_npu (device-backend autoload on);
  * the server is single-threaded when it forks, and its protocol pipes are closed in the child.
The child then runs the script as ``python SCRIPT ARGS`` would: its own ``__main__``, ``argv``,
``sys.path[0]``, cwd, stdout and stderr, the exit status of an uncaught exception, and the
interpreter's own shutdown (threads joined, ``atexit`` handlers, buffers flushed).
Sanitizer legs (an ``LD_PRELOAD``-ed runtime, reports found by pid) never use it, nor does
``PINPOOL_TEST_FORKSERVER=0``, in the session's environment or in one test's ``env``.

Note [Scenarios forked after torch_npu's import]
The second kind (``ForkServer(torch_npu=True)``) has also run ``import torch_npu``: that loads the
runtime's libraries and asks the CANN version, and sets no device, starts no thread and loads
no allocator (the device and both host allocators start in the child). A script forked from it
is what a fresh one is once its ``import torch_npu`` has run, provided, besides the above:
  * the script runs nothing before that import but other imports (``imports_torch_npu_first``:
    the scenario files that begin with ``from _lib.scenario import ...``, the contract of
    test/scenarios/_lib/scenario.py), so the import order is the script's own;
  * torch_npu's import and the runtime it loads saw the same environment: the child's differs
    from the server's in none of ``_NPU_IMPORT_PREFIXES`` (the simulator reads its knobs, and
    torch_npu its options, when the import first calls the runtime).
Every other script, and a child that differs there, gets the torch-only server. The fuzzer
(test/fuzz/execute.py) forks test/fuzz/runner.py from it too: what runs there before torch_npu's
import (sys.path, numpy) changes nothing that import reads, and PYTORCH_NPU_ALLOC_CONF, which
runner.py sets for a program, is read when the device allocator starts, not at the import
(torch_npu 2.10 and 2.14, traced with a getenv interposer).

Note [The imports out of the collector's sight]
The server collects, then freezes (``gc.freeze()``), what its imports made, before its first
fork: a child's ``gc.collect()`` then walks only the objects the script made. Otherwise every
full collection in a child walks torch's objects and writes their headers, copying the server's
pages one at a time.
Nothing a fresh interpreter's collector would free is hidden: what is frozen survived the
server's own collection. Only ``gc.get_objects()`` sees less (frozen objects are left out of
it); no scenario calls it.

Run by path, it is the server: JSON requests on stdin, one reply line per event on stdout.
"""

from __future__ import annotations

import ast
import gc
import json
import os
import select
import signal
import subprocess
import sys
from typing import Any

# What ``import torch`` (device-backend autoload off) and the interpreter's start may read: the
# interpreter's, the loader's and libc's variables, and the namespaces of torch and the libraries
# it loads. A child whose environment differs from the server's in one of these is not forked;
# every other name is this project's (``TORCH_NPU_PINPOOL*``, ``SIMCANN_*``, ``PINPOOL_*``, the
# scenarios' own knobs) or torch_npu's, read after the fork.
_IMPORT_TIME_PREFIXES = (
    "PYTHON", "LD_", "MALLOC_", "GLIBC_", "LC_", "LANG", "TZ", "TMP", "TEMP", "HOME", "PATH",
    "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "NPY_", "NUMPY_", "SYMPY_", "MPMATH_",
    "CUDA", "NVIDIA_", "NCCL_", "TRITON_", "TORCH", "PYTORCH_",
    "ASAN_", "LSAN_", "TSAN_", "UBSAN_",
)  # fmt: skip
_READ_AFTER_FORK = ("TORCH_NPU_PINPOOL", "PYTORCH_NPU_ALLOC_CONF")  # exceptions to the above
# What ``import torch_npu`` may read besides (the CANN runtime's, torch_npu's and the simulator's
# names, and the generic ones torch_npu's Python reads), for the server that has imported it.
# The plugin's own (``TORCH_NPU_PINPOOL*``) is read by the script's import of the plugin.
_NPU_IMPORT_PREFIXES = (
    "ASCEND", "ACL", "NPU", "HCCL", "HCOM", "GE_", "SIMCANN", "TORCH_NPU", "PYTORCH_NPU",
    "TORCHINDUCTOR", "INDUCTOR", "TORCHAIR", "ANIR", "TASK_QUEUE", "INF_NAN", "BMMV2", "NSLB",
    "RANK", "LOCAL_", "WORLD_", "MASTER_", "SEED", "ENABLE_", "DISABLE_", "PERF_", "PROF_",
    "IN_CI", "SQLITE",
)  # fmt: skip


def _fork_safe(name: str, torch_npu: bool) -> bool:
    if name.startswith("TORCH_NPU_PINPOOL"):
        return True
    if torch_npu and name.startswith(_NPU_IMPORT_PREFIXES):
        return False
    return name.startswith(_READ_AFTER_FORK) or not name.startswith(_IMPORT_TIME_PREFIXES)


def imports_torch_npu_first(argv: list[str]) -> bool:
    """Whether ``python ARGV`` is a script that runs nothing but imports up to its first import
    of torch_npu or of test/scenarios/_lib/scenario.py (which imports torch_npu at once), and
    imports nothing of the plugin before it (Note [Scenarios forked after torch_npu's import])."""
    if not argv or argv[0] == "-c" or not argv[0].endswith(".py"):
        return False
    try:
        with open(argv[0], "rb") as f:
            body = ast.parse(f.read()).body
    except (OSError, SyntaxError):
        return False
    for i, stmt in enumerate(body):
        if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # the docstring
        if isinstance(stmt, ast.Import):
            names = [a.name for a in stmt.names]
        elif isinstance(stmt, ast.ImportFrom):
            names = [f"{stmt.module}.{a.name}" for a in stmt.names]
        else:
            return False
        if any(n.startswith("torch_npu_pinpool") for n in names):
            return False
        if any(n == "torch_npu" or n.startswith(("_lib.scenario", "torch_npu.")) for n in names):
            return True
    return False


# Imported before any fork: torch, and what torch_npu's own import loads of torch and its
# dependencies (a module a torch version lacks is skipped).
_PRELOAD = (
    "torch",
    "torch.distributed.tensor",
    "torch.distributed.checkpoint",
    "torch.distributed.fsdp",
    "torch.distributed.elastic",
    "torch.fx",
    "torch.testing",
    "torch.utils.data",
    "sympy",
)


class ForkServer:
    """The client: one server of each kind per pytest process, started on first use."""

    def __init__(self, torch_npu: bool = False, env: dict[str, str] | None = None) -> None:
        self.torch_npu = torch_npu
        self._env = dict(os.environ if env is None else env)
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *(["--torch-npu"] if torch_npu else [])],
            env=self._env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        ready = self._reply(timeout=120.0)
        self.usable = ready.get("ready", False)

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a child with environment ``env`` may be forked from this server."""
        if not self.usable or self._proc.poll() is not None:
            return False
        if env.get("PINPOOL_TEST_FORKSERVER") == "0":  # this child asks for a fresh interpreter
            return False
        names = env.keys() | self._env.keys()
        return all(env.get(n) == self._env.get(n) or _fork_safe(n, self.torch_npu) for n in names)

    def run(
        self, argv: list[str], env: dict[str, str], cwd: str, out: str, err: str, timeout: float
    ) -> tuple[int, int]:
        """Run ``python ARGV`` forked from the server; return its pid and its exit status in
        ``Popen.returncode``'s terms. On ``timeout`` the child is killed and
        ``subprocess.TimeoutExpired`` raised, as ``Popen.communicate`` does."""
        request = {"argv": argv, "env": env, "cwd": cwd, "stdout": out, "stderr": err}
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        self._proc.stdin.flush()
        pid = self._reply(timeout=60.0)["pid"]
        try:
            status = self._reply(timeout=timeout)["status"]
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            self._reply(timeout=60.0)
            raise subprocess.TimeoutExpired(argv, timeout) from None
        return pid, os.waitstatus_to_exitcode(status)

    def _reply(self, timeout: float) -> dict[str, Any]:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        if not select.select([fd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired("test/forkserver.py", timeout)
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(
                f"the scenario fork server (test/forkserver.py) exited {self._proc.wait()}; its "
                "stderr is above. Run without it: PINPOOL_TEST_FORKSERVER=0"
            )
        return json.loads(line)


def _run_as_main(argv: list[str]) -> None:
    """Run ``python ARGV`` (a script path or ``-c CODE``) in this process, as its ``__main__``."""
    import types

    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=__builtins__, __cached__=None)
    if argv[0] == "-c":
        sys.argv, sys.path[0] = ["-c", *argv[2:]], ""
        code = compile(argv[1], "<string>", "exec")
    else:
        sys.argv, sys.path[0] = list(argv), os.path.dirname(os.path.realpath(argv[0]))
        main.__file__ = argv[0]
        with open(argv[0], "rb") as f:
            code = compile(f.read(), argv[0], "exec")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException:
        kind, value, tb = sys.exc_info()
        tb = tb.tb_next if tb else None  # the traceback starts in the script, as a fresh one's
        sys.excepthook(kind, value.with_traceback(tb), tb)
        raise SystemExit(1) from None


def _child(request: dict[str, Any], requests: Any, replies_fd: int) -> None:
    """In the forked child: become ``python ARGV`` with the request's cwd, env and output."""
    requests.close()
    os.close(replies_fd)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    _run_as_main(request["argv"])
    raise SystemExit(0)


def _serve(torch_npu: bool) -> None:
    """The server: import torch (and torch_npu), then fork a child per request and report its
    pid and status."""
    requests_fd, replies_fd = os.dup(0), os.dup(1)  # not inherited by what the children exec
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)

    def reply(**kw: Any) -> None:
        os.write(replies_fd, json.dumps(kw).encode() + b"\n")

    import importlib

    for module in _PRELOAD:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    if "torch_npu" in sys.modules:  # autoload imported it: a child would start activated
        reply(ready=False)
        return
    if torch_npu:
        importlib.import_module("torch_npu")
    gc.collect()
    gc.freeze()  # Note [The imports out of the collector's sight]
    reply(ready=True)
    requests = os.fdopen(requests_fd, "rb")
    for line in requests:
        request = json.loads(line)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, requests, replies_fd)  # raises SystemExit: the child's own exit
        reply(pid=pid)
        reply(status=os.waitpid(pid, 0)[1])


if __name__ == "__main__":
    _serve(torch_npu=sys.argv[1:] == ["--torch-npu"])
