"""Running programs: each batch in a fresh interpreter with the plugin, then in another one
natively (``TORCH_NPU_PINPOOL=0``), both through runner.py by path from an empty directory
(from the repository root the source ``torch_npu_pinpool/``, which has no ``_C``, would shadow
the installed plugin). A batch whose run did not report (crash, hang) is run again program by
program, so the crash is charged to the program that caused it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

try:
    from fuzz.program import Program, needs_own_process
except ImportError:  # run from inside test/fuzz
    from program import Program, needs_own_process  # type: ignore[no-redef]

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
RESULT_TAG = "PINPOOL_RESULT:"
PLUGIN_OFF = {"TORCH_NPU_PINPOOL": "0"}
Result = dict[str, Any]


def run_batch(
    programs: list[Program], plugin: bool, timeout: float = 900.0
) -> tuple[list[Result] | None, str]:
    """Run ``programs`` in one fresh process: (per-program results, or None if the process did
    not report; the tail of its stderr)."""
    env = dict(os.environ)
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # runner.py decides when the plugin activates
    env.pop("PYTORCH_NPU_ALLOC_CONF", None)  # a program's alloc_conf is set by runner.py
    if plugin:
        env.pop("TORCH_NPU_PINPOOL", None)
    else:
        env.update(PLUGIN_OFF)
    timeout *= float(os.environ.get("PINPOOL_TIMEOUT_SCALE", "1"))
    with tempfile.TemporaryDirectory(prefix="pinpool-fuzz-") as cwd:
        path = os.path.join(cwd, "programs.json")
        with open(path, "w") as f:
            json.dump(programs, f)
        try:
            proc = subprocess.run(
                [sys.executable, RUNNER, path],
                env=env,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            return None, f"timed out after {timeout:.0f} s\n{(e.stderr or '')[-3000:]}"
    value = None
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            value = json.loads(line[len(RESULT_TAG) :])
    if value is None or proc.returncode != 0:
        return None, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    if value["plugin"] != plugin:
        raise RuntimeError(
            f"runner.py reported plugin={value['plugin']} where {plugin} was asked: is "
            "torch_npu_pinpool installed (PYTHONPATH) in this environment?"
        )
    return value["programs"], ""


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
    programs: list[Program], timeout: float = 900.0
) -> list[tuple[Result | None, Result | None, str]]:
    """Each program's (plugin result, native result, crash note), batch by batch as given
    (one process per mode); a batch that crashed is rerun one program per process."""
    out: dict[int, list[Any]] = {i: [None, None, ""] for i in range(len(programs))}
    for slot, plugin in ((0, True), (1, False)):
        results, err = run_batch(programs, plugin, timeout)
        if results is None and len(programs) > 1:
            for i, p in enumerate(programs):
                one, err1 = run_batch([p], plugin, timeout)
                out[i][slot] = one[0] if one else None
                if one is None:
                    out[i][2] += f"[{'plugin' if plugin else 'native'}] {err1}"
        elif results is None:
            out[0][2] += f"[{'plugin' if plugin else 'native'}] {err}"
        else:
            for i, r in enumerate(results):
                out[i][slot] = r
    return [tuple(out[i]) for i in range(len(programs))]  # type: ignore[misc]
