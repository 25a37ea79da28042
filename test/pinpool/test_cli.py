"""The command line (``python -m torch_npu_pinpool``): the help lists each command with what it
does; ``audit`` parses its own options before ``--`` and never runs them as the program, prints
its usage on ``--help`` and exits 2 with a message when no program follows; ``doctor`` reports
versions, the runtime and the mode, passes its self-test, names the cause when it cannot run it
(a source checkout without a built ``_C``, the off switch) and says whether torch's backend
autoload activates the plugin. Each command runs in its own process, from a directory outside
the source tree unless the test is about the source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ._snippets import simulator_api

PACKAGE = Path(__file__).resolve().parents[2] / "torch_npu_pinpool"


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch_npu_pinpool", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_help_lists_the_commands_with_what_they_do(tmp_path):
    r = _cli("--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [line.strip() for line in r.stdout.splitlines()]
    for command in ("doctor", "audit"):
        row = next((line for line in lines if line.startswith(command + " ")), "")
        assert len(row.split()) > 3, f"{command} has no description in --help:\n{r.stdout}"


def test_no_command_is_a_usage_error(tmp_path):
    r = _cli(cwd=tmp_path)
    assert r.returncode == 2
    assert "usage: python -m torch_npu_pinpool" in r.stderr


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_audit_help_prints_usage(tmp_path, flag):
    r = _cli("audit", flag, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    usage = "usage: python -m torch_npu_pinpool audit [--json PATH] [--interval S] -- PROGRAM"
    assert usage in r.stdout
    assert "--json PATH" in r.stdout and "--interval S" in r.stdout


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf"])
def test_audit_interval_must_be_positive_seconds(tmp_path, value):
    """A bad --interval is a usage error naming the option; the program does not run."""
    marker = tmp_path / "ran"
    program = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    r = _cli("audit", "--interval", value, "--", *program, cwd=tmp_path)
    assert r.returncode == 2
    assert "--interval" in r.stderr and "positive number of seconds" in r.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "args", [["audit"], ["audit", "--"], ["audit", "--json", "r.json", "--"]], ids=str
)
def test_audit_without_a_program_exits_2(tmp_path, args):
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no program to run" in r.stderr


def test_audit_options_before_the_separator_are_never_run(tmp_path):
    """An unknown option before ``--`` is a usage error; the program after it does not run."""
    marker = tmp_path / "ran"
    program = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    r = _cli("audit", "--bogus", "--", *program, cwd=tmp_path)
    assert r.returncode == 2
    assert "unrecognized arguments: --bogus" in r.stderr
    assert not marker.exists(), "the program ran although the options were wrong"


def test_audit_runs_the_program_after_the_separator(tmp_path):
    """``--json PATH`` is ours, the rest is the program's, ``--help`` included."""
    code = "import sys; print('args', sys.argv[1:])"
    r = _cli("audit", "--json", "r.json", "--", sys.executable, "-c", code, "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "args ['--help']" in r.stdout
    assert "never imported torch_npu" in r.stderr


def _source_checkout(root: Path) -> Path:
    """A copy of the source tree's package without a built extension, beside a setup.py and
    csrc/: what a user has after `git clone`."""
    shutil.copytree(PACKAGE, root / "torch_npu_pinpool", ignore=shutil.ignore_patterns("_C*.so"))
    (root / "setup.py").write_text("# the checkout's setup.py\n")
    (root / "csrc").mkdir()
    return root


def test_doctor_in_a_source_checkout_names_the_cause(tmp_path):
    checkout = _source_checkout(tmp_path / "checkout")
    r = _cli("doctor", cwd=checkout, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "source checkout" in r.stdout and "no built extension" in r.stdout, r.stdout
    assert "pip install ." in r.stdout and "another directory" in r.stdout
    assert "TORCH_NPU_PINPOOL=0" not in r.stdout


def test_doctor_when_switched_off_says_so(tmp_path):
    r = _cli("doctor", cwd=tmp_path, env={"TORCH_NPU_PINPOOL": "0"})
    assert r.returncode == 1
    assert "switched off: TORCH_NPU_PINPOOL=0" in r.stdout


@pytest.mark.parametrize("value", ["1", "0", "true", "yes", " 1"], ids=repr)
def test_doctor_autoload_line_matches_what_torch_does(tmp_path, scenario, value):
    """torch autoloads only for an unset or exactly-"1" TORCH_DEVICE_BACKEND_AUTOLOAD: doctor's
    autoload line says "on" exactly when ``import torch`` alone activates the plugin
    (test/scenarios/entry_point.py). Off, the plugin is inactive in programs that do not import
    it: doctor says how to activate it, and still runs its self-test (it activates the plugin
    itself)."""
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": value}
    program = scenario("entry_point", env=env).result
    r = _cli("doctor", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("autoload:"))
    assert line.split()[1] == ("on" if program["active"] else "off"), (value, line, program)
    assert program["active"] == (value == "1"), program
    assert "self-test:          PASS" in r.stdout
    if value == "1":
        assert line.endswith("on (importing torch activates the plugin)"), line
    elif value == "0":
        assert "off (TORCH_DEVICE_BACKEND_AUTOLOAD=0;" in line, line
        assert "import torch_npu_pinpool" in r.stdout


def test_other_python_m_programs_still_activate_on_import(tmp_path):
    """Only ``python -m torch_npu_pinpool`` defers activation to its commands: a program run
    with ``python -m`` whose package imports the plugin gets it active, as with any import."""
    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import torch_npu\nimport torch_npu_pinpool\n")
    (pkg / "__main__.py").write_text(
        "import torch_npu_pinpool\nprint('active', torch_npu_pinpool.is_active())\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "userpkg"],
        cwd=tmp_path,
        env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "active True" in r.stdout


def test_doctor(tmp_path):
    """``python -m torch_npu_pinpool doctor`` reports versions, the simulator, the mode, and
    passes its self-test; with the plugin off it exits non-zero."""
    run_main = "import runpy; runpy.run_module('torch_npu_pinpool', run_name='__main__')"
    cmd = [sys.executable, "-c", run_main, "doctor"]  # from tmp_path: not the source tree
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    if simulator_api():  # on a real NPU it names the toolkit's runtime
        assert "simulated CANN runtime" in r.stdout
    assert "backport" in r.stdout or "native-present" in r.stdout
    assert "self-test:          PASS" in r.stdout
    env = {**os.environ, "TORCH_NPU_PINPOOL": "0"}
    off = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert off.returncode != 0
