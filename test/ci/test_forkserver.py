"""The scenario fork servers (test/forkserver.py): a child forked from either kind is what a
fresh ``python SCRIPT`` is to the script (Note [Scenarios forked from a torch-only interpreter],
Note [Scenarios forked after torch_npu's import]), and a child whose environment torch's (or
torch_npu's) import may read is never forked."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from forkserver import ForkServer, imports_torch_npu_first

SCENARIOS = os.path.join(os.path.dirname(__file__), "..", "scenarios")
PROBE = os.path.join(SCENARIOS, "interpreter_probe.py")


@pytest.fixture(scope="module")
def server():
    return ForkServer()


@pytest.fixture(scope="module")
def npu_server():
    return ForkServer(torch_npu=True)


def _forked(server: ForkServer, tmp_path, argv: list[str], env: dict[str, str], timeout=120.0):
    out, err = tmp_path / "out", tmp_path / "err"
    pid, status = server.run(argv, env, str(tmp_path), str(out), str(err), timeout)
    return status, out.read_text(), err.read_text()


def _fresh(tmp_path, argv: list[str], env: dict[str, str]):
    p = subprocess.run(
        [sys.executable, *argv], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    return p.returncode, p.stdout, p.stderr


def _tail(stdout: str) -> list[str]:
    """The lines after the probe's, with times and pids blanked."""
    lines = stdout.splitlines()
    after = lines[next(i for i, x in enumerate(lines) if x.startswith("PROBE:")) + 1 :]
    return [re.sub(r"\d{4}-[\d:-]+ \(PID:\d+", "(TIME, PID", x) for x in after]


def _probe(stdout: str) -> dict:
    return json.loads(next(x for x in stdout.splitlines() if x.startswith("PROBE:"))[6:])


@pytest.mark.parametrize("kind", ["torch", "torch_npu"])
@pytest.mark.parametrize("how", ["0", "3", "raise"])
def test_forked_child_is_what_a_fresh_interpreter_is(server, npu_server, tmp_path, how, kind):
    """The script's argv, __main__, sys.path[0], cwd and environment; its exit status, the
    traceback of an uncaught exception, and its atexit handlers: the same forked as fresh; only
    the server that has imported torch_npu has it loaded before the script's first line."""
    server = npu_server if kind == "torch_npu" else server
    assert server.usable, "the server imports torch without torch_npu (autoload off)"
    env = dict(os.environ, PROBE_KNOB="forked-or-not")
    argv = [PROBE, how]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    forked = _forked(server, tmp_path / "a", argv, env)
    fresh = _fresh(tmp_path / "b", argv, env)
    assert forked[0] == fresh[0] == (1 if how == "raise" else int(how)), (forked, fresh)
    seen = [_probe(run[1]) for run in (forked, fresh)]
    for s, cwd in zip(seen, ("a", "b")):
        assert s.pop("cwd") == str(tmp_path / cwd)
    assert seen[0].pop("torch_npu_at_start") == (kind == "torch_npu")
    assert not seen[1].pop("torch_npu_at_start")
    assert seen[0] == seen[1]
    assert seen[0]["knob"] == "forked-or-not"
    # after the probe: the atexit handler, then torch_npu's own line for an uncaught exception
    tails = [_tail(run[1]) for run in (forked, fresh)]
    assert tails[0] == tails[1] and tails[0][0] == "atexit ran", tails
    if how == "raise":
        for run in (forked, fresh):
            assert run[2].splitlines()[-1] == "ValueError: probe raised", run[2]
            assert "forkserver" not in run[2]


# Per kind of server: variables whose difference gets a fresh interpreter, and variables read
# after the fork (the plugin's, the simulator's, a scenario's own knobs).
_ENV_CASES = {
    "torch": (
        [("TORCH_DEVICE_BACKEND_AUTOLOAD", "1"), ("PYTHONPATH", "/elsewhere"),
         ("LD_PRELOAD", "libx.so"), ("PINPOOL_TEST_FORKSERVER", "0"), ("OMP_NUM_THREADS", "7")],
        [("TORCH_NPU_PINPOOL", "0"), ("SIMCANN_TASK_DELAY_US", "9"),
         ("PYTORCH_NPU_ALLOC_CONF", "x:1"), ("FAIL_HOW", "unjoined")],
    ),
    "torch_npu": (
        [("SIMCANN_TASK_DELAY_US", "9"), ("PYTORCH_NPU_ALLOC_CONF", "x:1"),
         ("TASK_QUEUE_ENABLE", "0"), ("ASCEND_LAUNCH_BLOCKING", "1"),
         ("TORCH_DEVICE_BACKEND_AUTOLOAD", "1")],
        [("TORCH_NPU_PINPOOL", "0"), ("FAIL_HOW", "unjoined")],
    ),
}  # fmt: skip


@pytest.mark.parametrize("kind", ["torch", "torch_npu"])
def test_environment_an_import_reads_is_never_forked(server, npu_server, kind):
    """A variable torch's import (or the interpreter's start), and for the server that has
    imported torch_npu what that import or the runtime it loads reads, gets a fresh
    interpreter; the plugin's and a scenario's own knobs are read after the fork."""
    server = npu_server if kind == "torch_npu" else server
    fresh, forked = _ENV_CASES[kind]
    base = dict(os.environ)
    assert [n for n, v in fresh if server.serves({**base, n: v})] == []
    assert [n for n, v in forked if not server.serves({**base, n: v})] == []


@pytest.mark.parametrize(
    ("script", "first"),
    [
        ("late_activation.py", True),  # import torch, import torch_npu, then the plugin
        ("activate.py", True),  # from _lib.scenario import ...
        ("entry_point.py", False),  # logging set up before torch's import autoloads
        ("autoload_workers.py", False),
    ],
)
def test_only_scripts_that_import_torch_npu_first_use_that_server(script, first):
    """A script that runs code before its torch_npu import, or none of it, gets the torch-only
    server: its import order and what runs before it stay its own."""
    assert imports_torch_npu_first([os.path.join(SCENARIOS, script)]) is first
    assert not imports_torch_npu_first(["-c", "import torch_npu"])


def test_timeout_kills_the_child_and_the_server_goes_on(server, tmp_path):
    """A child past its deadline is killed (TimeoutExpired, as Popen.communicate raises) and the
    next request is served."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(subprocess.TimeoutExpired):
        _forked(
            server,
            tmp_path / "a",
            ["-c", "import time; time.sleep(60)"],
            dict(os.environ),
            timeout=1.0,
        )
    status, out, _ = _forked(server, tmp_path / "b", ["-c", "print('next')"], dict(os.environ))
    assert (status, out) == (0, "next\n")
