# shellcheck shell=bash
# The torch / torch_npu pairs the test environments are built for. Sourced by ci/lib/envsetup.sh
# and ci/legs/common.sh (ci/test.sh and its legs). One place to change a version.
#
#   PAIR_TORCH     pip requirement for torch
#   PAIR_NPU       pip requirement for torch_npu
#   PAIR_NPU_NODEPS 1 = install torch_npu with --no-deps (its wheel pins torch==X+cpu, which
#                  PyPI does not have for Linux x86_64; we pair it with PyPI's CUDA build)
#   PAIR_NOTE      what the user is about to wait for
#   PAIR_REFUSED   1 = below the supported range (a line, or a build: 2.8@2.8.0): the leg checks
#                  that the plugin refuses to build and to activate there (test/unsupported/),
#                  instead of the suite or the build check
#   PAIR_LINE      the torch line (2.10): the env's name; the same as the pair unless a build is named
#   PAIR_BUILD     the torch_npu build a `LINE@BUILD` pair names (2.10.0.post4), else empty
#   PAIR_CANN      the CANN version the simulated runtime reports in that build's env
#                  (SIMCANN_CANN_VERSION), for a build that does not import without one; else empty
#
# A pair may name one torch_npu build of its line: `2.10@2.10.0.post4`. It uses the line's env
# (its torch and test dependencies) with only torch_npu switched to that build (ci/lib/envsetup.sh
# switches it back for a plain `2.10`), and ci/test.sh runs the build check on it: the plugin
# built, `python -m torch_npu_pinpool doctor`, the as-a-real-NPU selection.
PINPOOL_ALL_PAIRS="2.14 2.13 2.12 2.11 2.10 2.9 2.8 2.7"
# Required in every `bash ci/test.sh` run: the newest release and vllm-ascend's pin (2.10).
PINPOOL_CI_PAIRS="2.14 2.10"
# The pair whose leg also runs torch_npu's registered-memory path (pinned_mem_register, CANN 8.5):
# the newest release, which has it.
PINPOOL_REGISTER_PAIR="2.14"
# The aarch64 leg's pairs (PINPOOL_ARCH=aarch64 bash ci/test.sh): vllm-ascend's pin and the
# newest release (PyPI's aarch64 torch 2.14 is a CUDA 13 build: qemu-user >= 10 and the
# cross-built ci/lib/cudafix: ci/lib/aarch64.sh, ci/lib/envsetup.sh).
PINPOOL_AARCH64_PAIRS="2.10 2.14"
# The next torch release, out before its torch_npu (issue #35): ci/test.sh compiles every csrc/
# unit against its headers and the newest torch_npu's (ci/lib/compile_check.sh) when the header
# cache exists (`bash ci/lib/compile_check.sh fetch 2.15.0` makes it). When torch_npu 2.15 ships:
# a `2.15)` entry below, 2.15 first in PINPOOL_ALL_PAIRS, MAX_TORCH_NPU in
# torch_npu_pinpool/_version.py, and this moves to the release after.
# PINPOOL_NEXT_TORCH= (set and empty) skips the check.
PINPOOL_NEXT_TORCH="${PINPOOL_NEXT_TORCH-2.15.0}"
# The build sweep (PINPOOL_PAIRS=builds bash ci/test.sh; .github/workflows/builds.yml, weekly):
# every torch_npu build on PyPI from 2.8.0 (below the supported minimum: its refusal) to the
# newest supported release (`pip index versions torch-npu`; before issue #50 only the builds a
# vllm-ascend release pins, every post of 2.10 and the newest post of 2.11 / 2.12). Each line's
# default build above is among them: the sweep runs the as-a-real-NPU leg on every test there,
# the required pairs' own as-NPU legs only on the tests whose path differs (ci/legs/as_npu.sh).
# Oldest first within a line: where its builds ask for different torch releases (torch_npu
# 2.9.0 for torch 2.9.0, 2.9.1 for 2.9.1), the env switches torch as seldom as that order allows.
PINPOOL_NPU_BUILDS="2.8@2.8.0 2.8@2.8.0.post2 2.8@2.8.0.post4 2.8@2.8.0.post5
2.9@2.9.0 2.9@2.9.0.post2 2.9@2.9.0.post4 2.9@2.9.0.post6 2.9@2.9.0.post8 2.9@2.9.0.post9 2.9@2.9.1
2.10@2.10.0 2.10@2.10.0.post2 2.10@2.10.0.post4 2.10@2.10.0.post6 2.10@2.10.0.post7
2.11@2.11.0 2.11@2.11.0.post2 2.11@2.11.0.post3 2.12@2.12.0 2.12@2.12.0.post2 2.12@2.12.0.post3
2.13@2.13.0 2.14@2.14.0"

pinpool_pair_spec() {
    PAIR_REFUSED=0
    PAIR_CANN=""
    PAIR_LINE="${1%%@*}"
    PAIR_BUILD=""
    [[ "$1" != *@* ]] || PAIR_BUILD="${1#*@}"
    case "$PAIR_LINE" in
        2.14)
            # torch_npu 2.14.0 asks for torch==2.14.0.*, which PyPI's CUDA build (2.14.0+cu130
            # inside, "2.14.0" on the index) satisfies: no --no-deps needed.
            PAIR_TORCH="torch==2.14.0"
            PAIR_NPU="torch_npu==2.14.0"
            PAIR_NPU_NODEPS=0
            PAIR_NOTE="torch 2.14.0 (PyPI's CUDA build, ~2.9 GB download) + torch_npu 2.14.0"
            ;;
        2.13)
            # The CPU build lies on disk (/opt/wheels, pip's find-links): `torch==2.13.0`
            # resolves to 2.13.0+cpu there, and torch_npu 2.13.0 asks for torch==2.13.0.*.
            PAIR_TORCH="torch==2.13.0"
            PAIR_NPU="torch_npu==2.13.0"
            PAIR_NPU_NODEPS=0
            PAIR_NOTE="torch 2.13.0 (CPU build) + torch_npu 2.13.0"
            ;;
        2.12)
            PAIR_TORCH="torch==2.12.0"
            PAIR_NPU="torch_npu==2.12.0.post3"
            PAIR_NPU_NODEPS=1
            PAIR_NOTE="torch 2.12.0 (PyPI's CUDA build, ~3 GB download) + torch_npu 2.12.0.post3"
            ;;
        2.11)
            PAIR_TORCH="torch==2.11.0"
            PAIR_NPU="torch_npu==2.11.0.post3"
            PAIR_NPU_NODEPS=1
            PAIR_NOTE="torch 2.11.0 (PyPI's CUDA build, ~3 GB download) + torch_npu 2.11.0.post3"
            ;;
        2.10)
            PAIR_TORCH="torch==2.10.0"
            PAIR_NPU="torch_npu==2.10.0.post7"
            PAIR_NPU_NODEPS=1
            PAIR_NOTE="torch 2.10.0 (PyPI's CUDA build, ~3 GB download) + torch_npu 2.10.0.post7"
            ;;
        2.9)
            PAIR_TORCH="torch==2.9.1"
            PAIR_NPU="torch_npu==2.9.1"
            PAIR_NPU_NODEPS=1
            PAIR_NOTE="torch 2.9.1 (PyPI's CUDA build, ~3 GB download) + torch_npu 2.9.1"
            ;;
        2.8)
            PAIR_TORCH="torch==2.8.0"
            PAIR_NPU="torch_npu==2.8.0.post5"
            PAIR_NPU_NODEPS=1
            PAIR_NOTE="torch 2.8.0 (PyPI's CUDA build, ~3 GB download) + torch_npu 2.8.0.post5"
            ;;
        2.7)
            PAIR_TORCH="torch==2.7.1"
            PAIR_NPU="torch_npu==2.7.1.post11"
            PAIR_NPU_NODEPS=1
            PAIR_REFUSED=1
            PAIR_NOTE="torch 2.7.1 (PyPI's CUDA build, ~3 GB download) + torch_npu 2.7.1.post11 (unsupported: checks the refusal)"
            ;;
        *)
            return 1
            ;;
    esac
    if [[ -n "$PAIR_BUILD" ]]; then
        # A build of this line only (2.10@2.10.0.post4; not 2.10@2.11.0, not a line below the range).
        [[ "$PAIR_BUILD" =~ ^[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?$ &&
            "$PAIR_BUILD" == "$PAIR_LINE".* && "$PAIR_REFUSED" == 0 ]] || return 1
        PAIR_NPU="torch_npu==$PAIR_BUILD"
        PAIR_NOTE="$PAIR_NOTE (build check: torch_npu switched to $PAIR_BUILD)"
        # Below MIN_TORCH_NPU (torch_npu_pinpool/_version.py: 2.8.0.post2) inside a supported
        # line: its check is the refusal (test/unsupported/), as for the 2.7 line.
        [[ "$PAIR_BUILD" != 2.8.0 ]] || PAIR_REFUSED=1
    fi
    # A machine's runtime always reports its CANN version; the simulator reports none unless told
    # (simcann/README.md). torch_npu 2.8.0 does not import then: GetCANNInfo.cpp's
    # IsGteDriverVersion throws on the empty version in a thread, and the process terminates
    # (2.8.0.post2 and later builds tolerate it). Its env reports CANN 8.3.RC1, the release
    # torch_npu 2.8.0 was published for (below 8.5.0: pinned_mem_register stays off, as unset).
    [[ "$PAIR_BUILD" != 2.8.0 ]] || PAIR_CANN="8.3.RC1"
}
