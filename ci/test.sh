#!/usr/bin/env bash
# Run the test suite on every CI torch / torch_npu pair, on the simulated CANN runtime.
#
#   bash ci/test.sh                      # required pairs, then the cached optional ones (below)
#   PINPOOL_PAIRS="2.13 2.9" bash ci/test.sh   # exactly these pairs (created if not cached)
#   PINPOOL_PAIRS=all bash ci/test.sh    # every pair in ci/lib/pairs.sh
#   PINPOOL_PAIRS="2.10@2.10.0.post4" bash ci/test.sh   # one torch_npu build: the build check
#   PINPOOL_PAIRS=builds bash ci/test.sh # the build sweep: every build in PINPOOL_NPU_BUILDS
#   bash ci/test.sh -k capture -x        # extra arguments go to pytest
#
# Which pairs run by default (ci/lib/pairs.sh): the required ones (PINPOOL_CI_PAIRS: 2.14 and
# 2.10) always, set up from nothing if need be; every other pair only when its env is already
# cached (`bash ci/lib/envsetup.sh PAIR --cached`) and the time used so far leaves room for it
# within PINPOOL_BUDGET_MIN (default 70 of CI's 90 minutes). A leg is estimated at the longest
# leg run so far, at least PINPOOL_LEG_MIN (default 10; a cached pair took 9-14 min on CI's 2
# cores). The optional pairs start at a different one each day, so that every cached pair runs in
# CI within a week even when the budget holds only some of them. A leg that is not run is named
# in the summary with the reason and the command that runs it.
#
# Per pair: `source ci/sim-env.sh PAIR` (creates / reuses the env), the plugin installed into it
# (ci/lib/install-plugin.sh, from a per-env copy of the checkout), then
# `python -m pytest test/`; for the required pairs also the "as a real NPU" leg, with the same
# plugin: `PINPOOL_TEST_AS_NPU=1 python -m pytest test/pinpool test/stress test/consumers -m "not
# simulator"` with SIMCANN_LIB_DIR unset (the simulator's control API hidden), which must pass and
# must run the tests ci/lib/as_npu_selection.py requires. On PINPOOL_REGISTER_PAIR (2.14) the
# capture, pool-lifetime, stats and pageable-copy tests run again with
# PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True and SIMCANN_CANN_VERSION=8.5.0: torch_npu's
# registered-memory path (malloc + aclrtHostRegisterV2), which it enables only from CANN 8.5.
# `ruff check` and ci/lib/check_sim_markers.py run first (once). Exits non-zero if the lint or any
# pair that ran is red; a pair where pytest collected no tests (exit 5) is red.
#
# Notices, never failures: a torch_npu release on the index newer than the supported maximum
# (ci/lib/newer_releases.py; nothing when the index cannot be reached), and a torch release no
# torch_npu pairs with yet ("PENDING"), whose headers every csrc/ unit is compiled against when
# their cache exists (ci/lib/compile_check.sh, PINPOOL_NEXT_TORCH). CI runs `.ci/run`, which
# installs missing build tools and runs this script; GitHub Actions runs every pair weekly
# (.github/workflows/all-pairs.yml) and the build sweep weekly (builds.yml, one job per line).
#
# A pair that names a build (LINE@BUILD, ci/lib/pairs.sh) runs the build check instead of the
# suite: in the line's env with torch_npu switched to BUILD, the plugin built and installed,
# `python -m torch_npu_pinpool doctor` (must exit 0 and print PASS; run as on a real NPU, without
# SIMCANN_LIB_DIR), then the "as a real NPU" leg. Its results are the leg "LINE@BUILD as-npu".
# A build below the supported minimum (2.8@2.8.0) runs test/unsupported/ instead, as the 2.7 line
# does: the leg "LINE@BUILD refusal".
#
# Environment: PINPOOL_PAIRS (pairs to run), PINPOOL_XDIST (pytest-xdist workers; 0 = off;
# default 2), PINPOOL_ENV_ROOT (where the envs live), PINPOOL_BUDGET_MIN, PINPOOL_LEG_MIN,
# PINPOOL_RESULTS_DIR (default build/test-results), PINPOOL_SIM_ROOT (ci/lib/envsetup.sh),
# PINPOOL_ARCH (below), PINPOOL_SANITIZE / PINPOOL_SANITIZE_CI (ci/lib/sanitize_legs.sh).
#
# Results: every pytest leg writes its summary (pair, torch / torch_npu builds, commit, date,
# passed / skipped / failed) to PINPOOL_RESULTS_DIR/LEG.json (ci/lib/leg_summary.py);
# `python ci/render_results.py` renders them into docs/test-results.md.
#
# PINPOOL_ARCH=aarch64: the aarch64 leg instead, under qemu-user emulation on this x86_64 machine
# (set up as root by ci/sim-env.sh; see ci/lib/aarch64.sh). Pairs: PINPOOL_PAIRS, else
# PINPOOL_AARCH64_PAIRS (ci/lib/pairs.sh). Per pair: the plugin built by the emulated pip
# with the cross compiler (the installed _C must be an AArch64 ELF), `python -m
# torch_npu_pinpool doctor` (must print PASS), then the selection in ci/lib/aarch64-tests.txt
# with the simulator's checks on. No lint (the x86 run does it), no as-NPU or registered-memory
# leg, no optional pairs.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
# shellcheck source=ci/lib/pairs.sh
. ci/lib/pairs.sh
ROOT="${PINPOOL_ENV_ROOT:-$HOME/.cache/torch_npu_pinpool/envs}"
ARCH="${PINPOOL_ARCH:-x86_64}"
ENVS="$ROOT"
RESULTS="${PINPOOL_RESULTS_DIR:-$REPO/build/test-results}"
case "$ARCH" in
    x86_64) ;;
    aarch64)
        ENVS="$ROOT/aarch64"
        # shellcheck source=ci/lib/aarch64-leg.sh
        . ci/lib/aarch64-leg.sh
        ;;
    *) echo "ci/test.sh: PINPOOL_ARCH=$ARCH: choose x86_64 (the default) or aarch64" >&2; exit 2 ;;
esac

optional=()  # run only when cached and within the budget
if [[ "${PINPOOL_PAIRS:-}" == all ]]; then
    pairs=($PINPOOL_ALL_PAIRS)
elif [[ "${PINPOOL_PAIRS:-}" == builds ]]; then
    pairs=($PINPOOL_NPU_BUILDS)
elif [[ -n "${PINPOOL_PAIRS:-}" ]]; then
    pairs=($PINPOOL_PAIRS)
elif [[ "$ARCH" == aarch64 ]]; then
    pairs=($PINPOOL_AARCH64_PAIRS)
else
    pairs=($PINPOOL_CI_PAIRS)
    for p in $PINPOOL_ALL_PAIRS; do
        [[ " ${pairs[*]} " == *" $p "* ]] || optional+=("$p")
    done
fi
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
LEG_S=$((${PINPOOL_LEG_MIN:-10} * 60))  # raised to the longest leg run so far (run_pair)

banner() { printf '\n==================== %s ====================\n' "$*"; }
# record_leg LEG PAIR JUNIT RC: the leg's summary for docs/test-results.md (never fails the run).
record_leg() {
    [[ -f "$3" ]] || { echo "no JUnit XML for leg $1: no summary written"; return 0; }
    python ci/lib/leg_summary.py --leg "$1" --pair "$2" --arch "$ARCH" --junit "$3" --rc "$4" \
        --out "$RESULTS" || true
}
t_all=$SECONDS
summary=()
red=0

# --- lint (once, with the first pair's ruff) -------------------------------------------------
lint_pair="${pairs[0]}"
banner "ruff check (env $lint_pair)"
t0=$SECONDS
lint_targets=()
for d in torch_npu_pinpool test bench ci; do [[ -d "$d" ]] && lint_targets+=("$d"); done
if [[ "$ARCH" == aarch64 ]]; then
    echo "not on aarch64: the sources are the same; the x86 run (bash ci/test.sh) lints them"
    summary+=("$(printf '%-8s %-6s %5s   %s' lint "not run" - "aarch64 leg: lint runs in the x86 run")")
elif (
    # shellcheck source=ci/sim-env.sh
    source ci/sim-env.sh "$lint_pair" || exit 3
    echo "+ ruff check ${lint_targets[*]}   ($(ruff --version))"
    ruff check "${lint_targets[@]}" || exit 1
    # No test in test/pinpool or test/stress reads simulator state without the marker.
    echo "+ python ci/lib/check_sim_markers.py"
    python ci/lib/check_sim_markers.py
); then
    summary+=("$(printf '%-8s %-6s %5ss  %s' lint PASS $((SECONDS - t0)) "ruff check ${lint_targets[*]}; simulator markers")")
else
    rc=$?
    what="ruff check ${lint_targets[*]} or ci/lib/check_sim_markers.py found problems (see above)"
    [[ $rc == 3 ]] && what="env $lint_pair could not be set up, so ruff did not run"
    summary+=("$(printf '%-8s %-6s %5ss  %s' lint FAIL $((SECONDS - t0)) "$what")")
    red=1
fi

# --- pairs -----------------------------------------------------------------------------------
run_pair() {
    local pair="$1" t0 status_file
    shift # the rest are pytest's arguments
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
        [[ "$ARCH" != aarch64 ]] || echo "emulated: QEMU_LD_PREFIX=$QEMU_LD_PREFIX; CXX=$CXX"

        pinpool_pair_spec "$pair"
        line="$PAIR_LINE"
        build_check=0
        [[ -z "$PAIR_BUILD" ]] || build_check=1
        [[ $build_check == 0 || "$ARCH" != aarch64 ]] || {
            echo "a build check runs on x86_64 only" >"$status_file"
            exit 1
        }
        tests=(test/)
        t=$SECONDS
        if [[ "$PAIR_REFUSED" == 1 ]]; then
            # Below the supported range: nothing to install; test/unsupported/ checks that the
            # build and the activation refuse this torch_npu, naming the minimum.
            echo "pair $pair is below the supported range: running test/unsupported/ only"
            tests=(test/unsupported/)
            # The line's env may hold the plugin a supported build of it installed (2.8@2.8.0
            # after 2.8): the refusal is checked from nothing installed.
            python -m pip uninstall -y -q torch_npu_pinpool 2>/dev/null || true
        elif [[ -f setup.py ]]; then
            if [[ "$ARCH" == aarch64 ]] && ! aarch64_check_torch; then
                echo "import torch fails under emulation" >"$status_file"
                exit 1
            fi
            echo "+ ci/lib/install-plugin.sh: the sdist of a per-env copy, pip install (isolated build)"
            if ! bash ci/lib/install-plugin.sh "$ENVS/$pair.plugin-build.log"; then
                tail -n 60 "$ENVS/$pair.plugin-build.log"
                echo "FAILED: building/installing the plugin for pair $pair (full log:" \
                    "$ENVS/$pair.plugin-build.log)"
                echo "plugin build failed" >"$status_file"
                exit 1
            fi
            echo "installed: $(python -m pip show torch_npu_pinpool 2>/dev/null | grep -E '^(Name|Version):' | tr '\n' ' ')"
            if [[ "$ARCH" == aarch64 ]] && ! aarch64_check_extension; then
                echo "the installed _C is not an AArch64 ELF" >"$status_file"
                exit 1
            fi
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
        counts=""
        leg="$pair"
        [[ "$ARCH" == x86_64 ]] || leg="$pair $ARCH"
        [[ "$PAIR_REFUSED" != 1 ]] || leg="$pair refusal"
        junit="$ENVS/$pair.junit.xml"
        rm -f "$junit"
        if [[ $build_check == 1 && "$PAIR_REFUSED" != 1 ]]; then
            # The build check: doctor instead of the suite (the as-NPU leg below follows). From an
            # empty directory: the checkout's torch_npu_pinpool/ (no _C) would shadow the install.
            tmp="$(mktemp -d)"
            echo "+ python -m torch_npu_pinpool doctor   (SIMCANN_LIB_DIR unset, as on an NPU)"
            out="$(cd "$tmp" && env -u SIMCANN_LIB_DIR python -m torch_npu_pinpool doctor 2>&1)"
            rc=$?
            rmdir "$tmp"
            echo "$out"
            if [[ $rc == 0 && "$out" == *"self-test:"*PASS* ]]; then
                counts="torch_npu $PINPOOL_NPU_BUILD: doctor PASS"
            else
                echo "FAILED: doctor did not print PASS with torch_npu $PINPOOL_NPU_BUILD (exit $rc)" >&2
                counts="torch_npu $PINPOOL_NPU_BUILD: doctor FAILED"
                [[ $rc != 0 ]] || rc=1
            fi
        elif [[ "$ARCH" == aarch64 && "$PAIR_REFUSED" != 1 ]]; then
            aarch64_leg "${xdist[@]}" --junitxml="$junit" "$@"
            rc=$?
        else
            echo "+ python -m pytest ${tests[*]} ${xdist[*]} $*"
            python -m pytest "${tests[@]}" "${xdist[@]}" --junitxml="$junit" "$@"
            rc=$?
        fi
        [[ $build_check == 1 && "$PAIR_REFUSED" != 1 ]] || record_leg "$leg" "$line" "$junit" "$rc"
        if [[ $rc == 0 && "$pair" == "$PINPOOL_REGISTER_PAIR" && "$ARCH" != aarch64 ]]; then
            # Registered-memory leg (issue #11): torch_npu's pinned_mem_register path (malloc +
            # aclrtHostRegisterV2), which it enables only on CANN >= 8.5: the simulator says 8.5.
            reg_tests=(test/pinpool/test_capture_replay.py test/pinpool/test_pool_lifetime.py
                test/pinpool/test_stats_contract.py test/pinpool/test_pageable_copy.py)
            echo "+ SIMCANN_CANN_VERSION=8.5.0 PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True" \
                "python -m pytest ${reg_tests[*]} ${xdist[*]} $*"
            reg_junit="$ENVS/$pair.registered-memory.xml"
            rm -f "$reg_junit"
            SIMCANN_CANN_VERSION=8.5.0 PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True \
                python -m pytest "${reg_tests[@]}" "${xdist[@]}" --junitxml="$reg_junit" "$@"
            rc=$?
            record_leg "$pair registered-memory" "$line" "$reg_junit" "$rc"
            [[ $rc == 5 ]] && rc=0  # extra arguments (-k ...) deselected all of them
        fi
        t_test=$((SECONDS - t))
        as_npu=""
        if [[ (" $PINPOOL_CI_PAIRS " == *" $pair "* || $build_check == 1) && "$PAIR_REFUSED" != 1 &&
            -f setup.py && "$ARCH" != aarch64 ]]; then
            # The "as a real NPU" leg: the simulator stays the runtime underneath (through
            # LD_LIBRARY_PATH) but its control API is hidden (no SIMCANN_LIB_DIR), so the session
            # takes the path an Ascend runner takes. Same env, same installed plugin: no rebuild.
            banner "pair $pair as a real NPU (PINPOOL_TEST_AS_NPU=1, SIMCANN_LIB_DIR unset)"
            t=$SECONDS
            junit="$ROOT/$pair.as-npu.xml"
            # test_packaging.py builds sdists and never touches the runtime: once (above) is enough.
            echo "+ PINPOOL_TEST_AS_NPU=1 python -m pytest test/pinpool test/stress test/consumers -m 'not simulator' ${xdist[*]}"
            env -u SIMCANN_LIB_DIR PINPOOL_TEST_AS_NPU=1 python -m pytest test/pinpool test/stress \
                test/consumers --deselect test/pinpool/test_packaging.py \
                -m "not simulator" "${xdist[@]}" --junitxml="$junit"
            npu_rc=$?
            as_npu="$(python ci/lib/as_npu_selection.py "$junit")" || npu_rc=1
            # A build check's leg fails with its doctor too (rc above).
            [[ $build_check == 0 || $rc == 0 ]] || npu_rc=$rc
            record_leg "$pair as-npu" "$line" "$junit" "$npu_rc"
            echo "$as_npu"
            as_npu="; as-NPU: $as_npu ($((SECONDS - t))s)"
            if [[ $npu_rc != 0 ]]; then
                echo "FAILED: the as-a-real-NPU leg of pair $pair (pytest exit $npu_rc)" >&2
                [[ $rc == 0 ]] && rc=1
            fi
        fi
        [[ -z "$counts" ]] || as_npu="; $counts$as_npu"
        case $rc in
            0) echo "PASS env ${t_env}s, build ${t_build}s, tests ${t_test}s$as_npu" >"$status_file" ;;
            5)
                echo "FAILED: pytest collected no tests for pair $pair (exit 5)" >&2
                echo "no tests collected (pytest exit 5)" >"$status_file"
                ;;
            *) echo "pytest exit $rc (env ${t_env}s, build ${t_build}s, tests ${t_test}s$as_npu)" >"$status_file" ;;
        esac
        exit $rc
    )
    summary_row "$pair" "$t0" $? "$status_file"
    if ((SECONDS - t0 > LEG_S)); then
        LEG_S=$((SECONDS - t0))
    fi
}

# summary_row LABEL T0 RC STATUS_FILE: a leg's summary row from its exit code and status line.
summary_row() {
    local label="$1" t0="$2" rc="$3" detail
    detail="$(cat "$4")"
    rm -f "$4"
    if [[ $rc == 0 ]]; then
        summary+=("$(printf '%-8s %-6s %5ss  %s' "$label" PASS $((SECONDS - t0)) "${detail#PASS }")")
    else
        summary+=("$(printf '%-8s %-6s %5ss  %s' "$label" FAIL $((SECONDS - t0)) "${detail:-exit $rc}")")
        red=1
    fi
}

# shellcheck source=ci/lib/sanitize_legs.sh
. ci/lib/sanitize_legs.sh # issue #20: PINPOOL_SANITIZE=address|thread legs; PINPOOL_SANITIZE_CI=1
if [[ -n "${PINPOOL_SANITIZE:-}" ]]; then
    for pair in "${pairs[@]}"; do
        sanitize_leg "$pair" "$PINPOOL_SANITIZE" "$@"
    done
    pairs=() optional=() # the suite itself does not run
fi
for pair in "${pairs[@]}"; do
    run_pair "$pair" "$@"
done
for pair in "${optional[@]}"; do
    why=""
    if ! bash ci/lib/envsetup.sh "$pair" --cached; then
        why="env not cached"
    elif ((SECONDS - t_all + LEG_S > BUDGET_S)); then
        why="no time left in the ${PINPOOL_BUDGET_MIN:-70} min budget ($((SECONDS - t_all)) s used, a leg ~${LEG_S} s)"
    fi
    if [[ -n "$why" ]]; then
        summary+=("$(printf '%-8s %-6s %5s   %s' "$pair" "not run" - \
            "optional: $why; run it: PINPOOL_PAIRS=$pair bash ci/test.sh")")
        continue
    fi
    run_pair "$pair" "$@"
done

sanitize_ci_leg "$@"

# --- the next torch, compile only (issue #35) ------------------------------------------------
# Every csrc/ unit against PINPOOL_NEXT_TORCH's headers and the newest torch_npu's, when the
# header cache exists (ci/lib/compile_check.sh; `... fetch VERSION` makes it). Not in a
# sanitizer-only run, on aarch64, or in a run of build checks only (the build workflow has a job
# for it).
plain_pairs=0
for p in "${pairs[@]}" "${optional[@]}"; do [[ "$p" == *@* ]] || plain_pairs=1; done
if [[ -n "${PINPOOL_NEXT_TORCH:-}" && "$ARCH" == x86_64 && -z "${PINPOOL_SANITIZE:-}" &&
    $plain_pairs == 1 ]]; then
    label="torch $PINPOOL_NEXT_TORCH headers"
    if ! bash ci/lib/compile_check.sh cached "$PINPOOL_NEXT_TORCH"; then
        summary+=("$(printf '%-8s %-6s %5s   %s' "$label" "not run" - \
            "no header cache; make it: bash ci/lib/compile_check.sh fetch $PINPOOL_NEXT_TORCH")")
    else
        banner "compile check: torch $PINPOOL_NEXT_TORCH headers"
        t0=$SECONDS
        out="$(mktemp)"
        bash ci/lib/compile_check.sh check "$PINPOOL_NEXT_TORCH" 2>&1 | tee "$out"
        rc=${PIPESTATUS[0]}
        detail="$(grep -E '^  (compiled|PASS|FAILED|stopped)' "$out" | sed 's/^ *//' | cut -c1-120 | paste -sd';' -)"
        rm -f "$out"
        if [[ $rc == 0 ]]; then
            summary+=("$(printf '%-8s %-6s %5ss  %s' "$label" PASS $((SECONDS - t0)) "$detail")")
        else
            summary+=("$(printf '%-8s %-6s %5ss  %s' "$label" FAIL $((SECONDS - t0)) "${detail:-exit $rc}")")
            red=1
        fi
    fi
fi

banner "summary"
printf '%-8s %-6s %6s  %s\n' pair result time detail
printf '%s\n' "${summary[@]}"
# Releases newer than MAX_TORCH_NPU on the package index: a notice, never a failure, silent
# when the index cannot be reached (ci/lib/newer_releases.py).
python3 ci/lib/newer_releases.py 2>/dev/null || true
echo "leg summaries: $RESULTS (render them: python ci/render_results.py)"
echo "total: $((SECONDS - t_all))s"
if [[ $red != 0 ]]; then
    echo "RED: at least one step failed"
    exit 1
fi
echo "GREEN"
