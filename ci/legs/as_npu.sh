#!/usr/bin/env bash
# The "as a real NPU" leg (row and leg "PAIR as-npu"): the simulator stays the runtime underneath
# (through LD_LIBRARY_PATH) but its control API is hidden (SIMCANN_LIB_DIR unset), so the session
# takes the path an Ascend runner takes: `simulator` tests deselected, `npu` tests run. Same env,
# same installed plugin: no rebuild.
#
#   bash ci/legs/as_npu.sh PAIR [--record FILE] [--doctor-rc RC] [pytest args]
#   = env -u SIMCANN_LIB_DIR PINPOOL_TEST_AS_NPU=1 python -m pytest SELECTION -m "not simulator"
#       -n 2 --junitxml ROOT/PAIR.as-npu.xml [pytest args]
#
# SELECTION (written to ROOT/PAIR.as-npu.selection.txt): `python ci/lib/as_npu_selection.py
# --select FILE`, FILE being the simulator leg's record (ci/legs/simulator.sh): the tests that
# asked whether the simulator's API is visible (only their path can differ here: the rule and why
# it is sound are in that file), the files whose tests share results, the required floor. Without
# --record (a build check, ci/legs/build_check.sh) or without the file: every test of
# test/pinpool test/repo test/stress test/consumers (not test_packaging.py, which only builds
# sdists). PINPOOL_AS_NPU_COVERED=FILE (ci/test.sh sets it for its run): what an earlier pair's
# as-npu leg passed with is left out (--covered FILE, but for the required floor), and this leg's
# selection is added to FILE when it passes.
# Then `python ci/lib/as_npu_selection.py JUNIT` must pass: no test failed and every required
# feature ran (not checked when pytest arguments restrict the run: --partial; pytest exit 5,
# nothing selected, then passes too; without arguments it fails).
# --doctor-rc RC: the build check's doctor exit status; the leg fails with it.
set -uo pipefail
# shellcheck source=ci/legs/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
pair="${1:?usage: bash ci/legs/as_npu.sh PAIR [--record FILE] [--doctor-rc RC] [pytest args]}"
shift
record="" doctor_rc=0
while (($#)); do
    case "$1" in
        --record) record="$2" && shift 2 ;;
        --doctor-rc) doctor_rc="$2" && shift 2 ;;
        *) break ;;
    esac
done
partial=()
(($# == 0)) || partial=(--partial)
activate "$pair" || { row "$pair as-npu" FAIL - "env setup failed"; exit 1; }

banner "pair $pair as a real NPU (PINPOOL_TEST_AS_NPU=1, SIMCANN_LIB_DIR unset)"
t0=$SECONDS
junit="$ROOT/$pair.as-npu.xml"
selection="$ROOT/$pair.as-npu.selection.txt"
rm -f "$junit"
covered="" # only a leg with a record of its own (a build check runs every test)
[[ -z "$record" ]] || covered="${PINPOOL_AS_NPU_COVERED:-}"
python ci/lib/as_npu_selection.py --select ${record:+"$record"} ${covered:+--covered "$covered"} \
    >"$selection"
mapfile -t sel < <(grep -v '^#' "$selection")
what="$(sed -n 's/^# //p' "$selection")"
mapfile -t opts < <(xdist)
echo "selection: $what (${#sel[@]} pytest arguments: $selection)"
echo "+ env -u SIMCANN_LIB_DIR PINPOOL_TEST_AS_NPU=1 python -m pytest \$(grep -v '^#' $selection)" \
    "-m 'not simulator' ${opts[*]} $*"
env -u SIMCANN_LIB_DIR PINPOOL_TEST_AS_NPU=1 python -m pytest "${sel[@]}" -m "not simulator" \
    "${opts[@]}" --junitxml="$junit" "$@"
rc=$?
if [[ $rc == 5 && ${#partial[@]} != 0 ]]; then
    rc=0
    counts="the pytest arguments deselected every test"
else
    counts="$(python ci/lib/as_npu_selection.py "$junit" "${partial[@]}")" || [[ $rc != 0 ]] || rc=1
fi
echo "$counts"
[[ $doctor_rc == 0 ]] || rc=$doctor_rc
record_leg "$pair as-npu" "$junit" "$rc"
if [[ $rc == 0 ]]; then
    [[ -z "$covered" || ${#partial[@]} != 0 ]] || printf '%s\n' "${sel[@]}" >>"$covered"
    row "$pair as-npu" PASS "$((SECONDS - t0))s" "$counts; selection: $what"
else
    echo "FAILED: the as-a-real-NPU leg of pair $pair (exit $rc)" >&2
    row "$pair as-npu" FAIL "$((SECONDS - t0))s" "exit $rc: ${counts:-no JUnit XML}; selection: $what"
fi
exit "$rc"
