# shellcheck shell=bash
# ci/test.sh's sanitizer legs (issue #20); sourced by ci/test.sh, which owns `summary`, `red`,
# `banner`, `summary_row`, `t_all`, BUDGET_S and LEG_S. Each leg is ci/lib/sanitize.sh (what a
# leg does, and how reports are counted, is said there).
#
#   PINPOOL_SANITIZE=address|thread bash ci/test.sh   every pair of PINPOOL_PAIRS (default: the
#                                                     required ones) gets that leg, on the
#                                                     selection below, instead of the suite; the
#                                                     optional pairs are not run
#   PINPOOL_SANITIZE_CI=1 bash ci/test.sh             the default run, then one ASan+UBSan leg
#                                                     on PINPOOL_SANITIZE_CI_PAIR (2.14), if the
#                                                     budget allows. Off by default: `bash
#                                                     ci/test.sh` alone runs no sanitizer leg.

# A leg's selection (issue #20): the stress suite, graph ownership, threads, failure paths,
# conditional nodes and the consumers. PINPOOL_SANITIZE_TESTS overrides it (e.g. "test/pinpool
# test/stress test/consumers --deselect test/pinpool/test_packaging.py": every allocator test).
PINPOOL_SANITIZE_CI_TESTS="test/stress test/pinpool/test_graph_ownership.py
test/pinpool/test_eager_and_threads.py test/pinpool/test_failure_paths.py
test/pinpool/test_conditional_nodes.py test/consumers"
# What the CI leg is budgeted at. Not in a default `bash ci/test.sh`: the ASan leg on one pair
# from nothing (builds, simulator, tests) took ~21 min, on top of the required legs (56 min in
# CI's last run at the time), which would leave too little of CI's 90 minutes.
SANITIZE_CI_LEG_MIN=15

# sanitize_leg PAIR KIND [pytest args]: one leg, one summary row ("2.13+asan", "2.10+tsan").
sanitize_leg() {
    local pair="$1" kind="$2" t0 status_file label
    shift 2
    case "$kind" in
        address) label="$pair+asan" ;;
        thread) label="$pair+tsan" ;;
        *)
            summary+=("$(printf '%-8s %-6s %5s   %s' "$pair" FAIL - \
                "PINPOOL_SANITIZE=$kind: use address (ASan+UBSan) or thread (TSan)")")
            red=1
            return
            ;;
    esac
    banner "pair $pair under ${kind} sanitizer (ci/lib/sanitize.sh)"
    t0=$SECONDS
    status_file="$(mktemp)"
    PINPOOL_SANITIZE_TESTS="${PINPOOL_SANITIZE_TESTS:-$PINPOOL_SANITIZE_CI_TESTS}" \
        bash ci/lib/sanitize.sh "$pair" "$kind" "$status_file" "$@"
    summary_row "$label" "$t0" $? "$status_file"
}

# PINPOOL_SANITIZE_CI=1: an ASan+UBSan leg after the default run's pairs (the coordinator's
# choice whether CI sets it).
sanitize_ci_leg() {
    local pair="${PINPOOL_SANITIZE_CI_PAIR:-2.14}"
    if [[ -n "${PINPOOL_SANITIZE:-}" || "${PINPOOL_SANITIZE_CI:-0}" != 1 ]]; then
        return
    fi
    if ((SECONDS - t_all + SANITIZE_CI_LEG_MIN * 60 > BUDGET_S)); then
        summary+=("$(printf '%-9s %-6s %5s   %s' "$pair+asan" "not run" - \
            "no time left in the ${PINPOOL_BUDGET_MIN:-70} min budget ($((SECONDS - t_all)) s used); run it: PINPOOL_SANITIZE=address PINPOOL_PAIRS=$pair bash ci/test.sh")")
        return
    fi
    sanitize_leg "$pair" address "$@"
}
