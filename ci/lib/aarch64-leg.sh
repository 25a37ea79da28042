# shellcheck shell=bash
# The aarch64 leg's steps in ci/test.sh (PINPOOL_ARCH=aarch64), run in a pair's activated
# aarch64 env (`source ci/sim-env.sh PAIR` with PINPOOL_ARCH=aarch64: the emulated interpreter
# first on PATH, the simulator built for aarch64).
#
#   aarch64_check_torch            `import torch` runs under emulation (PyPI's aarch64 torch
#                                  >= 2.11 is a CUDA 13 build whose import faults under qemu
#                                  7.2: Note [qemu-user from bookworm-backports], aarch64.sh)
#   aarch64_check_extension        the installed torch_npu_pinpool/_C is an AArch64 ELF linked
#                                  against the env's (aarch64) torch_npu; prints what `file` says
#   aarch64_leg PYTEST_ARGS...     `python -m torch_npu_pinpool doctor` (must exit 0 with PASS),
#                                  then pytest on ci/lib/aarch64-tests.txt; sets `counts` to
#                                  the summary's text (tests run, time)

AARCH64_SELECTION=ci/lib/aarch64-tests.txt
# Scenario time-outs (test/conftest.py) are for native speed; emulation is ~5-10x slower.
AARCH64_TIMEOUT_SCALE=6

aarch64_check_torch() {
    local out rc err
    err="$(mktemp)"
    # stderr only on failure: torch's oneDNN notes that the guest has no MIDR_EL1 sysfs entry.
    out="$(cd / && python -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>"$err")"
    rc=$?
    if [[ $rc != 0 ]]; then
        tail -n 5 "$err"
        rm -f "$err"
        echo "FAILED: 'import torch' exits $rc under qemu-user ($(qemu-aarch64-static --version | head -n 1))."
        echo "  Known for PyPI's aarch64 torch >= 2.11 (CUDA 13 builds) under qemu 7.2: SIGSEGV in"
        echo "  cpuinfo_arm_linux_init (libtorch.so), which parses the x86 host's /proc/cpuinfo that"
        echo "  qemu 7.2 passes through. ci/lib/aarch64.sh installs qemu >= 10 and registers the"
        echo "  binfmt handler with it (Note [qemu-user from bookworm-backports]): check"
        echo "  /proc/sys/fs/binfmt_misc/qemu-aarch64. The plugin cannot be built or run here."
        return 1
    fi
    rm -f "$err"
    echo "torch under emulation: $out"
}

aarch64_check_extension() {
    local so machine
    so="$(ls "$VIRTUAL_ENV"/lib/python3*/site-packages/torch_npu_pinpool/_C*.so 2>/dev/null | head -n 1)"
    if [[ -z "$so" ]]; then
        echo "FAILED: no torch_npu_pinpool/_C*.so under $VIRTUAL_ENV"
        return 1
    fi
    command -v file >/dev/null && echo "installed extension: $so: $(file -b "$so")"
    machine="$(readelf -h "$so" | sed -n 's/^ *Machine: *//p')"
    if [[ "$machine" != AArch64 ]]; then
        echo "FAILED: $so is built for '$machine', not AArch64"
        return 1
    fi
    echo "linked against: $(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    echo "runpath: $(readelf -d "$so" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
}

aarch64_leg() {
    local out rc sel tmp summary_line t
    counts=""
    # From an empty directory: the checkout's torch_npu_pinpool/ (no _C) would shadow the install.
    tmp="$(mktemp -d)"
    t=$SECONDS
    echo "+ python -m torch_npu_pinpool doctor   (emulated)"
    out="$(cd "$tmp" && python -m torch_npu_pinpool doctor 2>&1)"
    rc=$?
    echo "$out"
    rmdir "$tmp"
    if [[ $rc != 0 || "$out" != *"self-test:"*PASS* ]]; then
        echo "FAILED: doctor did not print PASS under emulation (exit $rc)"
        counts="doctor FAILED"
        return 1
    fi
    local doctor_s=$((SECONDS - t))
    mapfile -t sel < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$AARCH64_SELECTION" | grep -v '^$')
    out="$(mktemp)"
    echo "+ python -m pytest (${#sel[@]} node ids from $AARCH64_SELECTION) $*"
    PINPOOL_TIMEOUT_SCALE="$AARCH64_TIMEOUT_SCALE" python -m pytest "${sel[@]}" "$@" | tee "$out"
    rc=${PIPESTATUS[0]}
    summary_line="$(grep -E '^=+ .* in [0-9.]+s' "$out" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')"
    rm -f "$out"
    counts="doctor PASS (${doctor_s}s); selection: ${summary_line:-no pytest summary (exit $rc)}"
    return "$rc"
}
