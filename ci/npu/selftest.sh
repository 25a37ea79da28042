#!/usr/bin/env bash
# Exercise ci/npu/run-tests.sh on a machine without an NPU: every exit code, the full
# install -> doctor -> pytest path, and the JUnit XML, against stand-ins.
#
#   bash ci/npu/selftest.sh [--keep]
#
# The stand-ins live in a scratch directory and touch nothing else:
#   - a copy of run-tests.sh inside a miniature repository (a trivial torch_npu_pinpool package
#     whose `doctor` prints a line, and three tests: plain, `npu`-marked, `simulator`-marked);
#   - a venv (with the system site-packages, for pytest / setuptools / pip) holding fake `torch`
#     and `torch_npu` distributions whose version, torch.npu.is_available() and SoC name come
#     from STUB_* environment variables. They are NOT torch; they only answer the questions the
#     script asks.
# Needs python3 with venv, pip, setuptools and pytest. Prints `N passed, N failed` at the end.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KEEP=0
[[ "${1:-}" == --keep ]] && KEEP=1
BASE_PY="${PYTHON:-python3}"

SCRATCH="$(mktemp -d)"
if ((KEEP)); then echo "scratch: $SCRATCH"; else trap 'rm -rf "$SCRATCH"' EXIT; fi

# --- the miniature repository ----------------------------------------------------------------
R="$SCRATCH/repo"
mkdir -p "$R/ci/npu" "$R/torch_npu_pinpool" "$R/test" "$R/csrc"
cp "$HERE/run-tests.sh" "$HERE/missing_build_reqs.py" "$R/ci/npu/"
cp "$HERE/../../torch_npu_pinpool/_version.py" "$R/torch_npu_pinpool/" # the supported range
cat >"$R/torch_npu_pinpool/__init__.py" <<'EOF'
__version__ = "0.0.0+selftest"
EOF
cat >"$R/torch_npu_pinpool/__main__.py" <<'EOF'
import sys
if sys.argv[1:] == ["doctor"]:
    import torch_npu_pinpool
    print("selftest doctor: ok from", torch_npu_pinpool.__file__)
    sys.exit(0)
sys.exit(2)
EOF
cat >"$R/setup.py" <<'EOF'
from setuptools import setup
setup(name="torch_npu_pinpool", version="0.0.0", packages=["torch_npu_pinpool"])
EOF
cat >"$R/pytest.ini" <<'EOF'
[pytest]
markers =
    npu: needs a real Ascend NPU
    simulator: needs the simulated runtime
EOF
cat >"$R/test/conftest.py" <<'EOF'
EOF
cat >"$R/test/test_selftest.py" <<'EOF'
import os
import pytest
import torch_npu_pinpool


def test_installed_copy_is_imported():
    assert "site-packages" in torch_npu_pinpool.__file__


def test_may_fail():
    assert os.environ.get("STUB_FAIL") != "1"


@pytest.mark.npu
def test_npu_only():
    assert "SIMCANN_LIB_DIR" not in os.environ


@pytest.mark.simulator
def test_simulator_only():
    raise AssertionError("a simulator-only test ran on the NPU path")
EOF

# --- the venv with fake torch / torch_npu ---------------------------------------------------
V="$SCRATCH/venv"
"$BASE_PY" -m venv --system-site-packages "$V"
SITE="$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
mkdir -p "$SITE/torch" "$SITE/torch_npu"
cat >"$SITE/torch/__init__.py" <<'EOF'
# selftest stand-in, not torch
import os
__version__ = os.environ.get("STUB_TORCH", "2.10.0")
EOF
cat >"$SITE/torch_npu/__init__.py" <<'EOF'
# selftest stand-in, not torch_npu
import os
import types
import torch

__version__ = os.environ.get("STUB_NPU", "2.10.0.post7")
_avail = os.environ.get("STUB_AVAILABLE", "1") == "1"
torch.npu = types.SimpleNamespace(
    is_available=lambda: _avail,
    device_count=lambda: 1 if _avail else 0,
    get_device_name=lambda i=0: os.environ.get("STUB_SOC", "Ascend910B3"),
)
EOF
# Distribution metadata whose version follows the STUB_* variables: rewritten per case.
write_dists() {
    rm -rf "$SITE"/torch-*.dist-info "$SITE"/torch_npu-*.dist-info
    local name ver
    for name in torch torch_npu; do
        if [[ "$name" == torch ]]; then ver="$STUB_TORCH"; else ver="$STUB_NPU"; fi
        [[ -n "$ver" ]] || continue
        mkdir -p "$SITE/$name-$ver.dist-info"
        printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$name" "$ver" >"$SITE/$name-$ver.dist-info/METADATA"
        printf '%s\n' "$name" >"$SITE/$name-$ver.dist-info/top_level.txt"
    done
}
# A fake npu-smi on PATH (only for the output the script prints).
mkdir -p "$SCRATCH/bin"
cat >"$SCRATCH/bin/npu-smi" <<'EOF'
#!/bin/sh
echo "| NPU   Name                | Health        |"
echo "| 0     ${STUB_SMI_NAME:-910B3}               | OK            |"
EOF
chmod +x "$SCRATCH/bin/npu-smi"

# --- the cases -------------------------------------------------------------------------------
PASS=0
FAIL=0
LOG="$SCRATCH/case.log"
# case NAME EXPECTED_EXIT [grep-pattern-that-must-appear] -- ARGS...
case_() {
    local name="$1" want="$2" pattern="$3"
    shift 4
    local rc=0
    write_dists
    (cd "$SCRATCH" && PATH="$SCRATCH/bin:$PATH" bash "$R/ci/npu/run-tests.sh" "$@") >"$LOG" 2>&1 || rc=$?
    if [[ "$rc" == "$want" ]] && { [[ -z "$pattern" ]] || grep -Eq -- "$pattern" "$LOG"; }; then
        PASS=$((PASS + 1))
        echo "ok   $name (exit $rc)"
    else
        FAIL=$((FAIL + 1))
        echo "FAIL $name: exit $rc, wanted $want${pattern:+, output matching /$pattern/}"
        sed 's/^/    | /' "$LOG" | tail -n 40
    fi
}

export STUB_TORCH=2.10.0 STUB_NPU=2.10.0.post7 STUB_AVAILABLE=1 STUB_SOC=Ascend910B3
VPY="$V/bin/python"
JX="$SCRATCH/out/junit.xml"

case_ "usage error" 2 "unknown argument" -- --bogus
case_ "bad --expect-soc" 2 "a2 or a3" -- --expect-soc a9
case_ "help" 0 "Exit codes" -- --help
# No torch at all (the bare interpreter): a dry run still passes, a real run refuses.
STUB_TORCH="" STUB_NPU="" case_ "dry run, python without torch" 0 "a real run would stop here" -- --dry-run --python "$BASE_PY" --junit-xml "$JX"
case_ "real run, python without torch" 4 "never installs them" -- --python "$BASE_PY" --junit-xml "$JX"
STUB_NPU=2.7.1 STUB_TORCH=2.7.1 case_ "torch_npu 2.7.1 refused" 4 "not supported" -- --python "$VPY" --junit-xml "$JX"
STUB_NPU=2.14.0 STUB_TORCH=2.14.0 case_ "torch_npu 2.14.0 refused" 4 "not supported" -- --python "$VPY" --junit-xml "$JX"
STUB_TORCH=2.9.1 case_ "torch / torch_npu mismatch refused" 4 "not a pair" -- --python "$VPY" --junit-xml "$JX"
STUB_AVAILABLE=0 case_ "no NPU refused" 3 "no usable NPU" -- --python "$VPY" --junit-xml "$JX"
STUB_AVAILABLE=0 case_ "no NPU, dry run passes" 0 "would run: .*pip install --no-build-isolation --no-deps" -- --dry-run --python "$VPY" --junit-xml "$JX"
STUB_AVAILABLE=0 case_ "relative --python path, dry run" 0 "[(]check[)] /.*/venv/bin/python -m pytest" -- --dry-run --python venv/bin/python
case_ "expect a3 on an A2" 3 "expect-soc a3" -- --python "$VPY" --junit-xml "$JX" --expect-soc a3
case_ "full run on a (pretend) A2" 0 "3 passed, 1 deselected" -- --python "$VPY" --junit-xml "$JX" --expect-soc a2
if [[ -f "$JX" ]] && grep -q 'testsuite[^>]*name="pinpool-npu-a2-torch_npu-2.10.0.post7"' "$JX" &&
    grep -q 'name="test_npu_only"' "$JX" && ! grep -q 'test_simulator_only' "$JX"; then
    PASS=$((PASS + 1))
    echo "ok   JUnit XML written, npu test in it, simulator test not"
else
    FAIL=$((FAIL + 1))
    echo "FAIL JUnit XML $JX missing or wrong"
fi
case_ "--uninstall-after removes what it installed" 0 "pip uninstall -y torch_npu_pinpool" -- --python "$VPY" --junit-xml "$JX" --uninstall-after
if (cd "$SCRATCH" && "$VPY" -c 'import importlib.metadata as m; m.version("torch_npu_pinpool")' 2>/dev/null); then
    FAIL=$((FAIL + 1))
    echo "FAIL torch_npu_pinpool still installed after --uninstall-after"
else
    PASS=$((PASS + 1))
    echo "ok   torch_npu_pinpool gone after --uninstall-after"
fi
STUB_SOC=Ascend910_9391 STUB_NPU=2.13.0 STUB_TORCH=2.13.0 case_ "A3 detected" 0 "SoC Ascend910_9391 \(Atlas A3\)" -- --python "$VPY" --junit-xml "$JX" --expect-soc a3
STUB_FAIL=1 case_ "failing test gives exit 1" 1 "tests FAILED" -- --python "$VPY" --junit-xml "$JX"
# A CANN install: set_env.sh exports ASCEND_HOME_PATH; the version comes from the install.info.
mkdir -p "$SCRATCH/Ascend/ascend-toolkit/latest/x86_64-linux"
printf 'package_name=Ascend-cann-toolkit\nversion=8.2.RC1\n' >"$SCRATCH/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_toolkit_install.info"
printf 'export ASCEND_HOME_PATH=%s\nexport ASCEND_TOOLKIT_HOME=%s\n' "$SCRATCH/Ascend/ascend-toolkit/latest" "$SCRATCH/Ascend/ascend-toolkit/latest" >"$SCRATCH/Ascend/ascend-toolkit/set_env.sh"
PINPOOL_CANN_SET_ENV="$SCRATCH/Ascend/ascend-toolkit/set_env.sh" case_ "CANN set_env.sh sourced, version read" 0 "CANN: 8.2.RC1" -- --python "$VPY" --junit-xml "$JX" --no-install
ASCEND_HOME_PATH="$SCRATCH/Ascend/ascend-toolkit/latest" case_ "set_env.sh found from ASCEND_HOME_PATH" 0 "source .*ascend-toolkit/set_env.sh" -- --dry-run --python "$VPY" --junit-xml "$JX"
PINPOOL_CANN_SET_ENV=/nonexistent/set_env.sh case_ "named set_env.sh missing" 5 "does not exist" -- --python "$VPY" --junit-xml "$JX"
SIMCANN_LIB_DIR=/nowhere LD_LIBRARY_PATH=/nowhere/simcann/lib case_ "simulator variables are dropped" 0 "removing the simulator.s directories" -- --python "$VPY" --junit-xml "$JX" --no-install
case_ "no test selected gives exit 6" 6 "" -- --python "$VPY" --junit-xml "$JX" --no-install -- -k no_such_test

echo
echo "selftest: $PASS passed, $FAIL failed"
((FAIL == 0))
