"""Running programs: each batch in a process with the plugin and in another natively
(``TORCH_NPU_PINPOOL=0``). The processes are ``runner.py`` forked from test/forkserver.py's
server that has imported torch and torch_npu (Note [Scenarios forked after torch_npu's import]:
the runtime, both allocators and PYTORCH_NPU_ALLOC_CONF start in the child), one server per
process run at once; ``PINPOOL_FUZZ_FORK=0`` runs each in a fresh interpreter instead
(runner.py by path), to tell a finding from a fork-server artifact. ``jobs=2`` runs a batch's two
processes at once. A batch whose run did not report (crash, hang) is run again program by
program, so the crash is charged to the program that caused it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from forkserver import ForkServer

try:
    from fuzz.program import Program, needs_own_process
except ImportError:  # run from inside test/fuzz
    from program import Program, needs_own_process  # type: ignore[no-redef]

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
RESULT_TAG = "PINPOOL_RESULT:"
Result = dict[str, Any]
Job = tuple[list[Program], bool]  # programs, plugin
_servers: list[ForkServer | None] = []  # one per process run at once, started on first use


def _base_env() -> dict[str, str]:
    """The environment every run starts from; runner.py sets a program's alloc_conf itself."""
    env = dict(os.environ)
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # runner.py decides when the plugin activates
    env.pop("PYTORCH_NPU_ALLOC_CONF", None)
    env.pop("TORCH_NPU_PINPOOL", None)
    return env


def _plugin_env(plugin: bool) -> dict[str, str]:
    return {} if plugin else {"TORCH_NPU_PINPOOL": "0"}


def _server(i: int) -> ForkServer:
    """The ``i``-th fork server, started (or restarted, if it died) on first use."""
    _servers.extend([None] * (i + 1 - len(_servers)))
    if _servers[i] is None or not _servers[i].serves(_base_env()):
        _servers[i] = ForkServer(torch_npu=True, env=_base_env())
        if not _servers[i].usable:
            raise RuntimeError("torch's import loaded torch_npu; run with PINPOOL_FUZZ_FORK=0")
    return _servers[i]


def _forked(specs: list[dict[str, Any]], cwd: str) -> list[Any]:
    """Each spec forked from a server of its own, all at once; their exit codes."""

    def run(i: int) -> Any:
        spec = specs[i]
        argv, env = [RUNNER, spec["programs"]], {**_base_env(), **spec["env"]}
        try:
            return _server(i).run(argv, env, cwd, spec["out"], spec["err"], spec["timeout"])[1]
        except subprocess.TimeoutExpired:
            return "timeout"
        except RuntimeError as e:  # the server died; its stderr says why
            return f"fork server died: {e}"

    with ThreadPoolExecutor(len(specs)) as pool:
        return list(pool.map(run, range(len(specs))))


def _fresh(specs: list[dict[str, Any]], cwd: str) -> list[Any]:
    """Each spec in a fresh interpreter (runner.py by path), all at once; their exit codes."""
    procs = []
    for spec in specs:
        with open(spec["out"], "w") as out, open(spec["err"], "w") as err:
            procs.append(subprocess.Popen(
                [sys.executable, RUNNER, spec["programs"]], cwd=cwd, stdout=out, stderr=err,
                env={**_base_env(), **spec["env"]},
            ))
    codes = []
    for proc, spec in zip(procs, specs):
        try:
            codes.append(proc.wait(timeout=spec["timeout"]))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            codes.append("timeout")
    return codes


def run_jobs(jobs: list[Job], timeout: float = 900.0) -> list[tuple[list[Result] | None, str]]:
    """Run each job (programs, plugin) in its own process, all at once: per job (the per-program
    results, or None if the process did not report; the tail of its stderr)."""
    timeout *= float(os.environ.get("PINPOOL_TIMEOUT_SCALE", "1"))
    with tempfile.TemporaryDirectory(prefix="pinpool-fuzz-") as cwd:
        specs = []
        for i, (programs, plugin) in enumerate(jobs):
            path = os.path.join(cwd, f"programs{i}.json")
            with open(path, "w") as f:
                json.dump(programs, f)
            specs.append({"programs": path, "out": f"{path}.out", "err": f"{path}.err",
                          "env": _plugin_env(plugin), "timeout": timeout})
        fresh = os.environ.get("PINPOOL_FUZZ_FORK", "1") == "0"
        codes = _fresh(specs, cwd) if fresh else _forked(specs, cwd)
        return [_result(spec, code, plugin, timeout)
                for spec, code, (_, plugin) in zip(specs, codes, jobs)]


def _result(spec: dict[str, Any], code: Any, plugin: bool, timeout: float
            ) -> tuple[list[Result] | None, str]:
    stdout, stderr = (_read(spec[k]) for k in ("out", "err"))
    if code == "timeout":
        return None, f"timed out after {timeout:.0f} s\n{stderr[-3000:]}"
    value = None
    for line in stdout.splitlines():
        if line.startswith(RESULT_TAG):
            value = json.loads(line[len(RESULT_TAG) :])
    if value is None or code != 0:
        return None, f"exit {code}\n{stderr[-3000:]}"
    if value["plugin"] != plugin:
        raise RuntimeError(
            f"runner.py reported plugin={value['plugin']} where {plugin} was asked: is "
            "torch_npu_pinpool installed (PYTHONPATH) in this environment?"
        )
    return value["programs"], ""


def _read(path: str) -> str:
    """A child's output file ("" if it never started: the fork server died)."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def run_batch(
    programs: list[Program], plugin: bool, timeout: float = 900.0
) -> tuple[list[Result] | None, str]:
    """Run ``programs`` in one process: (per-program results, or None if the process did not
    report; the tail of its stderr)."""
    return run_jobs([(programs, plugin)], timeout)[0]


def batches(programs: list[Program], size: int) -> list[list[Program]]:
    """Programs grouped ``size`` to a process; late activation / alloc_conf ones alone."""
    out: list[list[Program]] = []
    shared: list[Program] = []
    for p in programs:
        if needs_own_process(p):
            out.append([p])
        else:
            shared.append(p)
            if len(shared) == size:
                out.append(shared)
                shared = []
    if shared:
        out.append(shared)
    return out


def run_pair(
    programs: list[Program], timeout: float = 900.0, jobs: int = 1
) -> list[tuple[Result | None, Result | None, str]]:
    """Each program's (plugin result, native result, crash note), batch by batch as given
    (one process per mode; both at once with ``jobs=2``); a batch that crashed is rerun one
    program per process."""
    out: dict[int, list[Any]] = {i: [None, None, ""] for i in range(len(programs))}
    modes = ((0, True), (1, False))
    if jobs > 1:
        ran = run_jobs([(programs, plugin) for _, plugin in modes], timeout)
    else:
        ran = [run_batch(programs, plugin, timeout) for _, plugin in modes]
    for (slot, plugin), (results, err) in zip(modes, ran):
        who = "plugin" if plugin else "native"
        if results is None and len(programs) > 1:
            for i, p in enumerate(programs):
                one, err1 = run_batch([p], plugin, timeout)
                out[i][slot] = one[0] if one else None
                if one is None:
                    out[i][2] += f"[{who}] {err1}"
        elif results is None:
            out[0][2] += f"[{who}] {err}"
        else:
            for i, r in enumerate(results):
                out[i][slot] = r
    return [tuple(out[i]) for i in range(len(programs))]  # type: ignore[misc]
