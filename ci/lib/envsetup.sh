#!/usr/bin/env bash
# Create or reuse the test environment for one torch / torch_npu pair and print the exports
# that activate it (stdout: `export NAME=value` lines, and an `unset` of the aarch64 variables
# when the shell had an aarch64 env; everything else goes to stderr).
#
#   bash ci/lib/envsetup.sh PAIR
#   bash ci/lib/envsetup.sh PAIR --cached   # exit 0 if PAIR's venv is complete (nothing to
#                                           # download), 1 if not; changes nothing
#   bash ci/lib/envsetup.sh LINE@BUILD      # the line's env with torch_npu BUILD (2.10@2.10.0.post4)
#
# Used through `source ci/sim-env.sh PAIR` (or `bash ci/sim-env.sh PAIR --print`).
#
# Layout (ROOT = ${PINPOOL_ENV_ROOT:-$HOME/.cache/torch_npu_pinpool/envs}):
#   ROOT/PAIR/                  the venv
#   ROOT/PAIR/.pinpool-stamp    written last: what was installed. A venv without a matching
#                               stamp (an interrupted or older install) is deleted and redone.
#   ROOT/PAIR/simcann/HASH/lib/ the simulated CANN runtime built from the simcann sources
#                               whose hash is HASH, for this venv's python
#                               (PINPOOL_SIM_ROOT=DIR: under DIR/HASH/ instead, e.g. to keep a
#                               branch's simulator builds out of an env that others share)
#   ROOT/PAIR.log               the log of the last install / build step
#   ROOT/PAIR.lock              flock: two shells setting up the same pair wait for each other
#
# A named build (LINE@BUILD, ci/lib/pairs.sh) uses the env of its LINE: the venv is created (or
# reused) as for LINE, then torch_npu alone is switched to BUILD (`pip install --no-deps
# --force-reinstall torch_npu==BUILD`), and torch too when BUILD asks for another torch release
# than the line's (torch_npu 2.9.0 asks for torch 2.9.0, the line's 2.9.1 for 2.9.1). A later
# plain LINE switches both back. The switch happens under the env's lock, but a test
# session already running in that env sees its torch_npu replaced: sweep builds in an env root
# nobody else is using (PINPOOL_ENV_ROOT). The simulated runtime is rebuilt per torch_npu build
# (its hash covers the build: build.sh reads the names that build needs).
#
# PINPOOL_ARCH=aarch64 (default x86_64): the pair's aarch64 env, run under qemu-user emulation
# (ci/lib/aarch64.sh sets up the machine and an arm64 Debian sysroot with CPython 3.11, as root):
#   ROOT/aarch64/sysroot/       the sysroot (shared by the pairs; stamped)
#   ROOT/aarch64/PAIR/ ...      as above: a venv made by the emulated interpreter, the pair's
#                               aarch64 wheels installed by its (emulated) pip; the simulator is
#                               built for aarch64 with the cross compiler
# Its exports add QEMU_LD_PREFIX (the sysroot), PINPOOL_ARCH, and CC / CXX / CPPFLAGS for the
# cross compiler and the sysroot's CPython headers, so that `pip install .` in that env builds an
# aarch64 extension (the emulated pip runs the build; the compiler runs natively).
set -euo pipefail

PAIR="${1:-}"
QUERY="${2:-}"
if [[ -n "$QUERY" && "$QUERY" != --cached ]]; then
    echo "usage: bash ci/lib/envsetup.sh PAIR [--cached]" >&2
    exit 2
fi
# Never let `import torch` load torch_npu by itself (torch's device-backend autoload): without
# the simulated runtime on LD_LIBRARY_PATH that fails.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=ci/lib/pairs.sh
. "$HERE/pairs.sh"

say() { printf '[sim-env %s] %s\n' "$PAIR" "$*" >&2; }
die() {
    # $1: the step that failed, $2: what to do. Prints the log tail when there is one.
    printf '\n[sim-env %s] FAILED: %s\n' "$PAIR" "$1" >&2
    if [[ -n "${LOG:-}" && -s "$LOG" ]]; then
        printf '[sim-env %s] --- last lines of %s ---\n' "$PAIR" "$LOG" >&2
        tail -n 40 "$LOG" >&2
        printf '[sim-env %s] --- end of log ---\n' "$PAIR" >&2
    fi
    printf '[sim-env %s] what to do: %s\n' "$PAIR" "$2" >&2
    exit 1
}

if ! pinpool_pair_spec "$PAIR"; then
    printf '[sim-env] unknown pair %q: choose one of %s, or LINE@BUILD with a torch_npu build of that line (2.10@2.10.0.post4)\n' \
        "$PAIR" "$PINPOOL_ALL_PAIRS" >&2
    exit 2
fi
LINE="$PAIR_LINE"
WANT_NPU="${PAIR_NPU#torch_npu==}" # the torch_npu build the env must have when this script ends
WANT_CANN="$PAIR_CANN" # the CANN version the simulator reports for that build (ci/lib/pairs.sh)
# The venv itself is the line's: created with (and stamped for) the line's own build.
pinpool_pair_spec "$LINE"

ROOT="${PINPOOL_ENV_ROOT:-$HOME/.cache/torch_npu_pinpool/envs}"
ARCH="${PINPOOL_ARCH:-x86_64}"
ENVS="$ROOT" # where this architecture's envs live
case "$ARCH" in
    x86_64) ;;
    aarch64)
        # shellcheck source=ci/lib/aarch64.sh
        . "$HERE/aarch64.sh"
        ENVS="$ROOT/aarch64"
        SYSROOT="$ENVS/sysroot"
        # torch_npu's aarch64 wheels pin torch==X (no +cpu), which PyPI's aarch64 torch meets: no
        # --no-deps. That torch is the CPU build up to 2.10; from 2.11 PyPI's aarch64 torch is a
        # CUDA 13 build (nvidia-*-cu13 wheels, ~3 GB), which needs the CUDA-build workaround
        # (ci/lib/cudafix, cross-built) as on x86.
        PAIR_NPU_NODEPS=0
        PAIR_NOTE="$PAIR_TORCH + $PAIR_NPU: PyPI's aarch64 wheels, installed by the emulated pip (torch >= 2.11 there is a CUDA 13 build: ~3 GB)"
        ;;
    *)
        printf '[sim-env] PINPOOL_ARCH=%q: choose x86_64 (the default) or aarch64\n' "$ARCH" >&2
        exit 2
        ;;
esac
VENV="$ENVS/$LINE"
LOG="$ENVS/$LINE.log"
BASE_PY="${PINPOOL_PYTHON:-python3}"
mkdir -p "$ENVS" || die "creating $ENVS" "set PINPOOL_ENV_ROOT to a writable directory"

# Test dependencies installed into every env. ruff lints in ci/test.sh; matplotlib plots in bench/;
# protobuf: `import torchair` (TorchAir, inside torch_npu) loads its GE IR definitions with it.
TEST_DEPS=(pytest pytest-xdist numpy pyyaml setuptools wheel ninja matplotlib ruff protobuf)
# aarch64: no lint or plots there (ci/test.sh lints on x86; the isolated build gets its own ninja).
[[ "$ARCH" == aarch64 ]] && TEST_DEPS=(pytest pytest-xdist numpy pyyaml setuptools wheel protobuf)
# Bump when the recipe below changes: every cached env is then rebuilt.
RECIPE=3

# The stamp's part before " deps=" (Python, torch, torch_npu, recipe) decides whether the venv
# is reused; a change of TEST_DEPS alone installs them into it (seconds, not a 3 GB rebuild).
venv_is_complete() {
    [[ -f "$VENV/.pinpool-stamp" && "$(cat "$VENV/.pinpool-stamp")" == "$WANT_STAMP" &&
        -x "$VENV/bin/python" ]]
}
venv_base_is_complete() {
    [[ -f "$VENV/.pinpool-stamp" && "$(cat "$VENV/.pinpool-stamp")" == "${WANT_STAMP%% deps=*} deps="* &&
        -x "$VENV/bin/python" ]]
}
if [[ "$ARCH" == aarch64 ]]; then
    BASE_PY="$SYSROOT/$AARCH64_PYTHON"
    base_py_version="arm64-sysroot-$AARCH64_SYSROOT_RECIPE" # the sysroot's CPython 3.11
else
    base_py_version="$("$BASE_PY" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)" ||
        die "running $BASE_PY" "install Python 3 or point PINPOOL_PYTHON at one"
fi
WANT_STAMP="recipe=$RECIPE python=$base_py_version torch=$PAIR_TORCH npu=$PAIR_NPU nodeps=$PAIR_NPU_NODEPS deps=${TEST_DEPS[*]}"

if [[ "$QUERY" == --cached ]]; then
    [[ "$ARCH" != aarch64 ]] || aarch64_sysroot_is_complete "$SYSROOT" || exit 1
    venv_base_is_complete # missing test deps are installed on use, without a download of torch
    exit
fi

exec 9>"$ENVS/$LINE.lock"
if ! flock -n 9; then
    say "another process is setting up this env; waiting for it"
    flock 9
fi

run_logged() {
    # run_logged STEP WHATTODO CMD...: append CMD's output to the log; die on failure.
    local step="$1" todo="$2"
    shift 2
    printf '\n$ %s\n' "$*" >>"$LOG"
    "$@" >>"$LOG" 2>&1 || die "$step" "$todo"
}

# --- 0. aarch64: the machine (qemu-user, cross compiler, binfmt handler) and the sysroot ------
PIP_OPTS=(--disable-pip-version-check --progress-bar off)
if [[ "$ARCH" == aarch64 ]]; then
    aarch64_machine_setup
    aarch64_sysroot "$SYSROOT"
    export QEMU_LD_PREFIX="$SYSROOT"
    PIP_OPTS+=(--no-compile) # aarch64_byte_compile does it natively
fi

# torch CUDA-build import workaround (test environment only; see ci/lib/cudafix/README.md):
# PyPI's torch for Linux x86_64, and for aarch64 from 2.11 on, is a CUDA build. Built against the
# installed torch's headers: run again whenever torch changes.
install_cudafix() {
    local cxx=()
    # aarch64: the workaround's library is built by the cross compiler (the emulated install.py
    # runs it natively) and probed under emulation, as the plugin is.
    [[ "$ARCH" != aarch64 ]] || cxx=(CXX="$AARCH64_TRIPLET-g++")
    say "checking whether this torch is a CUDA build (needs the torch_npu import workaround)"
    run_logged "installing the CUDA-build import workaround" \
        "see ci/lib/cudafix/README.md; the log shows the compiler / probe output" \
        env "${cxx[@]}" "$PY" "$HERE/cudafix/install.py" --venv "$VENV"
    [[ "$ARCH" != aarch64 || ! -d "$VENV/lib/python3.11/site-packages/_pinpool_testenv" ]] ||
        aarch64_byte_compile "$VENV/lib/python3.11/site-packages/_pinpool_testenv"
}

# --- 1. the venv ---------------------------------------------------------------------------
if venv_is_complete; then
    : # reuse, quietly
elif venv_base_is_complete; then
    say "installing the test dependencies into the existing env: ${TEST_DEPS[*]}"
    run_logged "installing test dependencies" "check the network / PyPI access and rerun" \
        "$VENV/bin/python" -m pip install "${PIP_OPTS[@]}" \
        -c "$VENV/.torch-constraint.txt" "${TEST_DEPS[@]}"
    [[ "$ARCH" != aarch64 ]] || aarch64_byte_compile "$VENV/lib/python3.11/site-packages"
    echo "$WANT_STAMP" >"$VENV/.pinpool-stamp"
else
    if [[ -e "$VENV" ]]; then
        say "existing env at $VENV is incomplete or from another recipe: recreating it"
        rm -rf "$VENV"
    fi
    start=$SECONDS
    : >"$LOG"
    say "creating $VENV: $PAIR_NOTE (log: $LOG)"
    run_logged "creating the venv" "check that '$BASE_PY -m venv' works (Debian: apt-get install python3-venv)" \
        "$BASE_PY" -m venv "$VENV"
    PY="$VENV/bin/python"
    [[ "$ARCH" != aarch64 ]] || aarch64_check_runs "$SYSROOT" "$PY"
    PIP=("$PY" -m pip install "${PIP_OPTS[@]}")
    fix_net="check the network / PyPI access and rerun; the half-made env is redone next time"
    say "installing $PAIR_TORCH"
    run_logged "installing $PAIR_TORCH" "$fix_net" "${PIP[@]}" "$PAIR_TORCH"
    say "installing $PAIR_NPU"
    if [[ "$PAIR_NPU_NODEPS" == 1 ]]; then
        # torch_npu's wheel pins torch==X+cpu; PyPI has only the CUDA build of torch X for
        # Linux x86_64. Install it without its dependencies, then the ones it needs besides torch.
        run_logged "installing $PAIR_NPU (--no-deps)" "$fix_net" "${PIP[@]}" --no-deps "$PAIR_NPU"
        run_logged "installing torch_npu's dependencies" "$fix_net" "${PIP[@]}" numpy pyyaml
    else
        run_logged "installing $PAIR_NPU" "$fix_net" "${PIP[@]}" "$PAIR_NPU"
    fi
    say "installing test dependencies: ${TEST_DEPS[*]}"
    # Keep the torch that is installed: pass it as a constraint so nothing replaces it.
    "$PY" -c 'import importlib.metadata as m; print("torch==" + m.version("torch"))' \
        >"$VENV/.torch-constraint.txt" 2>>"$LOG" || die "reading the installed torch version" "see the log"
    run_logged "installing test dependencies" "$fix_net" \
        "${PIP[@]}" -c "$VENV/.torch-constraint.txt" "${TEST_DEPS[@]}"

    if [[ "$ARCH" == aarch64 ]]; then
        say "byte-compiling the env with the host's CPython 3.11 (emulated, it takes minutes)"
        aarch64_byte_compile "$VENV/lib/python3.11/site-packages"
    fi
    install_cudafix

    echo "$WANT_STAMP" >"$VENV/.pinpool-stamp"
    say "env ready in $((SECONDS - start)) s"
fi
PY="$VENV/bin/python"

# --- 1b. the torch_npu build ----------------------------------------------------------------
# Read from the dist-info directory's name (no interpreter: cheap under emulation too).
installed_npu() {
    local d
    d="$(compgen -G "$VENV/lib/python3*/site-packages/torch_npu-*.dist-info" | head -n 1)"
    d="${d##*/torch_npu-}"
    printf '%s' "${d%.dist-info}"
}
# The simulated runtime plays the CANN of the line's own build for every build of the line, as a
# machine's CANN is newer than the ACL headers an older build shipped (torch_npu 2.8.0's lack the
# capture error codes, aclrtHostFunc, ...): the line build's ACL headers are kept in the env
# before a switch (downloaded if that build is not installed) and the simulator is built against
# them (simcann/build.sh --acl-include).
LINE_NPU="${PAIR_NPU#torch_npu==}"
LINE_ACL="$VENV/acl-include-$LINE_NPU"
keep_line_acl_headers() {
    local src tmp=""
    src="$(compgen -G "$VENV/lib/python3*/site-packages/torch_npu" | head -n 1)/include"
    [[ ! -f "$LINE_ACL/acl/acl.h" ]] || return 0
    if [[ "$(installed_npu)" != "$LINE_NPU" ]]; then
        tmp="$(mktemp -d)"
        run_logged "downloading torch_npu==$LINE_NPU for its ACL headers" "$fix_net" \
            "$PY" -m pip download --disable-pip-version-check --progress-bar off --no-deps \
            -d "$tmp" "torch_npu==$LINE_NPU"
        run_logged "unpacking torch_npu==$LINE_NPU's headers" "see the log" \
            "$PY" -m zipfile -e "$(compgen -G "$tmp/torch_npu-*.whl" | head -n 1)" "$tmp/whl"
        src="$tmp/whl/torch_npu/include"
    fi
    [[ -f "$src/acl/acl.h" ]] || src="$src/third_party/acl/inc"
    [[ -f "$src/acl/acl.h" ]] || die "keeping torch_npu $LINE_NPU's ACL headers" "no acl/acl.h in $src"
    rm -rf "$LINE_ACL.new" && cp -r "$src" "$LINE_ACL.new" &&
        mv "$LINE_ACL.new" "$LINE_ACL" || die "copying $src" "check the disk"
    [[ -z "$tmp" ]] || rm -rf "$tmp"
}
fix_net="check the network / PyPI access and rerun"
have_npu="$(installed_npu)"
if [[ "$have_npu" != "$WANT_NPU" ]]; then
    keep_line_acl_headers
    say "switching torch_npu ${have_npu:-(none)} -> $WANT_NPU in $VENV"
    run_logged "switching to torch_npu==$WANT_NPU" \
        "check that torch_npu $WANT_NPU exists for this Python on the index (pip index versions torch_npu) and rerun" \
        "$PY" -m pip install "${PIP_OPTS[@]}" --no-deps --force-reinstall "torch_npu==$WANT_NPU"
    [[ "$ARCH" != aarch64 ]] || aarch64_byte_compile "$VENV/lib/python3.11/site-packages/torch_npu"
    have_npu="$(installed_npu)"
    [[ "$have_npu" == "$WANT_NPU" ]] ||
        die "switching to torch_npu==$WANT_NPU" "pip left torch_npu ${have_npu:-(none)} installed; see the log"
fi

# A build asks for its own torch release (its METADATA: `torch==2.9.0+cpu` for torch_npu 2.9.0,
# `torch==2.9.1+cpu` for the line's 2.9.1): the env gets that torch (PyPI's build of it), as a
# user of that build has it, and the line's torch back with the line's build. Read without an
# interpreter, as above; the local part (+cpu) and a trailing `.*` are dropped.
npu_wants_torch() {
    local m
    m="$(compgen -G "$VENV/lib/python3*/site-packages/torch_npu-*.dist-info/METADATA" | head -n 1)"
    [[ -z "$m" ]] || sed -n 's/^Requires-Dist: *torch *== *\([0-9][0-9.]*[0-9]\).*/\1/p' "$m" | head -n 1
}
installed_torch() {
    local d
    d="$(compgen -G "$VENV/lib/python3*/site-packages/torch-*.dist-info" | head -n 1)"
    d="${d##*/torch-}"
    d="${d%.dist-info}"
    printf '%s' "${d%%+*}"
}
want_torch="$(npu_wants_torch)"
have_torch="$(installed_torch)"
if [[ -n "$want_torch" && "$want_torch" != "$have_torch" ]]; then
    say "switching torch ${have_torch:-(none)} -> $want_torch in $VENV (torch_npu $have_npu asks for it)"
    run_logged "switching to torch==$want_torch" \
        "check the network / PyPI access (pip index versions torch) and rerun" \
        "$PY" -m pip install "${PIP_OPTS[@]}" "torch==$want_torch"
    [[ "$ARCH" != aarch64 ]] || aarch64_byte_compile "$VENV/lib/python3.11/site-packages/torch"
    have_torch="$(installed_torch)"
    [[ "$have_torch" == "$want_torch" ]] ||
        die "switching to torch==$want_torch" "pip left torch ${have_torch:-(none)} installed; see the log"
    echo "torch==$want_torch" >"$VENV/.torch-constraint.txt"
    install_cudafix
fi

# --- 2. the simulated CANN runtime ------------------------------------------------------------
# One build per source hash, under ROOT/PAIR/simcann/HASH/: checkouts with different simulator
# sources share the env without rebuilding in turn, and a build never replaces a lib dir that a
# running test session still has on its LD_LIBRARY_PATH. The least recently used ones beyond
# the newest $SIM_KEEP are deleted.
SIM_SRC="$REPO/simcann"
SIM_BASE="${PINPOOL_SIM_ROOT:-$VENV/simcann}"
SIM_KEEP=6
SIM_CROSS=()
[[ "$ARCH" != aarch64 ]] || SIM_CROSS=(--cross "$AARCH64_TRIPLET-")
if [[ ! -f "$SIM_SRC/build.sh" ]]; then
    LOG= die "building the simulated CANN runtime" \
        "$SIM_SRC/build.sh does not exist in this checkout yet (the simulator is not on this branch)"
fi
sim_acl=() # a build of the line other than its own: the line's ACL headers (above)
if [[ "$have_npu" != "$LINE_NPU" ]]; then
    keep_line_acl_headers
    sim_acl=(--acl-include "$LINE_ACL")
fi
# Hash every file under simcann except its tests, docs, build output and caches, plus the
# python it is built for, so an edited source or a different interpreter rebuilds it.
sim_hash="$(
    cd "$SIM_SRC" &&
        { find . -type f ! -path './tests/*' ! -path '*/build/*' ! -path '*/__pycache__/*' \
            ! -name '*.pyc' ! -name '*.o' ! -name '*.so' ! -name '*.md' -print0 |
            LC_ALL=C sort -z | xargs -0 sha256sum
        echo "python=$PY $(readlink -f "$PY") torch_npu=$have_npu acl=${sim_acl[*]}"; } | sha256sum | cut -c1-16
)"
SIM_DIR="$SIM_BASE/$sim_hash"
if [[ ! -f "$SIM_DIR/.stamp" ]]; then
    start=$SECONDS
    say "building the simulated CANN runtime into $SIM_DIR (log: $LOG)"
    mkdir -p "$SIM_BASE"
    rm -rf "$SIM_DIR.new"
    printf '\n=== simulator build %s (%s) ===\n' "$(date -u +%FT%TZ)" "$SIM_SRC" >>"$LOG"
    run_logged "building the simulated CANN runtime (simcann/build.sh)" \
        "read the log above; rerun 'bash simcann/build.sh --python $PY --out /tmp/simcann' by hand to debug" \
        bash "$SIM_SRC/build.sh" --python "$PY" --out "$SIM_DIR.new" "${SIM_CROSS[@]}" "${sim_acl[@]}"
    [[ -f "$SIM_DIR.new/lib/libascendcl.so" ]] ||
        die "building the simulated CANN runtime" "build.sh succeeded but left no $SIM_DIR.new/lib/libascendcl.so"
    echo "$sim_hash" >"$SIM_DIR.new/.stamp"
    rm -rf "$SIM_DIR"
    mv "$SIM_DIR.new" "$SIM_DIR"
    say "simulator built in $((SECONDS - start)) s"
fi
touch "$SIM_DIR/.stamp" # most recently used
# shellcheck disable=SC2012
ls -1dt "$SIM_BASE"/*/.stamp 2>/dev/null | tail -n +$((SIM_KEEP + 1)) | while read -r old; do
    d="$(dirname "$old")"
    [[ "$(basename "$d")" =~ ^[0-9a-f]{16}$ ]] && rm -rf "$d"
done

# --- 3. the exports ---------------------------------------------------------------------------
q() { printf '%q' "$1"; }
lib="$SIM_DIR/lib"
ld="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Drop other pairs' simulator dirs and a previous copy of ours, so re-sourcing does not pile up.
ld="$(printf '%s' "$ld" | tr ':' '\n' | awk -v root="$ROOT/" -v lib="$lib" \
    'NR==1 || (index($0, root) != 1 && $0 != lib && $0 != "")' | paste -sd: -)"
path="$VENV/bin:$(printf '%s' "$PATH" | tr ':' '\n' | awk -v root="$ROOT/" \
    'index($0, root) != 1 && $0 != ""' | paste -sd: -)"
echo "export PINPOOL_PAIR=$(q "$LINE")"
echo "export PINPOOL_NPU_BUILD=$(q "$have_npu")"
echo "export VIRTUAL_ENV=$(q "$VENV")"
echo "export PATH=$(q "$path")"
echo "export SIMCANN_LIB_DIR=$(q "$lib")"
echo "export LD_LIBRARY_PATH=$(q "$ld")"
echo "export TORCH_DEVICE_BACKEND_AUTOLOAD=0"
[[ -z "$WANT_CANN" ]] || echo "export SIMCANN_CANN_VERSION=$(q "$WANT_CANN")"
if [[ "$ARCH" == aarch64 ]]; then
    inc="$SYSROOT/usr/include"
    echo "export PINPOOL_ARCH=aarch64"
    echo "export QEMU_LD_PREFIX=$(q "$SYSROOT")"
    echo "export CC=$AARCH64_TRIPLET-gcc"
    echo "export CXX=$AARCH64_TRIPLET-g++"
    # The sysroot's CPython headers ahead of the guest path sysconfig names (/usr/include/...).
    echo "export CPPFLAGS=$(q "-I$inc/python3.11 -I$inc")"
elif [[ "${QEMU_LD_PREFIX:-}" == "$ROOT/aarch64/sysroot" ]]; then
    # This shell had an aarch64 env: drop what would cross-compile the x86 build.
    echo "unset QEMU_LD_PREFIX CC CXX CPPFLAGS PINPOOL_ARCH"
fi
