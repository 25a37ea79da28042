"""The scenario fork server (test/forkserver.py): a child forked from it is what a fresh
``python SCRIPT`` is to the script (Note [Scenarios forked from a torch-only interpreter]), and
a child whose environment torch's import may read is never forked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from forkserver import ForkServer

PROBE = os.path.join(os.path.dirname(__file__), "..", "scenarios", "interpreter_probe.py")


@pytest.fixture(scope="module")
def server():
    return ForkServer()


def _forked(server: ForkServer, tmp_path, argv: list[str], env: dict[str, str], timeout=120.0):
    out, err = tmp_path / "out", tmp_path / "err"
    pid, status = server.run(argv, env, str(tmp_path), str(out), str(err), timeout)
    return status, out.read_text(), err.read_text()


def _fresh(tmp_path, argv: list[str], env: dict[str, str]):
    p = subprocess.run(
        [sys.executable, *argv], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    return p.returncode, p.stdout, p.stderr


def _probe(stdout: str) -> dict:
    return json.loads(next(x for x in stdout.splitlines() if x.startswith("PROBE:"))[6:])


@pytest.mark.parametrize("how", ["0", "3", "raise"])
def test_forked_child_is_what_a_fresh_interpreter_is(server, tmp_path, how):
    """The script's argv, __main__, sys.path[0], cwd and environment; its exit status, the
    traceback of an uncaught exception, and its atexit handlers: the same forked as fresh."""
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
    assert seen[0] == seen[1]
    assert seen[0]["knob"] == "forked-or-not" and not seen[0]["torch_npu"]
    assert [run[1].splitlines()[-1] for run in (forked, fresh)] == ["atexit ran"] * 2
    if how == "raise":
        for run in (forked, fresh):
            assert run[2].splitlines()[-1] == "ValueError: probe raised", run[2]
            assert "forkserver" not in run[2]


def test_environment_torch_reads_is_never_forked(server):
    """A variable torch's import (or the interpreter's start) may read gets a fresh interpreter;
    the plugin's, the simulator's and a scenario's own knobs are read after the fork."""
    base = dict(os.environ)
    for name, value in [
        ("TORCH_DEVICE_BACKEND_AUTOLOAD", "1"),
        ("PYTHONPATH", "/elsewhere"),
        ("LD_PRELOAD", "libx.so"),
        ("PINPOOL_TEST_FORKSERVER", "0"),
        ("OMP_NUM_THREADS", "7"),
    ]:
        assert not server.serves({**base, name: value}), name
    for name, value in [
        ("TORCH_NPU_PINPOOL", "0"),
        ("SIMCANN_TASK_DELAY_US", "9"),
        ("PYTORCH_NPU_ALLOC_CONF", "x:1"),
        ("FAIL_HOW", "unjoined"),
    ]:
        assert server.serves({**base, name: value}), name


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
