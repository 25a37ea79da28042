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
#
# The selection (ci/lib/aarch64-tests.txt) runs with the simulator's checks on: capture / replay,
# graph ownership, pool lifetime and reuse, stats, threads, large blocks, failure paths, the
# pageable-copy guard, conditional nodes (torch_npu >= 2.13) and the consumers
# (make_graphed_callables, npugraph_ex, TorchAir reduce-overhead, vllm sleep / wake and KV
# offload, task update). The leg runs on x86_64 under qemu-user emulation; it is not a run on a
# Kunpeng host.
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
#   [Fast path] in csrc/core/pin_pool_allocator.h: captures_underway_, pending_, a block's
#   state_); what they gate is decided under mutex_, and a thread reads them after the
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
