#!/usr/bin/env bash
# Every benchmark figure (P1 - P10), plugin against torch_npu's own allocator, on each pair.
#
#   bash bench/run.sh                          # required pairs (2.14, 2.10): every figure,
#                                              # bench/results/PAIR.{json,txt,png}, README update
#   bash bench/run.sh --quick                  # smoke test (~2 min per pair), results/scratch/
#   bash bench/run.sh --figures P5,P9          # some figures, results/scratch/
#   bash bench/run.sh --pairs 2.10 [ARGS...]   # other pairs (or PINPOOL_PAIRS="2.14 2.10")
#
# Per pair: `source ci/sim-env.sh PAIR`, install the plugin from this checkout into that env
# (ci/lib/install-plugin.sh, as ci/test.sh does; skip with PINPOOL_BENCH_NO_INSTALL=1), then
# `python bench/bench.py --pair PAIR ARGS...`. After a full run (no --quick / --figures / --out)
# bench/README.md's "Latest run" section is rewritten from bench/results/*.json. Exits non-zero
# if a pair could not run or a worker or a figure failed. Runs `nice`d.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# shellcheck source=ci/lib/pairs.sh
. ci/lib/pairs.sh
pairs=(${PINPOOL_PAIRS:-$PINPOOL_CI_PAIRS})
args=()
full=1
while (($#)); do
    case "$1" in
        --pairs) pairs=(${2//,/ }); shift 2; continue ;;
        --pairs=*) v="${1#--pairs=}"; pairs=(${v//,/ }); shift; continue ;;
        --quick | --figures* | --out* | --from-json*) full=0 ;;
    esac
    args+=("$1")
    shift
done
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
        nice -n 5 python bench/bench.py --pair "$pair" "${args[@]}"
    )
    rc=$?
    case $rc in
        0) summary+=("$pair: ok ($((SECONDS - t0)) s)") ;;
        3) summary+=("$pair: env could not be set up"); red=1 ;;
        4) summary+=("$pair: plugin install failed"); red=1 ;;
        *) summary+=("$pair: bench exit $rc ($((SECONDS - t0)) s)"); red=1 ;;
    esac
done
if [[ $full == 1 ]]; then
    python3 bench/bench.py --readme && summary+=("bench/README.md: Latest run rewritten")
    python3 ci/render_bench_lines.py && summary+=("README.md, docs/: performance lines rewritten")
fi
printf '\n==================== bench summary ====================\n'
printf '%s\n' "${summary[@]}"
exit $red
