#!/usr/bin/env bash
# Run torch_npu_pinpool's test suite on a real Ascend NPU (a self-hosted runner: .github/workflows/
# npu.yml; or by hand). The machine brings CANN and a Python environment with torch + torch_npu;
# this script never installs or changes those.
#
#   PYTHON=/path/to/env/bin/python bash ci/npu/run-tests.sh [JUNIT_XML] [pytest args...]
#
# Steps: source CANN's set_env.sh, check the NPU and the torch_npu release, `pip install` the
# plugin into that environment (--no-build-isolation --no-deps: built against the torch that is
# there), `python -m torch_npu_pinpool doctor`, then pytest (test/pinpool test/repo test/stress test/consumers, the tests
# not marked `simulator`) with JUnit XML. Exit 0: tests passed; 1: tests failed; 2: refused (no
# NPU, unsupported torch_npu, setup failed): the message says why and what to do.
# Environment: PYTHON (default python3), PINPOOL_CANN_SET_ENV (CANN's set_env.sh, default: the
# usual install places).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
JUNIT="$(realpath -m "${1:-$REPO/build/npu-test/junit.xml}")"
shift || true
PY="${PYTHON:-python3}"
say() { printf '[npu-ci] %s\n' "$*"; }
refuse() {
    printf '\n[npu-ci] REFUSED: %s\n' "$*" >&2
    exit 2
}

# 1. CANN. Never the simulator: its variables would make the tests think they run on it.
unset SIMCANN_LIB_DIR SIMCANN_STRICT PINPOOL_PAIR PINPOOL_TEST_AS_NPU
SET_ENV="${PINPOOL_CANN_SET_ENV:-}"
for c in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/cann/set_env.sh \
    "$HOME/Ascend/ascend-toolkit/set_env.sh"; do
    [[ -z "$SET_ENV" && -f "$c" ]] && SET_ENV="$c"
done
if [[ -n "$SET_ENV" ]]; then
    [[ -f "$SET_ENV" ]] || refuse "PINPOOL_CANN_SET_ENV=$SET_ENV does not exist"
    say "source $SET_ENV"
    set +eu # CANN's scripts are not written for set -eu
    # shellcheck disable=SC1090
    source "$SET_ENV" || refuse "sourcing $SET_ENV failed: check the CANN install"
    set -eu
else
    say "no CANN set_env.sh found: using the environment as it is (set PINPOOL_CANN_SET_ENV)"
fi

# 2. torch / torch_npu (supported range from torch_npu_pinpool/_version.py) and the NPU.
command -v "$PY" >/dev/null || refuse "python '$PY' not found: set PYTHON to the torch_npu environment's interpreter"
SCRATCH="$(mktemp -d)" # run Python outside the source tree (no uncompiled package shadowing)
trap 'rm -rf "$SCRATCH"' EXIT
probe="$(cd "$SCRATCH" && "$PY" - "$REPO/torch_npu_pinpool/_version.py" <<'PYEOF' 2>&1
import os, sys
from importlib import metadata as md
versions = {}
exec(open(sys.argv[1]).read(), versions)  # MIN / MAX_TORCH_NPU and their check, in one place
try:
    torch_v, npu_v = md.version("torch"), md.version("torch_npu")
except md.PackageNotFoundError as e:
    sys.exit(f"UNSUPPORTED {e.name} is not installed in {sys.executable} (this script never installs it)")
mm = lambda v: tuple(int(x) for x in v.split("+")[0].split(".")[:2])
os.environ.pop(versions["ALLOW_UNTESTED_ENV"], None)  # this script tests the supported range only
refusal, _ = versions["check_torch_npu"](npu_v, "test")
if refusal:
    sys.exit(f"UNSUPPORTED {refusal}")
if mm(npu_v) != mm(torch_v):
    sys.exit(f"UNSUPPORTED torch {torch_v} and torch_npu {npu_v} are not a pair")
import torch, torch_npu  # noqa: E401,F401
n = torch.npu.device_count() if torch.npu.is_available() else 0
if not n:
    sys.exit("NONPU")
print(f"torch {torch_v}, torch_npu {npu_v}, {n} NPU(s), {torch.npu.get_device_name(0)}")
PYEOF
)" || {
    case "$probe" in
        *UNSUPPORTED*) refuse "${probe##*UNSUPPORTED }" ;;
        *NONPU*) refuse "no usable NPU: torch.npu.is_available() is false or no device is visible. Check CANN's set_env.sh, the driver libraries on LD_LIBRARY_PATH, ASCEND_RT_VISIBLE_DEVICES and the permissions of /dev/davinci*" ;;
        *) printf '%s\n' "$probe" | tail -n 20 >&2; refuse "importing torch / torch_npu failed (above)" ;;
    esac
}
say "$probe"

# 3. Install (the build requirements must be in the env: --no-build-isolation), doctor, pytest.
"$PY" -m pip install -q "setuptools>=64" wheel pytest || refuse "pip install of the build requirements / pytest failed"
"$PY" -m pip install --no-build-isolation --no-deps "$REPO" || refuse "pip install of $REPO failed (see the build log above)"
(cd "$SCRATCH" && "$PY" -m torch_npu_pinpool doctor) || refuse "python -m torch_npu_pinpool doctor failed: the plugin is not working on this machine"
mkdir -p "$(dirname "$JUNIT")"
cd "$REPO"
set +e
"$PY" -m pytest test/pinpool test/repo test/stress test/consumers -m "not simulator" --junitxml="$JUNIT" "$@"
rc=$?
set -e
say "JUnit XML: $JUNIT"
case $rc in
    0) exit 0 ;;
    1) exit 1 ;;
    *) refuse "pytest exited $rc (no test selected, interrupted, or a usage error)" ;;
esac
