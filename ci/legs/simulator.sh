#!/usr/bin/env bash
# The simulator leg of a pair (row and leg "PAIR"): the whole suite on the simulated CANN runtime,
# the simulator's checks on, with the simulator's own tests (simcann/tests), in PAIR's env with
# the plugin installed (ci/legs/pair.sh does both):
#
#   bash ci/legs/simulator.sh PAIR [pytest args]
#   = PINPOOL_SIM_API_RECORD=ENVS/PAIR.sim-api.txt python -m pytest test/ simcann/tests -n 2 --junitxml ENVS/PAIR.junit.xml [pytest args]
#
# PINPOOL_XDIST: pytest-xdist workers (default 2; 0 = off). The record: every test during which a
# process asked simctl.available() (test/scenarios/_lib/simctl.py), and every `npu` test: the
# as-a-real-NPU leg's selection (ci/legs/as_npu.sh, ci/lib/as_npu_selection.py).
# pytest exit 5 (no test collected) is a failure.
set -uo pipefail
# shellcheck source=ci/legs/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
pair="${1:?usage: bash ci/legs/simulator.sh PAIR [pytest args]}"
shift
activate "$pair" || { row "$pair" FAIL - "env setup failed"; exit 1; }

banner "pair $pair: the simulator leg"
t0=$SECONDS
junit="$ENVS/$pair.junit.xml"
record="$ENVS/$pair.sim-api.txt"
rm -f "$junit"
: >"$record"
mapfile -t opts < <(xdist)
echo "+ PINPOOL_SIM_API_RECORD=$record python -m pytest test/ simcann/tests ${opts[*]} $*"
PINPOOL_SIM_API_RECORD="$record" python -m pytest test/ simcann/tests "${opts[@]}" --junitxml="$junit" "$@"
rc=$?
record_leg "$pair" "$junit" "$rc"
case $rc in
    0) row "$pair" PASS "$((SECONDS - t0))s" "$(junit_counts "$junit")" ;;
    5)
        echo "FAILED: pytest collected no tests for pair $pair (exit 5)" >&2
        row "$pair" FAIL "$((SECONDS - t0))s" "no tests collected (pytest exit 5)"
        ;;
    *) row "$pair" FAIL "$((SECONDS - t0))s" "pytest exit $rc: $(junit_counts "$junit")" ;;
esac
exit "$rc"
