#!/usr/bin/env bash
# Run torch_npu_pinpool's test suite on a real Ascend A2/A3 machine (no simulator).
#
#   bash ci/npu/run-tests.sh [options] [-- extra pytest args]
#
# It uses the torch / torch_npu that the machine already has (it never installs either), sources
# CANN's set_env.sh, checks that an NPU is there, installs this repo into that environment with
# `pip install --no-build-isolation --no-deps .`, runs `python -m torch_npu_pinpool doctor`, then
# pytest with -m "not simulator" and a JUnit XML report. `--dry-run` does every check that needs
# no NPU, prints the commands it would run, and works on any machine. See ci/npu/README.md.
#
# Options:
#   --dry-run            check and print, change nothing; exit 0 when every check passed even
#                        without an NPU
#   --python PY          the interpreter of the torch_npu environment (default: $PYTHON, else
#                        python3, else python)
#   --junit-xml PATH     where to write the JUnit XML (default: build/npu-test/junit-npu.xml)
#   --expect-soc KIND    a2 or a3: refuse (exit 3) unless the NPU is of that kind
#   --device LIST        export ASCEND_RT_VISIBLE_DEVICES=LIST for the whole run
#   --no-install         skip the pip install (test what is installed already)
#   --uninstall-after    pip uninstall torch_npu_pinpool when done, if this run installed it
#                        (once installed, it activates in every torch process of that
#                        environment through torch's backend autoload)
#   -h, --help           this text
#
# Exit codes (also in ci/npu/README.md):
#   0  tests passed (or: --dry-run and every check passed)
#   1  tests failed
#   2  usage error
#   3  no usable NPU (none found, torch.npu.is_available() false, or not the --expect-soc kind)
#   4  unsupported software: torch / torch_npu missing, torch_npu outside 2.8-2.13, torch and
#      torch_npu of different releases, no pip
#   5  setup failed: CANN set_env.sh, pip install or the doctor failed
#   6  pytest did not run the suite: collection error, no test selected, interrupted, internal
#      error
#   7  the repository layout is not what this script expects
set -euo pipefail

readonly EXIT_OK=0 EXIT_TESTS_FAILED=1 EXIT_USAGE=2 EXIT_NO_NPU=3 EXIT_UNSUPPORTED=4
readonly EXIT_SETUP=5 EXIT_PYTEST=6 EXIT_LAYOUT=7

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

# The torch_npu releases this plugin supports (2.MIN_MINOR to 2.MAX_MINOR, inclusive), read from
# the one place they are written down.
supported_minor() { # supported_minor MIN|MAX
    sed -n "s/^$1_TORCH_NPU = (2, \([0-9]*\))\$/\1/p" "$REPO/torch_npu_pinpool/_version.py"
}
MIN_MINOR="$(supported_minor MIN)"
MAX_MINOR="$(supported_minor MAX)"
if [[ -z "$MIN_MINOR" || -z "$MAX_MINOR" ]]; then
    echo "[npu-ci] cannot read MIN_TORCH_NPU / MAX_TORCH_NPU from torch_npu_pinpool/_version.py" >&2
    exit "$EXIT_LAYOUT"
fi
readonly MIN_MINOR MAX_MINOR

DRY_RUN=0
PY="${PYTHON:-}"
JUNIT=""
EXPECT_SOC=""
DEVICES=""
DO_INSTALL=1
UNINSTALL_AFTER=0
EXTRA_PYTEST=()

say() { printf '[npu-ci] %s\n' "$*"; }
warn() { printf '[npu-ci] WARNING: %s\n' "$*" >&2; }
section() { printf '\n[npu-ci] === %s ===\n' "$*"; }
quote_cmd() {
    # The command as one would type it: plain words as they are, others in single quotes.
    local out="" a
    for a in "$@"; do
        if [[ "$a" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then
            out+=" $a"
        else
            out+=" '${a//\'/\'\\\'\'}'"
        fi
    done
    printf '%s' "${out# }"
}
refuse() {
    # refuse CODE MESSAGE...: stop with a clear message and a distinct exit code.
    local code="$1"
    shift
    printf '\n[npu-ci] REFUSED (exit %d): %s\n' "$code" "$*" >&2
    exit "$code"
}
usage() {
    sed -n '2,/^set -euo pipefail/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
}
# run: a step that changes something (install, doctor, tests). Printed always, run unless
# --dry-run. Its exit status is returned, not fatal.
run() {
    if ((DRY_RUN)); then
        printf '[npu-ci] would run: %s\n' "$(quote_cmd "$@")"
        return 0
    fi
    printf '[npu-ci] + %s\n' "$(quote_cmd "$@")"
    local rc=0
    "$@" || rc=$?
    return "$rc"
}
# Probes run in an empty scratch directory: a python started in the source tree would see its
# torch_npu_pinpool/ (and any *.egg-info) instead of what is installed.
SCRATCH_DIR="$(mktemp -d)"
UNINSTALL_ON_EXIT=0
# shellcheck disable=SC2317  # called through `trap`
on_exit() {
    if ((UNINSTALL_ON_EXIT)); then
        # --uninstall-after, once this run has installed the package.
        printf '[npu-ci] + %s\n' "$(quote_cmd "$PY" -m pip uninstall -y torch_npu_pinpool)"
        "$PY" -m pip uninstall -y torch_npu_pinpool || warn "pip uninstall torch_npu_pinpool failed"
    fi
    rm -rf "$SCRATCH_DIR"
}
trap on_exit EXIT
# check: a read-only probe that runs in every mode. Its announcement goes to fd 3 (the
# script's stdout), so that `out="$(check ...)"` captures only the command's output.
exec 3>&1
check() {
    printf '[npu-ci] (check) %s\n' "$(quote_cmd "$@")" >&3
    "$@"
}

# --- arguments -----------------------------------------------------------------------------
while (($#)); do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --python)
            (($# >= 2)) || { usage >&2; exit "$EXIT_USAGE"; }
            PY="$2"
            shift
            ;;
        --python=*) PY="${1#*=}" ;;
        --junit-xml)
            (($# >= 2)) || { usage >&2; exit "$EXIT_USAGE"; }
            JUNIT="$2"
            shift
            ;;
        --junit-xml=*) JUNIT="${1#*=}" ;;
        --expect-soc)
            (($# >= 2)) || { usage >&2; exit "$EXIT_USAGE"; }
            EXPECT_SOC="$2"
            shift
            ;;
        --expect-soc=*) EXPECT_SOC="${1#*=}" ;;
        --device)
            (($# >= 2)) || { usage >&2; exit "$EXIT_USAGE"; }
            DEVICES="$2"
            shift
            ;;
        --device=*) DEVICES="${1#*=}" ;;
        --no-install) DO_INSTALL=0 ;;
        --uninstall-after) UNINSTALL_AFTER=1 ;;
        -h | --help)
            usage
            exit "$EXIT_OK"
            ;;
        --)
            shift
            EXTRA_PYTEST=("$@")
            break
            ;;
        *)
            printf '[npu-ci] unknown argument: %q\n\n' "$1" >&2
            usage >&2
            exit "$EXIT_USAGE"
            ;;
    esac
    shift
done

EXPECT_SOC="$(printf '%s' "$EXPECT_SOC" | tr '[:upper:]' '[:lower:]')"
case "$EXPECT_SOC" in
    "" | a2 | a3) ;;
    *)
        printf '[npu-ci] --expect-soc takes a2 or a3, not %q\n' "$EXPECT_SOC" >&2
        exit "$EXIT_USAGE"
        ;;
esac
if [[ -n "$DEVICES" && ! "$DEVICES" =~ ^[0-9]+(,[0-9]+)*$ ]]; then
    printf '[npu-ci] --device takes device ids like 0 or 0,1, not %q\n' "$DEVICES" >&2
    exit "$EXIT_USAGE"
fi
[[ -n "$JUNIT" ]] || JUNIT="$REPO/build/npu-test/junit-npu.xml"
[[ "$JUNIT" == /* ]] || JUNIT="$PWD/$JUNIT"

if ((DRY_RUN)); then
    say "dry run: checks run, nothing is installed or tested"
fi

# --- 1. repository layout ------------------------------------------------------------------
section "repository"
say "repo: $REPO"
layout_bad=()
[[ -f "$REPO/torch_npu_pinpool/__init__.py" ]] || layout_bad+=("torch_npu_pinpool/__init__.py is missing")
[[ -f "$REPO/setup.py" || -f "$REPO/pyproject.toml" ]] || layout_bad+=("neither setup.py nor pyproject.toml: pip cannot install the repo")
[[ -d "$REPO/test" ]] || layout_bad+=("test/ is missing")
[[ -f "$REPO/test/conftest.py" ]] || layout_bad+=("test/conftest.py is missing")
if ((${#layout_bad[@]})); then
    for m in "${layout_bad[@]}"; do printf '[npu-ci]   - %s\n' "$m" >&2; done
    refuse "$EXIT_LAYOUT" "the repository at $REPO does not look like torch_npu_pinpool"
fi
[[ -d "$REPO/csrc" ]] || warn "csrc/ is missing: there is no C++ extension to build"
PYTEST_INI=""
if [[ -f "$REPO/pytest.ini" ]]; then
    PYTEST_INI="$REPO/pytest.ini"
    for marker in npu simulator; do
        grep -Eq "^[[:space:]]*${marker}[[:space:]]*:" "$PYTEST_INI" ||
            warn "pytest.ini declares no '$marker' marker"
    done
else
    warn "no pytest.ini: the markers npu / simulator are not declared"
fi
say "layout ok"

# --- 2. python -----------------------------------------------------------------------------
section "python"
if [[ -z "$PY" ]]; then
    if command -v python3 >/dev/null 2>&1; then PY=python3; else PY=python; fi
fi
if ! command -v "$PY" >/dev/null 2>&1; then
    refuse "$EXIT_UNSUPPORTED" "python '$PY' not found: pass --python or PYTHON= with the torch_npu environment's interpreter"
fi
[[ "$PY" == */* && "$PY" != /* ]] && PY="$PWD/$PY"
PY_REAL="$(cd "$SCRATCH_DIR" && "$PY" -c 'import sys; print(sys.executable)' 2>/dev/null)" ||
    refuse "$EXIT_UNSUPPORTED" "'$PY' does not run"
say "python: $PY ($PY_REAL, $("$PY" -c 'import sys; print(sys.version.split()[0])'))"
# From here on the absolute path: some steps run in another directory.
PY="$PY_REAL"

# The simulated runtime (test/simcann, ci/sim-env.sh) must not stand in for CANN here.
for v in $(compgen -e | grep '^SIMCANN_' || true); do
    warn "unsetting $v: this run uses the real CANN runtime"
    unset "$v"
done
if [[ ":${LD_LIBRARY_PATH:-}:" == *simcann* ]]; then
    warn "removing the simulator's directories from LD_LIBRARY_PATH"
    LD_LIBRARY_PATH="$(printf '%s' "$LD_LIBRARY_PATH" | tr ':' '\n' | { grep -v simcann || true; } | paste -sd: -)"
    if [[ -n "$LD_LIBRARY_PATH" ]]; then export LD_LIBRARY_PATH; else unset LD_LIBRARY_PATH; fi
fi
unset PINPOOL_PAIR

# Installed versions, read from package metadata (no import: works without CANN).
declare -A DIST=()
while IFS='=' read -r k v; do
    [[ -n "$k" ]] && DIST["$k"]="$v"
done < <(cd "$SCRATCH_DIR" && "$PY" - <<'EOF'
import importlib.metadata as md
for name in ("torch", "torch_npu", "torch_npu_pinpool", "pytest", "pip", "setuptools"):
    try:
        print(f"{name}={md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name}=")
EOF
)
TORCH_VER="${DIST[torch]:-}"
NPU_VER="${DIST[torch_npu]:-}"
say "torch:     ${TORCH_VER:-not installed}"
say "torch_npu: ${NPU_VER:-not installed}"
say "pytest:    ${DIST[pytest]:-not installed}"
say "installed torch_npu_pinpool: ${DIST[torch_npu_pinpool]:-none}"

# major.minor of a version string: 2.10.0.post7+abc -> 2.10
major_minor() { printf '%s' "$1" | sed -E 's/^([0-9]+)\.([0-9]+).*/\1.\2/'; }

SOFTWARE_OK=1
if [[ -z "$TORCH_VER" || -z "$NPU_VER" ]]; then
    SOFTWARE_OK=0
    msg="torch and torch_npu must already be installed in $PY_REAL (this script never installs them)"
    if ((DRY_RUN)); then
        say "NOTE: $msg; a real run would stop here with exit $EXIT_UNSUPPORTED. Continuing the dry run."
    else
        refuse "$EXIT_UNSUPPORTED" "$msg"
    fi
else
    npu_mm="$(major_minor "$NPU_VER")"
    torch_mm="$(major_minor "$TORCH_VER")"
    if [[ ! "$npu_mm" =~ ^2\.([0-9]+)$ ]] || ((BASH_REMATCH[1] < MIN_MINOR || BASH_REMATCH[1] > MAX_MINOR)); then
        refuse "$EXIT_UNSUPPORTED" "torch_npu $NPU_VER is not supported: torch_npu_pinpool supports torch_npu 2.$MIN_MINOR to 2.$MAX_MINOR"
    fi
    if [[ "$npu_mm" != "$torch_mm" ]]; then
        refuse "$EXIT_UNSUPPORTED" "torch $TORCH_VER and torch_npu $NPU_VER are not a pair (torch_npu $npu_mm needs torch $npu_mm)"
    fi
    say "torch_npu $NPU_VER is in the supported range 2.$MIN_MINOR-2.$MAX_MINOR"
fi
if [[ -z "${DIST[pip]:-}" ]]; then
    if ((DRY_RUN)); then
        say "NOTE: pip is not installed in $PY_REAL; a real run would stop with exit $EXIT_UNSUPPORTED"
    elif ((DO_INSTALL)); then
        refuse "$EXIT_UNSUPPORTED" "pip is not installed in $PY_REAL"
    fi
fi

# --- 3. CANN -------------------------------------------------------------------------------
section "CANN"
# Where CANN's set_env.sh usually is: toolkit installs put it beside `latest/`
# (ascend-toolkit/set_env.sh), CANN >= 8.5 one-package installs under cann/; ASCEND_HOME_PATH
# points at the toolkit's `latest` directory once a set_env.sh has been sourced.
SET_ENV=""
candidates=()
[[ -n "${PINPOOL_CANN_SET_ENV:-}" ]] && candidates+=("$PINPOOL_CANN_SET_ENV")
if [[ -n "${ASCEND_HOME_PATH:-}" ]]; then
    candidates+=("$ASCEND_HOME_PATH/set_env.sh" "$ASCEND_HOME_PATH/../set_env.sh" "$ASCEND_HOME_PATH/bin/setenv.bash")
fi
[[ -n "${ASCEND_TOOLKIT_HOME:-}" ]] && candidates+=("$ASCEND_TOOLKIT_HOME/../set_env.sh")
candidates+=(
    /usr/local/Ascend/ascend-toolkit/set_env.sh
    /usr/local/Ascend/cann/set_env.sh
    "${HOME:-/root}/Ascend/ascend-toolkit/set_env.sh"
    "${HOME:-/root}/Ascend/cann/set_env.sh"
)
for c in "${candidates[@]}"; do
    if [[ -f "$c" ]]; then
        SET_ENV="$(cd "$(dirname "$c")" && pwd)/$(basename "$c")"
        break
    fi
done
if [[ -n "$SET_ENV" ]]; then
    printf '[npu-ci] (check) source %q\n' "$SET_ENV" >&3
    # CANN's scripts are not written for `set -u` / `set -e`.
    set +eu
    # shellcheck disable=SC1090
    source "$SET_ENV"
    rc=$?
    set -eu
    ((rc == 0)) || refuse "$EXIT_SETUP" "sourcing $SET_ENV failed (exit $rc)"
else
    if [[ -n "${PINPOOL_CANN_SET_ENV:-}" ]]; then
        refuse "$EXIT_SETUP" "PINPOOL_CANN_SET_ENV=$PINPOOL_CANN_SET_ENV does not exist"
    fi
    say "no CANN set_env.sh found (looked at: ${candidates[*]})"
    [[ -n "${ASCEND_HOME_PATH:-}" ]] && say "using the environment as it is (ASCEND_HOME_PATH=$ASCEND_HOME_PATH)"
fi
# The driver's libraries (npu-smi and the runtime need them); CANN's set_env.sh adds them on
# most installs, containers often miss them.
DRIVER_DIR="${PINPOOL_ASCEND_DRIVER_DIR:-/usr/local/Ascend/driver}"
if [[ -d "$DRIVER_DIR/lib64" ]]; then
    for d in "$DRIVER_DIR/lib64" "$DRIVER_DIR/lib64/common" "$DRIVER_DIR/lib64/driver"; do
        if [[ -d "$d" && ":${LD_LIBRARY_PATH:-}:" != *":$d:"* && ":${LD_LIBRARY_PATH:-}:" != *":$d/:"* ]]; then
            LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
        fi
    done
    export LD_LIBRARY_PATH
fi
CANN_VER="unknown"
if [[ -n "${ASCEND_HOME_PATH:-}" && -d "$ASCEND_HOME_PATH" ]]; then
    # The same file torch_npu's collect_env reads: ascend_<component>_install.info, version=...
    info="$(find -L "$ASCEND_HOME_PATH" -maxdepth 3 -name 'ascend_*_install.info' 2>/dev/null | sort | head -n 1)"
    if [[ -n "$info" ]]; then
        v="$(sed -n -E 's/^[[:space:]]*(package_)?version[[:space:]]*=[[:space:]]*//p' "$info" | head -n 1)"
        [[ -n "$v" ]] && CANN_VER="$v ($info)"
    fi
fi
say "ASCEND_HOME_PATH=${ASCEND_HOME_PATH:-<unset>}"
say "CANN: $CANN_VER"
if [[ -f "$DRIVER_DIR/version.info" ]]; then
    say "driver: $(grep -m1 -i 'version' "$DRIVER_DIR/version.info" || true)"
fi
if [[ -n "$DEVICES" ]]; then
    export ASCEND_RT_VISIBLE_DEVICES="$DEVICES"
fi
for v in ASCEND_RT_VISIBLE_DEVICES TASK_QUEUE_ENABLE PYTORCH_NPU_ALLOC_CONF TORCH_NPU_PINPOOL; do
    say "$v=${!v-<unset>}"
done

# --- 4. the NPU ----------------------------------------------------------------------------
section "NPU"
SMI_SEES=""
if command -v npu-smi >/dev/null 2>&1; then
    if smi_out="$(check npu-smi info 2>&1)"; then
        printf '%s\n' "$smi_out" | head -n 30
        # Chip names in the table: 910B3, 910_9391, Ascend910B4, ...
        SMI_SEES="$(printf '%s\n' "$smi_out" | grep -oE '(Ascend)?910(B[0-9A-Za-z-]*|_93[0-9A-Za-z]*)' | head -n 1 || true)"
        [[ -n "$SMI_SEES" ]] || SMI_SEES="(device listed, chip name not recognised)"
    else
        say "npu-smi info failed:"
        printf '%s\n' "$smi_out" | head -n 10
    fi
else
    say "npu-smi: not on PATH"
fi
# shellcheck disable=SC2012
nodes="$(ls /dev/davinci[0-9]* 2>/dev/null | tr '\n' ' ' || true)"
say "device nodes: ${nodes:-none}"

NPU_OK=0
SOC=""
NPU_COUNT=0
if ((SOFTWARE_OK)); then
    probe_out=""
    probe_rc=0
    probe_out="$(cd "$SCRATCH_DIR" && check timeout 600 "$PY" - <<'EOF' 2>&1
import torch
import torch_npu  # noqa: F401
ok = bool(torch.npu.is_available())
n = torch.npu.device_count() if ok else 0
print(f"PROBE available={int(ok)}")
print(f"PROBE count={n}")
if n:
    print(f"PROBE soc={torch.npu.get_device_name(0)}")
EOF
)" || probe_rc=$?
    while read -r tag kv; do
        [[ "$tag" == PROBE ]] || continue
        case "$kv" in
            available=*) NPU_OK="${kv#*=}" ;;
            count=*) NPU_COUNT="${kv#*=}" ;;
            soc=*) SOC="${kv#*=}" ;;
        esac
    done <<<"$probe_out"
    if ((probe_rc != 0)); then
        say "importing torch / torch_npu failed (exit $probe_rc):"
        printf '%s\n' "$probe_out" | grep -v '^PROBE ' | tail -n 15
        NPU_OK=0
    fi
    ((NPU_COUNT > 0)) || NPU_OK=0
else
    say "skipping the torch.npu probe: torch / torch_npu are not installed in $PY_REAL"
fi

KIND=""
case "$SOC" in
    Ascend910B*) KIND=a2 ;;
    Ascend910_93*) KIND=a3 ;;
esac
if ((NPU_OK)); then
    say "NPU: $NPU_COUNT visible, SoC $SOC ($(case "$KIND" in a2) echo "Atlas A2" ;; a3) echo "Atlas A3" ;; *) echo "neither A2 nor A3" ;; esac))"
    [[ -n "$KIND" ]] || warn "SoC $SOC is neither A2 (Ascend910B*) nor A3 (Ascend910_93*): torch_npu_pinpool targets A2/A3"
    # test/conftest.py recognises a real NPU by /dev/davinci0; without it `npu` tests are skipped.
    [[ -e /dev/davinci0 ]] ||
        warn "/dev/davinci0 does not exist here (container with other device nodes?): test/conftest.py will skip the 'npu' tests"
    if [[ -n "$EXPECT_SOC" && "$KIND" != "$EXPECT_SOC" ]]; then
        refuse "$EXIT_NO_NPU" "--expect-soc $EXPECT_SOC, but this machine's NPU is $SOC (${KIND:-other})"
    fi
else
    hint=""
    [[ -n "$SMI_SEES" || -n "$nodes" ]] && hint=" npu-smi / /dev sees a device: check CANN's set_env.sh, the driver libraries on LD_LIBRARY_PATH, ASCEND_RT_VISIBLE_DEVICES and the device nodes' permissions."
    if ((DRY_RUN)); then
        say "no usable NPU here; a real run would stop with exit $EXIT_NO_NPU.$hint"
    else
        refuse "$EXIT_NO_NPU" "no usable NPU: torch.npu.is_available() is false or no device is visible.$hint"
    fi
fi

# --- 5. install + doctor -------------------------------------------------------------------
section "install"
# Commands that import the installed package run from a scratch directory, so that the source
# tree (no compiled extension) cannot shadow the installed package.
WORKDIR="$(dirname "$JUNIT")"
if ((DRY_RUN)); then
    say "would create $WORKDIR"
    # The read-only checks below still need a directory outside the source tree.
    CHECKDIR="$SCRATCH_DIR"
else
    mkdir -p "$WORKDIR"
    CHECKDIR="$WORKDIR"
fi
if ((DO_INSTALL)) && [[ -n "${DIST[pip]:-}" ]]; then
    # --no-build-isolation builds with what the environment has: its build requirements
    # (pyproject.toml; never torch / torch_npu) must be there.
    missing_build=()
    while IFS= read -r req; do
        [[ -n "$req" ]] && missing_build+=("$req")
    done < <(check "$PY" "$HERE/missing_build_reqs.py" "$REPO")
    if ((${#missing_build[@]})); then
        say "build requirements missing from the environment: ${missing_build[*]}"
        run "$PY" -m pip install "${missing_build[@]}" ||
            refuse "$EXIT_SETUP" "installing the build requirements failed"
    else
        say "build requirements present"
    fi
fi
if ((DO_INSTALL)); then
    # --no-deps: never let pip touch torch / torch_npu (their wheels pin torch==X+cpu, which pip
    # would try to satisfy); --no-build-isolation: build against the torch that is installed.
    if [[ -n "${DIST[torch_npu_pinpool]:-}" ]]; then
        say "torch_npu_pinpool ${DIST[torch_npu_pinpool]} is installed already: this install replaces it"
    fi
    if ((UNINSTALL_AFTER && !DRY_RUN)); then
        UNINSTALL_ON_EXIT=1
    elif ((UNINSTALL_AFTER)); then
        say "would run at exit: $(quote_cmd "$PY" -m pip uninstall -y torch_npu_pinpool)"
    fi
    run "$PY" -m pip install --no-build-isolation --no-deps "$REPO" ||
        refuse "$EXIT_SETUP" "pip install of $REPO failed (see the build log above)"
else
    say "--no-install: testing the torch_npu_pinpool that is installed (${DIST[torch_npu_pinpool]:-none})"
fi
if [[ -z "${DIST[pytest]:-}" ]]; then
    # pytest is a test tool, not part of the torch_npu environment: installing it is allowed.
    run "$PY" -m pip install pytest || refuse "$EXIT_SETUP" "pip install pytest failed"
    ((DRY_RUN)) || DIST[pytest]=installed
fi

section "doctor"
doctor() { (cd "$WORKDIR" && "$PY" -m torch_npu_pinpool doctor); }
if ((DRY_RUN)); then
    printf '[npu-ci] would run: (cd %q && %s)\n' "$WORKDIR" "$(quote_cmd "$PY" -m torch_npu_pinpool doctor)"
else
    printf '[npu-ci] + (cd %q && %s)\n' "$WORKDIR" "$(quote_cmd "$PY" -m torch_npu_pinpool doctor)"
    doctor || refuse "$EXIT_SETUP" "python -m torch_npu_pinpool doctor failed: the plugin is not working on this machine"
fi

# --- 6. pytest -----------------------------------------------------------------------------
section "tests"
# The simulator's own tests (test/simcann) mean nothing on real hardware; simulator-only checks
# carry the `simulator` marker; `npu` tests run here and nowhere else.
PYTEST=("$PY" -m pytest -m "not simulator" --ignore="$REPO/test/simcann" --rootdir="$REPO")
[[ -n "$PYTEST_INI" ]] && PYTEST+=(-c "$PYTEST_INI")
suite="pinpool-npu-${KIND:-unknown}-torch_npu-${NPU_VER:-unknown}"
RUN_PYTEST=("${PYTEST[@]}" --junitxml="$JUNIT" -o junit_suite_name="$suite" "${EXTRA_PYTEST[@]}" "$REPO/test")

# Collection runs in every mode: it proves the marker expression selects tests.
collect_rc=0
collect_out="$(cd "$CHECKDIR" && check "${PYTEST[@]}" --collect-only -q "${EXTRA_PYTEST[@]}" "$REPO/test" 2>&1)" ||
    collect_rc=$?
printf '%s\n' "$collect_out" | tail -n 25
selected="$(printf '%s\n' "$collect_out" | grep -Eo '^[0-9]+(/[0-9]+)? tests? collected' | head -n 1 || true)"
[[ -n "$selected" ]] || selected="$(printf '%s\n' "$collect_out" | grep -Ec '::' || true) test ids listed"
if ((collect_rc == 0)); then
    say "collection ok: $selected"
elif [[ -z "${DIST[pytest]:-}" ]]; then
    say "NOTE: pytest is not installed in $PY_REAL: collection not checked (a real run installs pytest first)"
    ((DRY_RUN)) || refuse "$EXIT_PYTEST" "pytest still missing after install"
elif ((DRY_RUN)) && printf '%s\n' "$collect_out" | grep -Eq "No module named '?torch"; then
    # A dry run installs nothing: a test module may not import yet (torch / torch_npu absent
    # from this python, or torch_npu_pinpool not installed).
    needs="$(printf '%s\n' "$collect_out" | grep -Eo "No module named '?torch[A-Za-z0-9_.]*" | sed -E "s/No module named '?//" | sort -u | paste -sd, -)"
    say "NOTE: collecting the tests needs $needs, which $PY_REAL lacks before a real run: collection not verified here"
elif ((DRY_RUN && collect_rc == 5)) && [[ -z "${DIST[torch_npu_pinpool]:-}" || "$SOFTWARE_OK" == 0 ]]; then
    # Test modules that skip themselves while torch_npu_pinpool (or torch) is not installed.
    say "NOTE: no test collected before the install (modules skip themselves: torch_npu_pinpool / torch not installed in $PY_REAL): collection not verified here"
else
    refuse "$EXIT_PYTEST" "pytest --collect-only failed (exit $collect_rc): see above"
fi

if ((DRY_RUN)); then
    printf '[npu-ci] would run: (cd %q && %s)\n' "$WORKDIR" "$(quote_cmd "${RUN_PYTEST[@]}")"
    section "dry run done"
    if ((!SOFTWARE_OK)); then
        would="exit $EXIT_UNSUPPORTED: no torch / torch_npu in $PY_REAL"
    elif ((!NPU_OK)); then
        would="exit $EXIT_NO_NPU: no usable NPU"
    else
        would="install, run the doctor and the tests"
    fi
    say "every check passed: exit $EXIT_OK (a real run here would $would)"
    exit "$EXIT_OK"
fi

printf '[npu-ci] + (cd %q && %s)\n' "$WORKDIR" "$(quote_cmd "${RUN_PYTEST[@]}")"
test_rc=0
(cd "$WORKDIR" && "${RUN_PYTEST[@]}") || test_rc=$?
say "JUnit XML: $JUNIT"
case "$test_rc" in
    0)
        say "tests passed on $SOC, torch $TORCH_VER, torch_npu $NPU_VER, CANN $CANN_VER"
        exit "$EXIT_OK"
        ;;
    1)
        say "tests FAILED on $SOC, torch $TORCH_VER, torch_npu $NPU_VER"
        exit "$EXIT_TESTS_FAILED"
        ;;
    5) refuse "$EXIT_PYTEST" "pytest selected no test" ;;
    *) refuse "$EXIT_PYTEST" "pytest exited $test_rc (interrupted, internal or usage error)" ;;
esac
