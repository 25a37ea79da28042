#!/usr/bin/env bash
# One torch / torch_npu pair of ci/test.sh on x86_64: its environment and the plugin, then its
# legs, each a script with its own summary row.
#
#   bash ci/legs/pair.sh PAIR [pytest args]    PAIR: a pair of ci/lib/pairs.sh, or LINE@BUILD
#
# "PAIR setup": `source ci/sim-env.sh PAIR` (creates or reuses the env: ci/lib/envsetup.sh), then
# the plugin built and installed into it as users install it (ci/lib/install-plugin.sh, from a
# per-env copy of the checkout; log ENVS/PAIR.plugin-build.log). Then:
#   PAIR                    ci/legs/simulator.sh: the whole suite on the simulated runtime
#   PAIR registered-memory  ci/legs/registered_memory.sh, on PINPOOL_REGISTER_PAIR (2.14) when the
#                           simulator leg passed ("not run" otherwise)
#   PAIR as-npu             ci/legs/as_npu.sh, on the required pairs (PINPOOL_CI_PAIRS): the
#                           tests the simulator leg recorded, with the simulator's API hidden
#   LINE@BUILD ...          a pair that names a torch_npu build: ci/legs/build_check.sh instead
#                           (doctor, then the as-NPU leg on every test)
#   PAIR refusal            a pair below the supported range (2.7, 2.8@2.8.0): nothing installed,
#                           ci/legs/refusal.sh instead of all of the above
# The pytest arguments go to every leg. Exit 0 when every leg passed.
set -uo pipefail
# shellcheck source=ci/legs/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
pair="${1:?usage: bash ci/legs/pair.sh PAIR [pytest args]}"
shift
pinpool_pair_spec "$pair" || { row "$pair" FAIL - "unknown pair (ci/lib/pairs.sh)"; exit 2; }

banner "pair $pair"
t0=$SECONDS
if ! activate "$pair"; then
    row "$pair setup" FAIL "$((SECONDS - t0))s" "env setup failed"
    exit 1
fi
echo "python: $(command -v python); SIMCANN_LIB_DIR=$SIMCANN_LIB_DIR"
t_env=$((SECONDS - t0))
if [[ "$PAIR_REFUSED" == 1 ]]; then
    row "$pair setup" PASS "${t_env}s" "env ${t_env}s (torch_npu ${PINPOOL_NPU_BUILD:-?}; below the supported range)"
    exec bash ci/legs/refusal.sh "$pair" "$@"
fi
if ! install_plugin "$pair"; then
    row "$pair setup" FAIL "$((SECONDS - t0))s" "plugin build failed (log: $ENVS/$pair.plugin-build.log)"
    exit 1
fi
row "$pair setup" PASS "$((SECONDS - t0))s" "env ${t_env}s, plugin build $((SECONDS - t0 - t_env))s (torch_npu ${PINPOOL_NPU_BUILD:-?})"
[[ -z "$PAIR_BUILD" ]] || exec bash ci/legs/build_check.sh "$pair" "$@"

bash ci/legs/simulator.sh "$pair" "$@"
sim_rc=$?
rc=$sim_rc
if [[ "$pair" == "$PINPOOL_REGISTER_PAIR" ]]; then
    if [[ $sim_rc == 0 ]]; then
        bash ci/legs/registered_memory.sh "$pair" "$@" || rc=1
    else
        row "$pair registered-memory" "not run" - "the simulator leg failed"
    fi
fi
if [[ " $PINPOOL_CI_PAIRS " == *" $pair "* ]]; then
    bash ci/legs/as_npu.sh "$pair" --record "$ENVS/$pair.sim-api.txt" "$@" || rc=1
fi
exit "$rc"
