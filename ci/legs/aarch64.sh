#!/usr/bin/env bash
# The aarch64 leg of one pair (PINPOOL_ARCH=aarch64 bash ci/test.sh; pairs: PINPOOL_PAIRS, else
# PINPOOL_AARCH64_PAIRS in ci/lib/pairs.sh): the plugin built for aarch64 and a selection of the
# tests run under qemu-user emulation on this x86_64 machine (set up as root by ci/sim-env.sh:
# ci/lib/aarch64.sh). No lint (the x86 run does it), no as-NPU or registered-memory leg, no
# optional pairs, no build check (x86_64 only).
#
#   PINPOOL_ARCH=aarch64 bash ci/legs/aarch64.sh PAIR [pytest args]
#
# "PAIR aarch64 setup": the pair's aarch64 env (`source ci/sim-env.sh PAIR` with
# PINPOOL_ARCH=aarch64: the emulated interpreter first on PATH, the simulator built for aarch64);
# `import torch` must run under emulation (PyPI's aarch64 torch >= 2.11 is a CUDA 13 build whose
# import faults under qemu 7.2: Note [qemu-user from bookworm-backports], ci/lib/aarch64.sh); the
# plugin built by the emulated pip with the cross compiler; the installed _C must be an AArch64
# ELF linked against the env's (aarch64) torch_npu.
# "PAIR aarch64": `python -m torch_npu_pinpool doctor` (must exit 0 with PASS), then pytest on
# ci/lib/aarch64-tests.txt with the simulator's checks on, scenario time-outs scaled by 6
# (PINPOOL_TIMEOUT_SCALE: emulation is ~5-10x slower). A pair below the supported range gets
# ci/legs/refusal.sh under emulation instead.
#
# The selection (ci/lib/aarch64-tests.txt): capture / replay, graph ownership, pool lifetime and
# reuse, stats, threads, large blocks, failure paths, the pageable-copy guard, conditional nodes
# (torch_npu >= 2.13) and the consumers (make_graphed_callables, npugraph_ex, TorchAir
# reduce-overhead, vllm sleep / wake and KV offload, task update). The leg runs on x86_64 under
# qemu-user emulation; it is not a run on a Kunpeng host.
#
# What the leg shows: the plugin compiles for aarch64 against the aarch64 wheels (another
# compiler target, their own bundled libraries), `pip install .` works there, the extension loads
# and registers over aarch64 torch_npu, and the aarch64 machine code of the plugin, torch,
# torch_npu and the simulator passes the selection. What it does not:
# - Memory ordering: qemu's TCG does not reproduce aarch64's weak ordering on an x86 host. It adds
#   barriers only where the guest needs stronger ordering than the host gives; an aarch64 guest on
#   x86 gets none, so the emulated code runs with x86's (TSO) ordering, and a race that needs the
#   hardware to reorder loads or stores cannot show here. (qemu also reports a gap the other way:
#   a store-release followed by a load-acquire is not kept ordered on x86 hosts, gitlab
#   qemu-project/qemu issue 4872.) Compile-time reordering is exercised: the cross compiler's code
#   for memory_order_relaxed is what runs. The plugin's relaxed atomics are fast-path hints (Note
#   [Fast path] in csrc/core/pin_pool_allocator.h: the registry's captures_underway_, the fence
#   queue's pending_, a block's state_); what they gate is decided under a mutex, and a thread reads them after the
#   synchronisation that gave it the tensor (its own program order, or a lock / the GIL). That is
#   sound under the C++ memory model on any hardware, but no run here checks it on weakly ordered
#   hardware.
# - Page size: the plugin reads it at run time (sysconf(_SC_PAGESIZE), rounding large blocks:
#   csrc/core/large_blocks.cpp); the simulator hands out pinned memory in whole kernel pages (at
#   least 4 KiB) and keeps CANN's documented 4 KiB alignment rule for aclrtHostRegister*; the
#   large-block tests use 48 MiB (a multiple of 64 KiB) and allow 2 % over; no other test assumes
#   a page size (the 4096s in scenarios are element counts, and the 4096 B in two docstrings
#   describe a native 2.13 block). qemu-user reports the host's 4 KiB pages, so the leg runs with
#   4 KiB. With QEMU_PAGESIZE=65536 (sysconf then says 65536 in the guest and qemu aligns its
#   mappings to it), doctor printed PASS and 5 tests passed on 2.10 (both large-block tests,
#   capture / replay, the graph-pool stats, vllm KV offload; commit 73c4ffa); the leg does not run
#   that way. The host kernel still pins and faults 4 KiB pages: what a 64 KiB-page kernel does to
#   pinning (aclrtMallocHost's granularity, how torch_npu rounds small pinned blocks, what a small
#   pinned tensor really costs) is not exercised.

set -uo pipefail
export PINPOOL_ARCH=aarch64
# shellcheck source=ci/legs/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
pair="${1:?usage: PINPOOL_ARCH=aarch64 bash ci/legs/aarch64.sh PAIR [pytest args]}"
shift
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
    # shellcheck disable=SC2012 # one glob, the first match
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

pinpool_pair_spec "$pair" || { row "$pair aarch64" FAIL - "unknown pair (ci/lib/pairs.sh)"; exit 2; }
banner "pair $pair (aarch64, emulated)"
t0=$SECONDS
setup_failed() {
    row "$pair aarch64 setup" FAIL "$((SECONDS - t0))s" "$1"
    exit 1
}
[[ -z "$PAIR_BUILD" || "$PAIR_REFUSED" == 1 ]] || setup_failed "a build check runs on x86_64 only"
activate "$pair" || setup_failed "env setup failed"
echo "python: $(command -v python); SIMCANN_LIB_DIR=$SIMCANN_LIB_DIR"
echo "emulated: QEMU_LD_PREFIX=$QEMU_LD_PREFIX; CXX=$CXX"
t_env=$((SECONDS - t0))
if [[ "$PAIR_REFUSED" == 1 ]]; then
    row "$pair aarch64 setup" PASS "${t_env}s" "env ${t_env}s (below the supported range)"
    exec bash ci/legs/refusal.sh "$pair" "$@"
fi
aarch64_check_torch || setup_failed "import torch fails under emulation"
install_plugin "$pair" || setup_failed "plugin build failed (log: $ENVS/$pair.plugin-build.log)"
aarch64_check_extension || setup_failed "the installed _C is not an AArch64 ELF"
row "$pair aarch64 setup" PASS "$((SECONDS - t0))s" "env ${t_env}s, plugin build $((SECONDS - t0 - t_env))s"

banner "pair $pair (aarch64): doctor and the selection"
t0=$SECONDS
# From an empty directory: the checkout's torch_npu_pinpool/ (no _C) would shadow the install.
tmp="$(mktemp -d)"
echo "+ python -m torch_npu_pinpool doctor   (emulated)"
out="$(cd "$tmp" && python -m torch_npu_pinpool doctor 2>&1)"
rc=$?
echo "$out"
rmdir "$tmp"
if [[ $rc != 0 || "$out" != *"self-test:"*PASS* ]]; then
    echo "FAILED: doctor did not print PASS under emulation (exit $rc)"
    row "$pair aarch64" FAIL "$((SECONDS - t0))s" "doctor FAILED"
    exit 1
fi
doctor_s=$((SECONDS - t0))
mapfile -t sel < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$AARCH64_SELECTION" | grep -v '^$')
mapfile -t opts < <(xdist)
junit="$ENVS/$pair.junit.xml"
rm -f "$junit"
out="$(mktemp)"
echo "+ python -m pytest (${#sel[@]} node ids from $AARCH64_SELECTION) ${opts[*]} $*"
PINPOOL_TIMEOUT_SCALE="$AARCH64_TIMEOUT_SCALE" python -m pytest "${sel[@]}" "${opts[@]}" \
    --junitxml="$junit" "$@" | tee "$out"
rc=${PIPESTATUS[0]}
line="$(grep -E '^=+ .* in [0-9.]+s' "$out" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')"
rm -f "$out"
record_leg "$pair aarch64" "$junit" "$rc"
detail="doctor PASS (${doctor_s}s); selection: ${line:-no pytest summary (exit $rc)}"
case $rc in
    0) row "$pair aarch64" PASS "$((SECONDS - t0))s" "$detail" ;;
    5) row "$pair aarch64" FAIL "$((SECONDS - t0))s" "no tests collected (pytest exit 5)" ;;
    *) row "$pair aarch64" FAIL "$((SECONDS - t0))s" "pytest exit $rc; $detail" ;;
esac
exit "$rc"
