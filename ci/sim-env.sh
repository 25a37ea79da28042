#!/usr/bin/env bash
# Activate the simulated-NPU test environment for one torch / torch_npu pair.
#
#   source ci/sim-env.sh PAIR          # PAIR: 2.14 ... 2.7 (ci/lib/pairs.sh)
#   bash ci/sim-env.sh PAIR --print    # print the exports instead
#
# The first call creates a venv under ${PINPOOL_ENV_ROOT:-$HOME/.cache/torch_npu_pinpool/envs}/PAIR
# with that pair of wheels and the test dependencies, and builds the simulated CANN runtime
# (simcann) into it; later calls reuse both and print nothing (the simulator is rebuilt when
# its sources change). It then exports PATH (venv first), VIRTUAL_ENV, SIMCANN_LIB_DIR,
# LD_LIBRARY_PATH (simulator first), TORCH_DEVICE_BACKEND_AUTOLOAD=0 and PINPOOL_PAIR.
# The work is done by ci/lib/envsetup.sh in a child process, so a failure never exits your shell.

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    # executed, not sourced
    if [[ "${2:-}" != "--print" || $# -ne 2 ]]; then
        echo "usage: source ci/sim-env.sh PAIR   |   bash ci/sim-env.sh PAIR --print" >&2
        exit 2
    fi
    exec bash "$(dirname "${BASH_SOURCE[0]}")/lib/envsetup.sh" "$1"
fi

if [[ $# -ne 1 ]]; then
    echo "usage: source ci/sim-env.sh PAIR   (PAIR: one of $(. "$(dirname "${BASH_SOURCE[0]}")/lib/pairs.sh" && echo "$PINPOOL_ALL_PAIRS"))" >&2
    return 2
fi
if _pinpool_exports="$(bash "$(dirname "${BASH_SOURCE[0]}")/lib/envsetup.sh" "$1")"; then
    eval "$_pinpool_exports"
    unset _pinpool_exports
    hash -r
else
    unset _pinpool_exports
    echo "[sim-env $1] the environment was NOT activated" >&2
    return 1
fi
