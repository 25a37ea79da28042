#!/usr/bin/env bash
# One sanitizer leg (issue #20): the plugin (csrc/) and the simulated runtime (simcann/src)
# built instrumented, the tests run with the sanitizer runtime preloaded, every report counted.
#
#   bash ci/lib/sanitize.sh PAIR KIND STATUS_FILE [pytest args...]    KIND: address | thread
#
# ci/test.sh runs it for PINPOOL_SANITIZE=address|thread (every pair of PINPOOL_PAIRS), on the
# selection of ci/legs/sanitize.sh. What it does, in PAIR's env (ci/sim-env.sh):
#   1. the simulator, built with `simcann/build.sh --sanitize` into its own directory
#      ($VIRTUAL_ENV/simcann-sanitize/HASH-KIND; the env's normal build stays as it is);
#   2. the plugin, built from its sdist with TORCH_NPU_PINPOOL_SANITIZE (setup.py) and installed
#      with `pip install --target $VIRTUAL_ENV/sanitize-KIND/site`, put first on PYTHONPATH (the
#      env's own install stays as it is);
#   3. pytest on the leg's selection (PINPOOL_SANITIZE_TESTS, default below) with the runtime
#      preloaded (LD_PRELOAD: gcc's libasan + libstdc++, or libtsan + libstdc++) and options
#      that make a report stop the process (halt_on_error, abort_on_error); the options and the
#      preload reach every subprocess through the environment. Every process writes its reports
#      to $REPORTS/<tool>.<pid> (log_path); test/conftest.py fails the test whose scenario left
#      one; test/sanitizer_reports.py counts them all. Leak checking (LeakSanitizer, at exit,
#      with PYTHONMALLOC=malloc so that it sees CPython's pointers) fails only on leaks with a
#      frame of csrc/ or simcann/; the others are counted and listed;
#   4. the injected defects (marker sanitizer_injected, Note [Injected sanitizer reports]): each
#      test this build has the sanitizer for must FAIL, with the sanitizer's report in its
#      failure, or the leg is red.
# STATUS_FILE gets one line for ci/test.sh's summary: tests run, reports, injected caught, times.
#
# Why gcc's runtimes: the plugin is built by the compiler pip's build uses (c++, gcc 12 here and
# on the CI image), and an instrumented object needs the runtime of its own compiler; clang's
# would need a clang build of both. The C++ runtime is preloaded too: python does not link
# libstdc++, and without it the ASan runtime cannot intercept __cxa_throw, which torch_npu calls
# ("CHECK failed: ... real___cxa_throw").
#
# One test by hand: `bash ci/lib/sanitize.sh 2.14 address /dev/stdout -k NAME` (a rerun reuses
# the sanitized builds while their sources are unchanged; a plugin build takes 3-7 min on 2 cores,
# the simulator's under 1.5 min). The reports stay in ENV_ROOT/PAIR.sanitize-KIND.reports/.
#
# Reports: every ASan, UBSan and TSan error report in any process, and every leak whose allocation
# stack has a frame of csrc/ or simcann/. Leaks with no such frame (CPython's and torch's
# objects alive at exit: 1217 on 2.13, 1433 on 2.10 when counted) and leaks of ours a third party
# owns are counted and listed, never hidden; the latter are recognised by their allocation stack,
# each kind with its reason in test/sanitizer_reports.py: an object an ACL entry point creates for
# torch_npu, which never destroys it ("handed over": 21 on 2.13, 31 on 2.10), and pybind11 3.0.1's
# function records (torch 2.10's pybind11 never frees them: 1134). The 2.10 skips are what
# torch_npu 2.10 lacks (conditional nodes, the pool hooks of >= 2.11) and native 2.10's
# timing-dependent cases.
#
# ThreadSanitizer cannot see torch_npu's task queue (not instrumented): the simulated runtime
# restates the order the queue gives the handles it carries (events, streams, aclnn executors and
# descriptors: Note [Handles handed over through torch_npu's task queue],
# simcann/src/handoff.h, thread builds only). The bytes a copy or memset moves are the
# device's, which TSan cannot see on an NPU, so the simulator moves them out of its sight too
# (Note [The device's memory accesses], simcann/src/device_access.h): a program's race
# between two streams' copies shows, as on an NPU, only in the bytes the tests check.
# ci/lib/tsan-suppressions.txt names foreign code only (torch_npu's release queue and its error
# message built on its queue thread, autograd's GraphTask, PyTorch's futures), each with its
# reason; none names csrc/ or simcann/.
#
# Found so far: no report in csrc/. In the simulated runtime two races, both fixed:
# device_malloc read a device's byte count without its lock (0504969), and the device's own
# copies were visible to TSan as a host thread's accesses, so a program's race on its data
# (native 2.10 recycling a block a replay still read, test_vllm_patterns.py sleep / wake, plugin
# off) was reported inside the runtime (96fdc5c, Note [The device's memory accesses];
# test_streams_racing_on_a_pinned_buffer_is_the_programs_race reproduces it, plugin on and off).
# Not run yet: either sanitizer on 2.12 - 2.8. .github/workflows/sanitizers.yml runs both legs on
# 2.14 and 2.10 twice a week and on demand.
set -uo pipefail

# All of it in one function, read before it runs: editing the file during a leg cannot derail it.
main() {

    PAIR="${1:?usage: sanitize.sh PAIR address|thread STATUS_FILE [pytest args]}"
    KIND="${2:?usage: sanitize.sh PAIR address|thread STATUS_FILE [pytest args]}"
    STATUS="${3:?usage: sanitize.sh PAIR address|thread STATUS_FILE [pytest args]}"
    shift 3
    REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    cd "$REPO"
    ROOT="${PINPOOL_ENV_ROOT:-$HOME/.cache/torch_npu_pinpool/envs}"

    case "$KIND" in
        address) SAN=address,undefined RUNTIME=libasan.so SHORT=asan ;;
        thread) SAN=thread RUNTIME=libtsan.so SHORT=tsan ;;
        *)
            echo "sanitize.sh: KIND is address or thread, not '$KIND'" >&2
            echo "unknown sanitizer '$KIND'" >"$STATUS"
            exit 2
            ;;
    esac
    say() { printf '[sanitize %s %s] %s\n' "$PAIR" "$KIND" "$*"; }
    fail() {
        say "FAILED: $1"
        echo "$1" >"$STATUS"
        exit 1
    }

    # shellcheck source=ci/sim-env.sh
    source ci/sim-env.sh "$PAIR" || fail "env setup failed"
    # shellcheck source=ci/lib/pairs.sh
    . ci/lib/pairs.sh
    pinpool_pair_spec "$PAIR"
    [[ "$PAIR_REFUSED" == 1 ]] && fail "pair $PAIR is below the supported range: nothing to sanitize"

    # The runtime of the compiler that builds both libraries (gcc's, see above).
    runtime="$(readlink -f "$(g++ -print-file-name="$RUNTIME")")"
    cxxrt="$(readlink -f "$(g++ -print-file-name=libstdc++.so.6)")"
    [[ -f "$runtime" && -f "$cxxrt" ]] ||
        fail "no $RUNTIME for $(g++ --version | head -1) (Debian: apt-get install libasan8 libtsan2 libubsan1)"

    # --- 1. the simulator, instrumented, in its own directory ----------------------------------------
    t=$SECONDS
    sim_hash="$(basename "$(dirname "$SIMCANN_LIB_DIR")")" # the normal build's source hash
    sim_base="$VIRTUAL_ENV/simcann-sanitize"
    sim_dir="$sim_base/$sim_hash-$KIND"
    log="$ROOT/$PAIR.sanitize-$KIND.log"
    : >"$log"
    if [[ ! -f "$sim_dir/.stamp" ]]; then
        say "building the simulator with -fsanitize=$SAN into $sim_dir (log: $log)"
        rm -rf "$sim_dir.new"
        nice -n 5 bash simcann/build.sh --python "$(command -v python)" --out "$sim_dir.new" \
            --sanitize "$SAN" >>"$log" 2>&1 || { tail -n 30 "$log"; fail "simulator build failed"; }
        echo "$sim_hash" >"$sim_dir.new/.stamp"
        find "$sim_base" -mindepth 1 -maxdepth 1 -name "*-$KIND" -exec rm -rf {} + # older sources
        mv "$sim_dir.new" "$sim_dir"
    fi
    t_sim=$((SECONDS - t))

    # --- 2. the plugin, instrumented, beside the env's own install -----------------------------------
    t=$SECONDS
    site="$VIRTUAL_ENV/sanitize-$KIND/site"
    # Rebuilt when what goes into the sdist changes (a clean clone always builds; by hand, a rerun
    # with the same sources reuses the build).
    plugin_hash="$(
        git ls-files -z --cached --others --exclude-standard -- csrc torch_npu_pinpool build_backend \
            setup.py pyproject.toml MANIFEST.in | xargs -0 sha256sum
        echo "$SAN $VIRTUAL_ENV"
    )"
    plugin_hash="$(sha256sum <<<"$plugin_hash" | cut -c1-16)"
    if [[ "$(cat "$site/.stamp" 2>/dev/null)" != "$plugin_hash" ]]; then
        say "building the plugin with TORCH_NPU_PINPOOL_SANITIZE=$SAN into $site"
        if ! TORCH_NPU_PINPOOL_SANITIZE="$SAN" PINPOOL_PLUGIN_TARGET="$site" \
            bash ci/lib/install-plugin.sh "$log.plugin"; then
            tail -n 40 "$log.plugin"
            fail "plugin build failed (log: $log.plugin)"
        fi
        echo "$plugin_hash" >"$site/.stamp"
    fi
    t_build=$((SECONDS - t))
    for lib in "$sim_dir/lib/libascendcl.so" "$site"/torch_npu_pinpool/_C*.so; do
        readelf -d "$lib" | grep -q "NEEDED.*${RUNTIME%.so}" || fail "$lib is not instrumented ($RUNTIME)"
    done

    # --- 3. the environment of every test process ---------------------------------------------------
    reports="$ROOT/$PAIR.sanitize-$KIND.reports"
    rm -rf "$reports" "$reports.injected"
    mkdir -p "$reports" "$reports.injected"
    export SIMCANN_LIB_DIR="$sim_dir/lib"
    LD_LIBRARY_PATH="$sim_dir/lib:$(printf '%s' "$LD_LIBRARY_PATH" | tr ':' '\n' |
        grep -v "^$VIRTUAL_ENV/simcann/" | paste -sd: -)"
    export LD_LIBRARY_PATH
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    # Preloaded into the test processes only (san), not into this script's tools.
    san() { LD_PRELOAD="$runtime $cxxrt" "$@"; }
    [[ "$KIND" == address ]] && export PYTHONMALLOC=malloc # LeakSanitizer must see CPython's pointers
    # sanitizer_options DIR: the runtimes' options, reports to DIR/<tool>.<pid>; conftest.py reads them.
    # abort_on_error: a report kills the process (SIGABRT) whatever its exit code would have been;
    # exitcode=0: LeakSanitizer's at-exit report alone does not change the exit status (it is
    # attributed and counted from the log instead: test/sanitizer_reports.py).
    # intercept_tls_get_addr=0: with it, gcc 12's LeakSanitizer crashes at exit while it scans
    # the dynamic-TLS ranges its __tls_get_addr interceptor recorded ("Tracer caught signal 11:
    # addr=0x12f0", in ScanRangeForPointers; test/scenarios/eager_async_copies.py: 4 runs of 4,
    # plugin on and off; without it 0 of 4, and the same leaks found). Dynamic TLS blocks are
    # malloc'ed, so LeakSanitizer still reaches them through the threads' static TLS.
    sanitizer_options() {
        local common="halt_on_error=1:abort_on_error=1:disable_coredump=1:print_summary=1"
        export PINPOOL_SANITIZER_REPORTS="$1"
        if [[ "$KIND" == address ]]; then
            export ASAN_OPTIONS="$common:exitcode=0:detect_leaks=1:intercept_tls_get_addr=0:log_path=$1/asan"
            export UBSAN_OPTIONS="$common:print_stacktrace=1:log_path=$1/ubsan"
        else
            # suppressions: code outside this project, each with its reason (the file says).
            export TSAN_OPTIONS="$common:second_deadlock_stack=1:suppressions=$REPO/ci/lib/tsan-suppressions.txt:log_path=$1/tsan"
        fi
    }
    sanitizer_options "$reports"
    say "LD_PRELOAD=$runtime $cxxrt"
    say "${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS }${UBSAN_OPTIONS:+UBSAN_OPTIONS=$UBSAN_OPTIONS }${TSAN_OPTIONS:+TSAN_OPTIONS=$TSAN_OPTIONS}"
    # (From another directory: in the checkout the source package would shadow the installed one.)
    (cd / && san python -c 'import torch_npu_pinpool as p, torch_npu_pinpool._C as c
assert p.is_active() and c.sanitizers, c.sanitizers
print("plugin:", c.__file__, "sanitizers:", c.sanitizers)') || fail "the sanitized plugin does not load"

    # gcc 12's sanitizer runtimes cannot place their shadow memory under the 32 bits of mmap
    # randomisation newer kernels may use ("FATAL: ThreadSanitizer: unexpected memory mapping"):
    # there the tests run without address randomisation (setarch -R; the children inherit it).
    norandom=()
    if (($(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28) > 28)); then
        command -v setarch >/dev/null || fail "vm.mmap_rnd_bits > 28 and no setarch to turn randomisation off"
        norandom=(setarch "$(uname -m)" -R)
    fi

    # --- 4. the suite -------------------------------------------------------------------------------
    # Default (run by hand): every allocator test (test_packaging.py only builds sdists with pip).
    default_tests="test/pinpool test/repo test/stress test/consumers --deselect test/repo/test_packaging.py"
    # shellcheck disable=SC2206 # a list of paths and options, split on white space
    tests=(${PINPOOL_SANITIZE_TESTS:-$default_tests})
    xdist=()
    workers="${PINPOOL_XDIST:-2}"
    [[ "$workers" != 0 ]] && python -c 'import xdist' 2>/dev/null && xdist=(-n "$workers")
    t=$SECONDS
    junit="$reports.xml"
    say "+ python -m pytest ${tests[*]} -m 'not sanitizer_injected' ${xdist[*]} $*"
    san "${norandom[@]}" python -m pytest "${tests[@]}" -m "not sanitizer_injected" "${xdist[@]}" \
        --junitxml="$junit" "$@"
    rc=$?
    t_test=$((SECONDS - t))
    counts="$(python test/sanitizer_reports.py --count "$junit")" || counts="no test report ($junit)"
    say "sanitizer reports of the suite ($reports):"
    python test/sanitizer_reports.py "$reports" >"$reports.txt"
    report_rc=$?
    cat "$reports.txt"
    report_line="$(tail -n 1 "$reports.txt")"

    # --- 5. the injected defects must be caught ------------------------------------------------------
    t=$SECONDS
    sanitizer_options "$reports.injected"
    say "+ python -m pytest test/pinpool/test_sanitizer_injected.py -m sanitizer_injected (each must FAIL)"
    san "${norandom[@]}" python -m pytest test/pinpool/test_sanitizer_injected.py -m sanitizer_injected \
        -p no:cacheprovider --junitxml="$reports.injected.xml" -q
    injected="$(python test/sanitizer_reports.py --injected "$reports.injected.xml" "$SAN")"
    injected_rc=$?
    say "injected: $injected"
    t_inj=$((SECONDS - t))

    detail="$counts; $report_line; injected: $injected (sim ${t_sim}s, build ${t_build}s, tests ${t_test}s, injected ${t_inj}s)"
    # The leg's summary for docs/test-results.md (ci/lib/leg_summary.py; never fails the leg):
    # red when the suite, the report check or the injected defects failed.
    leg_rc=0
    [[ $rc == 0 && $report_rc == 0 && $injected_rc == 0 ]] || leg_rc=1
    python ci/lib/leg_summary.py --leg "$PAIR $SHORT" --pair "$PAIR" --junit "$junit" --rc "$leg_rc" \
        --out "${PINPOOL_RESULTS_DIR:-$REPO/build/test-results}" || true
    if [[ $rc == 5 ]]; then
        fail "pytest collected no tests; $detail"
    elif [[ $rc != 0 || $report_rc != 0 || $injected_rc != 0 ]]; then
        echo "pytest exit $rc; $detail" >"$STATUS"
        exit 1
    fi
    echo "PASS $detail" >"$STATUS"
}
main "$@"
exit
