#!/usr/bin/env bash
# The lint leg of ci/test.sh (row "lint"), once per run, with PAIR's ruff (the run's first pair):
#
#   bash ci/legs/lint.sh PAIR
#
# `ruff check` of torch_npu_pinpool test simcann bench ci, then ci/lib/check_sim_markers.py: no test in
# test/pinpool or test/stress reads simulator state without the `simulator` marker, and no test
# or scenario names the as-a-real-NPU leg's variables instead of asking simctl.available().
# Not on aarch64 (PINPOOL_ARCH=aarch64; row "not run"): the sources are the same, the x86 run
# lints them. FAIL when the pair's env cannot be set up (ruff did not run).
set -uo pipefail
# shellcheck source=ci/legs/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
pair="${1:?usage: bash ci/legs/lint.sh PAIR}"

banner "ruff check (env $pair)"
if [[ "$ARCH" == aarch64 ]]; then
    echo "not on aarch64: the sources are the same; the x86 run (bash ci/test.sh) lints them"
    row lint "not run" - "aarch64 leg: lint runs in the x86 run"
    exit 0
fi
t0=$SECONDS
targets=()
for d in torch_npu_pinpool test simcann bench ci; do [[ -d "$d" ]] && targets+=("$d"); done
if ! activate "$pair"; then
    row lint FAIL "$((SECONDS - t0))s" "env $pair could not be set up, so ruff did not run"
    exit 1
fi
echo "+ ruff check ${targets[*]}   ($(ruff --version))"
ruff check "${targets[@]}"
rc=$?
echo "+ python ci/lib/check_sim_markers.py"
python ci/lib/check_sim_markers.py || rc=1
if [[ $rc == 0 ]]; then
    row lint PASS "$((SECONDS - t0))s" "ruff check ${targets[*]}; simulator markers"
else
    row lint FAIL "$((SECONDS - t0))s" "ruff check ${targets[*]} or ci/lib/check_sim_markers.py found problems (see above)"
fi
exit $rc
