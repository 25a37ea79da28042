#!/usr/bin/env bash
# The test command (README; CI runs it through .ci/run): lint, then every pair's legs on the
# simulated CANN runtime, then one summary row per leg, GREEN or RED. Each leg is a script of
# ci/legs/ whose header says what it does, its variables and how to run it alone.
#
#   bash ci/test.sh [pytest args]        lint (ci/legs/lint.sh), the required pairs (PINPOOL_CI_PAIRS:
#                                        2.14, 2.10; ci/legs/pair.sh), then the optional others;
#                                        the pytest args go to every leg
#   PINPOOL_PAIRS="2.13 2.9" bash ci/test.sh   exactly these pairs (set up if not cached); `all`:
#                                        every pair; `builds`: the build sweep, each LINE@BUILD
#                                        of PINPOOL_NPU_BUILDS (ci/lib/pairs.sh)
#   PINPOOL_SANITIZE=address|thread      sanitizer legs instead of the pairs' legs, and
#   PINPOOL_SANITIZE_CI=1                an ASan leg after them (ci/legs/sanitize.sh)
#   PINPOOL_ARCH=aarch64                 the aarch64 legs instead (ci/legs/aarch64.sh)
#
# The pairs after the first have their envs made in the background meanwhile. Optional pairs
# (the other pairs of PINPOOL_ALL_PAIRS, x86_64, no PINPOOL_PAIRS) run only when cached and the
# time used leaves room within PINPOOL_BUDGET_MIN (70 of CI's 90 min) for a pair estimated at the
# longest so far, at least PINPOOL_LEG_MIN (10); they start at another one each day, so every
# cached pair runs within a week. A leg not run is a row saying why and how to run it. Then the
# compile check against PINPOOL_NEXT_TORCH (ci/legs/next_torch.sh), newer torch_npu releases.
# Exit 0 GREEN; 1 RED: a leg failed (pytest exit 5, no test collected, fails it); 2: unknown pair
# or PINPOOL_ARCH. Leg summaries: PINPOOL_RESULTS_DIR (python ci/render_results.py renders them).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
# shellcheck source=ci/legs/common.sh
. ci/legs/common.sh
case "$ARCH" in
    x86_64) pair_leg=ci/legs/pair.sh ;;
    aarch64) pair_leg=ci/legs/aarch64.sh ;;
    *) echo "ci/test.sh: PINPOOL_ARCH=$ARCH: choose x86_64 (the default) or aarch64" >&2 && exit 2 ;;
esac
optional=() red=0
# shellcheck disable=SC2206 # the lists are words
case "${PINPOOL_PAIRS:-}" in
    all) pairs=($PINPOOL_ALL_PAIRS) ;;
    builds) pairs=($PINPOOL_NPU_BUILDS) ;;
    ?*) pairs=($PINPOOL_PAIRS) ;;
    *) [[ "$ARCH" == aarch64 ]] && pairs=($PINPOOL_AARCH64_PAIRS) || pairs=($PINPOOL_CI_PAIRS)
        [[ "$ARCH" == aarch64 ]] || for p in $PINPOOL_ALL_PAIRS; do
            [[ " ${pairs[*]} " == *" $p "* ]] || optional+=("$p")
        done ;;
esac
for p in "${pairs[@]}" "${optional[@]}"; do
    pinpool_pair_spec "$p" || {
        echo "ci/test.sh: unknown pair '$p' (known: $PINPOOL_ALL_PAIRS; or LINE@BUILD with a" \
            "torch_npu build of a supported line, e.g. 2.10@2.10.0.post4)" >&2
        exit 2
    }
done
if ((${#optional[@]} > 1)); then
    day=$(($(date +%s) / 86400 % ${#optional[@]}))
    optional=("${optional[@]:day}" "${optional[@]:0:day}")
fi
BUDGET_S=$((${PINPOOL_BUDGET_MIN:-70} * 60))
LEG_S=$((${PINPOOL_LEG_MIN:-10} * 60)) # raised to the longest pair run so far
ROWS="$(mktemp)" && exec 3>"$ROWS" && export PINPOOL_AS_NPU_COVERED="$ROWS.as-npu"
t_all=$SECONDS cached=$(find "$ROOT" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l)

# leg SCRIPT ARGS...: one leg script; its rows go to the table, its failure makes the run red.
leg() {
    local t0=$SECONDS rows
    rows=$(wc -l <"$ROWS")
    bash "$@" || red=1
    (($(wc -l <"$ROWS") > rows)) || { row "${2:-$1}" FAIL - "$1 wrote no summary row" && red=1; }
    ((SECONDS - t0 <= LEG_S)) || LEG_S=$((SECONDS - t0))
}

for p in "${pairs[@]:1}"; do prefetch_env "$p"; done # while the first pair runs
leg ci/legs/lint.sh "${pairs[0]}"
if [[ -n "${PINPOOL_SANITIZE:-}" ]]; then
    for p in "${pairs[@]}"; do leg ci/legs/sanitize.sh "$p" "$PINPOOL_SANITIZE" "$@"; done
    pairs=() optional=()
fi
for p in "${pairs[@]}"; do leg "$pair_leg" "$p" "$@"; done
for p in "${optional[@]}"; do
    if ! bash ci/lib/envsetup.sh "$p" --cached; then
        row "$p" "not run" - "optional: env not cached; run it: PINPOOL_PAIRS=$p bash ci/test.sh"
    elif ((SECONDS - t_all + LEG_S > BUDGET_S)); then
        row "$p" "not run" - "optional: no time left in the ${PINPOOL_BUDGET_MIN:-70} min budget ($((SECONDS - t_all)) s used, a pair ~${LEG_S} s); run it: PINPOOL_PAIRS=$p bash ci/test.sh"
    else leg "$pair_leg" "$p" "$@"; fi
done
if [[ -z "${PINPOOL_SANITIZE:-}" && "${PINPOOL_SANITIZE_CI:-0}" == 1 ]]; then
    leg ci/legs/sanitize.sh "${PINPOOL_SANITIZE_CI_PAIR:-2.14}" address \
        --budget-left $((BUDGET_S - (SECONDS - t_all))) "$@"
fi
plain=0 && for p in "${pairs[@]}" "${optional[@]}"; do [[ "$p" == *@* ]] || plain=1; done
[[ -z "$PINPOOL_NEXT_TORCH" || "$ARCH" != x86_64 || $plain == 0 ]] ||
    leg ci/legs/next_torch.sh "$PINPOOL_NEXT_TORCH"

banner summary
printf '%-24s %-7s %6s  %s\n' leg result time detail
cat "$ROWS"
python3 ci/lib/command_record.py --seconds $((SECONDS - t_all)) --cached-envs "$cached" --rows "$ROWS" --out "$RESULTS"
rm -f "$ROWS" "$PINPOOL_AS_NPU_COVERED"
python3 ci/lib/newer_releases.py 2>/dev/null || true
echo "leg summaries: $RESULTS (render them: python ci/render_results.py)"
echo "total: $((SECONDS - t_all))s"
((red == 0)) || { echo "RED: at least one step failed" && exit 1; }
echo "GREEN"
