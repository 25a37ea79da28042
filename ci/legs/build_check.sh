#!/usr/bin/env bash
# The build check of one torch_npu build (issue #35; PINPOOL_PAIRS=LINE@BUILD, or =builds for
# every build of PINPOOL_NPU_BUILDS in ci/lib/pairs.sh: the build sweep). ci/legs/pair.sh runs it
# in the line's env with torch_npu switched to BUILD and the plugin built and installed there,
# instead of the suite:
#
#   bash ci/legs/build_check.sh LINE@BUILD [pytest args]
#
#   LINE@BUILD doctor   `python -m torch_npu_pinpool doctor` from an empty directory (the
#                       checkout's torch_npu_pinpool/ has no _C) with SIMCANN_LIB_DIR unset, as
#                       on an NPU: must exit 0 and print PASS
#   LINE@BUILD as-npu   ci/legs/as_npu.sh on every test (no simulator leg, so no record): the
#                       leg's summary for docs/test-results.md, red when doctor failed too
# x86_64 only. A build below the supported minimum (2.8@2.8.0) gets the refusal leg instead.
set -uo pipefail
# shellcheck source=ci/legs/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
pair="${1:?usage: bash ci/legs/build_check.sh LINE@BUILD [pytest args]}"
shift
activate "$pair" || { row "$pair doctor" FAIL - "env setup failed"; exit 1; }

banner "build check $pair: doctor"
t0=$SECONDS
tmp="$(mktemp -d)"
echo "+ python -m torch_npu_pinpool doctor   (SIMCANN_LIB_DIR unset, as on an NPU)"
out="$(cd "$tmp" && env -u SIMCANN_LIB_DIR python -m torch_npu_pinpool doctor 2>&1)"
rc=$?
rmdir "$tmp"
echo "$out"
build="${PINPOOL_NPU_BUILD:-?}" # exported by ci/sim-env.sh: the torch_npu installed
if [[ $rc == 0 && "$out" == *"self-test:"*PASS* ]]; then
    row "$pair doctor" PASS "$((SECONDS - t0))s" "torch_npu $build: doctor PASS"
else
    echo "FAILED: doctor did not print PASS with torch_npu $build (exit $rc)" >&2
    row "$pair doctor" FAIL "$((SECONDS - t0))s" "torch_npu $build: doctor FAILED (exit $rc)"
    [[ $rc != 0 ]] || rc=1
fi
bash ci/legs/as_npu.sh "$pair" --doctor-rc "$rc" "$@"
