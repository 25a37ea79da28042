#!/usr/bin/env bash
# Run the plugin-vs-native benchmark on every available torch / torch_npu pair.
#
#   bash bench/run.sh                     # pairs 2.13 and 2.10 (PINPOOL_PAIRS overrides)
#   bash bench/run.sh --quick             # CI smoke (~1 min per pair)
#   PINPOOL_PAIRS=2.13 bash bench/run.sh --trials 4 --figures P1,P3
#
# Per pair: `source ci/sim-env.sh PAIR`, install the plugin from this checkout into that env
# (ci/lib/install-plugin.sh, as ci/test.sh does; skip with PINPOOL_BENCH_NO_INSTALL=1), then
# `python bench/bench.py ARGS...`, which writes bench/results/bench-PAIR[-quick].{json,txt,png}.
# Exits non-zero if any pair could not run or a figure failed.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# shellcheck source=ci/lib/pairs.sh
. ci/lib/pairs.sh
pairs=(${PINPOOL_PAIRS:-$PINPOOL_CI_PAIRS})
red=0
summary=()
for pair in "${pairs[@]}"; do
    printf '\n==================== bench: pair %s ====================\n' "$pair"
    t0=$SECONDS
    (
        # shellcheck source=ci/sim-env.sh
        source ci/sim-env.sh "$pair" || exit 3
        if [[ -f setup.py && "${PINPOOL_BENCH_NO_INSTALL:-0}" != 1 ]]; then
            log="$(mktemp)"
            if ! bash ci/lib/install-plugin.sh "$log"; then
                tail -n 40 "$log"
                echo "bench: installing the plugin failed for pair $pair" >&2
                exit 4
            fi
            rm -f "$log"
        fi
        python bench/bench.py --pair "$pair" "$@"
    )
    rc=$?
    case $rc in
        0) summary+=("$pair: ok ($((SECONDS - t0)) s)") ;;
        3) summary+=("$pair: env could not be set up"); red=1 ;;
        4) summary+=("$pair: plugin install failed"); red=1 ;;
        *) summary+=("$pair: bench exit $rc ($((SECONDS - t0)) s)"); red=1 ;;
    esac
done
printf '\n==================== bench summary ====================\n'
printf '%s\n' "${summary[@]}"
exit $red
