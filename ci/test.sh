#!/usr/bin/env bash
# Run the test suite on every CI torch / torch_npu pair, on the simulated CANN runtime.
#
#   bash ci/test.sh                      # pairs 2.13 and 2.10 (2.9 / 2.8: on demand, below)
#   PINPOOL_PAIRS="2.13 2.9" bash ci/test.sh   # exactly these pairs
#   bash ci/test.sh -k capture -x        # extra arguments go to pytest
#
# Per pair: `source ci/sim-env.sh PAIR` (creates / reuses the env), `pip install
# --no-build-isolation .` (the plugin, built against that pair's torch / torch_npu, in a per-env
# copy of the checkout: ci/lib/install-plugin.sh), then
# `python -m pytest test/`. `ruff check` runs first (once). Exits non-zero if the lint or any
# pair is red; a pair where pytest collected no tests (exit 5) is red.
#
# Environment: PINPOOL_PAIRS (pairs to run), PINPOOL_XDIST (pytest-xdist workers; 0 = off;
# default 2), PINPOOL_ENV_ROOT (where the envs live).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# shellcheck source=ci/lib/pairs.sh
. ci/lib/pairs.sh
ROOT="${PINPOOL_ENV_ROOT:-$HOME/.cache/torch_npu_pinpool/envs}"

if [[ -n "${PINPOOL_PAIRS:-}" ]]; then
    pairs=($PINPOOL_PAIRS)
else
    pairs=($PINPOOL_CI_PAIRS)
    # The older pairs (2.9, 2.8) run on demand only: PINPOOL_PAIRS="2.9 2.8". They cost ~3 GB
    # and several minutes each to set up from nothing.
    for p in $PINPOOL_ALL_PAIRS; do
        [[ " ${pairs[*]} " == *" $p "* ]] && continue
        echo "ci/test.sh: pair $p not run (on demand: PINPOOL_PAIRS=\"$p\" bash ci/test.sh)"
    done
fi
for p in "${pairs[@]}"; do
    pinpool_pair_spec "$p" || { echo "ci/test.sh: unknown pair '$p' (known: $PINPOOL_ALL_PAIRS)" >&2; exit 2; }
done

banner() { printf '\n==================== %s ====================\n' "$*"; }
t_all=$SECONDS
summary=()
red=0

# --- lint (once, with the first pair's ruff) -------------------------------------------------
lint_pair="${pairs[0]}"
banner "ruff check (env $lint_pair)"
t0=$SECONDS
lint_targets=()
for d in torch_npu_pinpool test bench ci; do [[ -d "$d" ]] && lint_targets+=("$d"); done
if (
    # shellcheck source=ci/sim-env.sh
    source ci/sim-env.sh "$lint_pair" || exit 3
    echo "+ ruff check ${lint_targets[*]}   ($(ruff --version))"
    ruff check "${lint_targets[@]}"
); then
    summary+=("$(printf '%-8s %-6s %5ss  %s' lint PASS $((SECONDS - t0)) "ruff check ${lint_targets[*]}")")
else
    rc=$?
    what="ruff check ${lint_targets[*]} found problems (see above; 'ruff check --fix' fixes some)"
    [[ $rc == 3 ]] && what="env $lint_pair could not be set up, so ruff did not run"
    summary+=("$(printf '%-8s %-6s %5ss  %s' lint FAIL $((SECONDS - t0)) "$what")")
    red=1
fi

# --- pairs -----------------------------------------------------------------------------------
for pair in "${pairs[@]}"; do
    banner "pair $pair"
    t0=$SECONDS
    status_file="$(mktemp)"
    (
        t=$SECONDS
        # shellcheck source=ci/sim-env.sh
        if ! source ci/sim-env.sh "$pair"; then
            echo "env setup failed" >"$status_file"
            exit 1
        fi
        t_env=$((SECONDS - t))
        echo "python: $(command -v python); SIMCANN_LIB_DIR=$SIMCANN_LIB_DIR"

        t=$SECONDS
        if [[ -f setup.py ]]; then
            echo "+ pip install --no-build-isolation .   (ci/lib/install-plugin.sh: from a per-env copy)"
            if ! bash ci/lib/install-plugin.sh "$ROOT/$pair.plugin-build.log"; then
                tail -n 60 "$ROOT/$pair.plugin-build.log"
                echo "FAILED: building/installing the plugin for pair $pair (full log:" \
                    "$ROOT/$pair.plugin-build.log)"
                echo "plugin build failed" >"$status_file"
                exit 1
            fi
            echo "installed: $(python -m pip show torch_npu_pinpool 2>/dev/null | grep -E '^(Name|Version):' | tr '\n' ' ')"
        else
            echo "NOTE: setup.py does not exist yet: skipping the plugin build/install"
        fi
        t_build=$((SECONDS - t))

        xdist=()
        workers="${PINPOOL_XDIST:-2}"
        if [[ "$workers" != 0 ]] && python -c 'import xdist' 2>/dev/null; then
            xdist=(-n "$workers")
        fi
        t=$SECONDS
        echo "+ python -m pytest test/ ${xdist[*]} $*"
        python -m pytest test/ "${xdist[@]}" "$@"
        rc=$?
        t_test=$((SECONDS - t))
        case $rc in
            0) echo "PASS env ${t_env}s, build ${t_build}s, tests ${t_test}s" >"$status_file" ;;
            5)
                echo "FAILED: pytest collected no tests for pair $pair (exit 5)" >&2
                echo "no tests collected (pytest exit 5)" >"$status_file"
                ;;
            *) echo "pytest exit $rc (env ${t_env}s, build ${t_build}s, tests ${t_test}s)" >"$status_file" ;;
        esac
        exit $rc
    )
    rc=$?
    detail="$(cat "$status_file")"
    rm -f "$status_file"
    if [[ $rc == 0 ]]; then
        summary+=("$(printf '%-8s %-6s %5ss  %s' "$pair" PASS $((SECONDS - t0)) "${detail#PASS }")")
    else
        summary+=("$(printf '%-8s %-6s %5ss  %s' "$pair" FAIL $((SECONDS - t0)) "${detail:-exit $rc}")")
        red=1
    fi
done

banner "summary"
printf '%-8s %-6s %6s  %s\n' pair result time detail
printf '%s\n' "${summary[@]}"
echo "total: $((SECONDS - t_all))s"
if [[ $red != 0 ]]; then
    echo "RED: at least one step failed"
    exit 1
fi
echo "GREEN"
