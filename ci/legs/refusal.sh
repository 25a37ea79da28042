#!/usr/bin/env bash
# The refusal leg (row and leg "PAIR refusal"): a pair below the supported range (the 2.7 line, or
# a build such as 2.8@2.8.0; ci/lib/pairs.sh PAIR_REFUSED) installs nothing; test/unsupported/
# checks that the plugin's build and its activation refuse this torch_npu, naming the minimum.
# ci/legs/pair.sh runs it instead of the pair's other legs (x86_64 and aarch64 alike).
#
#   bash ci/legs/refusal.sh PAIR [pytest args]
#
# The line's env may hold the plugin a supported build of it installed (2.8@2.8.0 after 2.8):
# it is uninstalled first, so the refusal is checked from nothing installed. pytest exit 5 (no
# test collected) is a failure.
set -uo pipefail
# shellcheck source=ci/legs/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
pair="${1:?usage: bash ci/legs/refusal.sh PAIR [pytest args]}"
shift
activate "$pair" || { row "$pair refusal" FAIL - "env setup failed"; exit 1; }

banner "pair $pair: below the supported range, test/unsupported/ only"
t0=$SECONDS
python -m pip uninstall -y -q torch_npu_pinpool 2>/dev/null || true
junit="$ENVS/$pair.junit.xml"
rm -f "$junit"
mapfile -t opts < <(xdist)
echo "+ python -m pytest test/unsupported/ ${opts[*]} $*"
python -m pytest test/unsupported/ "${opts[@]}" --junitxml="$junit" "$@"
rc=$?
record_leg "$pair refusal" "$junit" "$rc"
case $rc in
    0) row "$pair refusal" PASS "$((SECONDS - t0))s" "$(junit_counts "$junit")" ;;
    5) row "$pair refusal" FAIL "$((SECONDS - t0))s" "no tests collected (pytest exit 5)" ;;
    *) row "$pair refusal" FAIL "$((SECONDS - t0))s" "pytest exit $rc: $(junit_counts "$junit")" ;;
esac
exit "$rc"
