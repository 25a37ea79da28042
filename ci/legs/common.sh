# shellcheck shell=bash
# What the leg scripts of ci/test.sh share; sourced by each (it runs nothing itself). A leg script
# reads only its arguments and the documented variables, prints its log, writes exactly one
# summary row per leg to file descriptor 3 (ci/test.sh collects them into the table; run by hand,
# the row goes to stdout) and exits 0 when the leg passed.
#
#   REPO, ROOT (PINPOOL_ENV_ROOT: the envs; PINPOOL_SIM_ROOT: where their simulator builds go,
#   ci/lib/envsetup.sh), ARCH (PINPOOL_ARCH), ENVS (ROOT, or ROOT/aarch64: where a pair's logs
#   and JUnit XML go), RESULTS (PINPOOL_RESULTS_DIR: the legs' summaries)
#   row LABEL RESULT TIME DETAIL    one row of the table (RESULT: PASS, FAIL or "not run")
#   activate PAIR                   `source ci/sim-env.sh PAIR` (creates / reuses the env)
#   install_plugin PAIR             ci/lib/install-plugin.sh into the active env, log in ENVS
#   prefetch_env PAIR               create a plain x86_64 pair's env in the background (log
#                                   ENVS/PAIR.prefetch.log); its `activate` later waits for it
#   xdist                           the pytest-xdist options (PINPOOL_XDIST workers, default 2;
#                                   0 or no xdist: none), one a line
#   record_leg LEG JUNIT RC         the leg's summary for docs/test-results.md (never fails)
#   junit_counts JUNIT              "N passed, N skipped, N failed"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO" || exit 2
# shellcheck source=ci/lib/pairs.sh
. ci/lib/pairs.sh
ROOT="${PINPOOL_ENV_ROOT:-$HOME/.cache/torch_npu_pinpool/envs}"
ARCH="${PINPOOL_ARCH:-x86_64}"
ENVS="$ROOT"
[[ "$ARCH" != aarch64 ]] || ENVS="$ROOT/aarch64"
RESULTS="${PINPOOL_RESULTS_DIR:-$REPO/build/test-results}"
{ true >&3; } 2>/dev/null || exec 3>&1

banner() { printf '\n==================== %s ====================\n' "$*"; }

row() { printf '%-24s %-7s %6s  %s\n' "$1" "$2" "$3" "$4" >&3; }

activate() {
    # shellcheck source=ci/sim-env.sh
    source ci/sim-env.sh "$1"
}

install_plugin() {
    local log="$ENVS/$1.plugin-build.log"
    echo "+ ci/lib/install-plugin.sh: the sdist of a per-env copy, pip install (isolated build)"
    if ! bash ci/lib/install-plugin.sh "$log"; then
        tail -n 60 "$log"
        echo "FAILED: building/installing the plugin for pair $1 (full log: $log)"
        return 1
    fi
    echo "installed: $(python -m pip show torch_npu_pinpool 2>/dev/null | grep -E '^(Name|Version):' | tr '\n' ' ')"
}

prefetch_env() {
    # Downloading and unpacking a pair's wheels is mostly waiting on the network and the disk,
    # which the pair before it leaves free. envsetup.sh's lock (ROOT/PAIR.lock) makes the pair's
    # own `activate` wait for it, and redo it if it failed.
    [[ "$ARCH" == x86_64 && "$1" != *@* ]] || return 0
    bash ci/lib/envsetup.sh "$1" --cached 2>/dev/null && return 0
    mkdir -p "$ENVS"
    bash ci/lib/envsetup.sh "$1" >/dev/null 2>"$ENVS/$1.prefetch.log" &
}

xdist() {
    local workers="${PINPOOL_XDIST:-2}"
    if [[ "$workers" != 0 ]] && python -c 'import xdist' 2>/dev/null; then
        printf '%s\n' -n "$workers"
    fi
}

record_leg() {
    local line="${1%% *}"
    [[ -f "$2" ]] || { echo "no JUnit XML for leg $1: no summary written"; return 0; }
    python ci/lib/leg_summary.py --leg "$1" --pair "${line%%@*}" --arch "$ARCH" --junit "$2" \
        --rc "$3" --out "$RESULTS" || true
}

junit_counts() {
    python - "$1" <<'EOF' 2>/dev/null || echo "no JUnit XML ($1)"
import sys
sys.path.insert(0, "ci/lib")
import leg_summary
c = leg_summary.counts(sys.argv[1])
print(f"{c['passed']} passed, {c['skipped']} skipped, {c['failed']} failed")
EOF
}
