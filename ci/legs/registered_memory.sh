#!/usr/bin/env bash
# The registered-memory leg (issue #11; row and leg "PAIR registered-memory"): torch_npu's
# pinned_mem_register path (malloc + aclrtHostRegisterV2), which it enables only from CANN 8.5,
# so the simulator reports 8.5.0. The capture, pool-lifetime, stats and pageable-copy tests
# again, in PAIR's env with the plugin installed. ci/legs/pair.sh runs it on
# PINPOOL_REGISTER_PAIR (2.14), after a passing simulator leg.
#
#   bash ci/legs/registered_memory.sh PAIR [pytest args]
#   = SIMCANN_CANN_VERSION=8.5.0 PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True python -m pytest
#       test/pinpool/test_capture_replay.py::test_replay_reads_captured_bytes
#       test/pinpool/test_graph_pools.py::{test_pools_released_on_reset_and_gc,
#       test_recapture_into_released_pool_id,test_shared_pool_reuse_without_crosstalk}
#       test/pinpool/test_stats.py::test_host_memory_stats_match_native{,_with_capture_pins}
#       test/pinpool/test_pageable_copy.py -n 2 [pytest args]
#
# pytest exit 5 passes here: the extra arguments (-k ...) deselected all of them.
set -uo pipefail
# shellcheck source=ci/legs/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
pair="${1:?usage: bash ci/legs/registered_memory.sh PAIR [pytest args]}"
shift
activate "$pair" || { row "$pair registered-memory" FAIL - "env setup failed"; exit 1; }

banner "pair $pair: registered memory (pinned_mem_register, CANN 8.5)"
t0=$SECONDS
tests=(test/pinpool/test_capture_replay.py::test_replay_reads_captured_bytes
    test/pinpool/test_graph_pools.py::test_pools_released_on_reset_and_gc
    test/pinpool/test_graph_pools.py::test_recapture_into_released_pool_id
    test/pinpool/test_graph_pools.py::test_shared_pool_reuse_without_crosstalk
    test/pinpool/test_stats.py::test_host_memory_stats_match_native{,_with_capture_pins}
    test/pinpool/test_pageable_copy.py)
junit="$ENVS/$pair.registered-memory.xml"
rm -f "$junit"
mapfile -t opts < <(xdist)
echo "+ SIMCANN_CANN_VERSION=8.5.0 PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True" \
    "python -m pytest ${tests[*]} ${opts[*]} $*"
SIMCANN_CANN_VERSION=8.5.0 PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True \
    python -m pytest "${tests[@]}" "${opts[@]}" --junitxml="$junit" "$@"
rc=$?
record_leg "$pair registered-memory" "$junit" "$rc"
case $rc in
    0) row "$pair registered-memory" PASS "$((SECONDS - t0))s" "$(junit_counts "$junit")" ;;
    5) row "$pair registered-memory" PASS "$((SECONDS - t0))s" "the pytest arguments deselected every test" ;;
    *) row "$pair registered-memory" FAIL "$((SECONDS - t0))s" "pytest exit $rc: $(junit_counts "$junit")" ;;
esac
[[ $rc == 5 ]] && rc=0
exit "$rc"
