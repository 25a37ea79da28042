#!/usr/bin/env bash
# Run other projects' test files, unmodified, on a pair's simulated runtime, with the plugin on and
# off, and print one table (issue #36; docs/testing.md, "Upstream tests").
#
#   bash ci/upstream.sh PAIR FILE... [-k EXPR] [--source TEXT] [--note TEXT] [--record DIR]
#
# The files, at the commits their kept records (ci/results/upstream/) name; the Ascend/pytorch
# v2.10.0 branch has no test_aclgraph_pin_memory.py, so master's file runs on 2.10 too, and
# master's test_npu.py imports there (its 7 selected tests are the same code on v2.10.0,
# cf904390f952cf20b477eb4794b16198de2134fa, which differs only in two tests not selected):
#
#   git clone --filter=blob:none https://github.com/Ascend/pytorch /tmp/ascend-pytorch
#   REV=9e73e708ab9350d203475609f36f8a43f6a0c2ab    # master; the pin-memory file last changed in 18f23f8f
#   mkdir -p /tmp/upstream
#   git -C /tmp/ascend-pytorch show $REV:test/npu/test_aclgraph_pin_memory.py > /tmp/upstream/test_aclgraph_pin_memory.py
#   git -C /tmp/ascend-pytorch show $REV:test/npu/test_npu.py > /tmp/upstream/test_npu.py
#   SRC="Ascend/pytorch ${REV:0:12} (master)"
#   bash ci/upstream.sh 2.14 /tmp/upstream/test_aclgraph_pin_memory.py \
#       --source "$SRC test/npu/test_aclgraph_pin_memory.py" --record ci/results/upstream
#   bash ci/upstream.sh 2.14 /tmp/upstream/test_npu.py \
#       -k "copy_non_blocking or to_non_blocking or pinned_memory or record_stream or to_cpu_blocking_by_default" \
#       --source "$SRC test/npu/test_npu.py" --record ci/results/upstream      # the 7 tests that pin memory
#   (the same two on 2.10), then `python ci/render_results.py`.
#
# TorchAir's smoke test, Ascend/torchair fced8842d149f16b587c2c867d427e4b766831ca, on 2.14
# (`git -C TORCHAIR show REV:tests/smoke/aclgraph_test.py > /tmp/upstream/ta/aclgraph_test.py`),
# the tests that need neither the graph engine nor a fused operator the simulator lacks:
#
#   SIMCANN_DEVICE_COUNT=2 bash ci/upstream.sh 2.14 /tmp/upstream/ta/aclgraph_test.py -k "memory_state_setting or \
#   static_kernel_multi_model or (aclgraph_static_kernel and not cache) or scope_with_post_pass or \
#   batch_matmul_transpose or stream_event or event_wait or event_record or stream_wait or \
#   stream_record or inherited_global_limit_core or clone_output" \
#       --source "Ascend/torchair fced8842 tests/smoke/aclgraph_test.py" --record ci/results/upstream
#
# (SIMCANN_DEVICE_COUNT=2: a test uses npu:1.) Its passes reach aclnnSqrt, aclnnSoftmax and
# float16 aclnnMatmul (modelled); its failures, plugin on and off alike, are none of the
# plugin's, and the record's note names each. Left out of the selection: the max-autotune tests
# (*_for_ge: TorchAir's graph engine, whose initialisation reaches a simulator stub that aborts
# the process, by design), and the tests whose graphs run fused operators the simulator does not
# model. Run once outside the selection (plugin on), those 23 were:
#   - aclgraph_cache_with_static_kernel, aclgraph_cache_recapture_with_ops_update,
#     replay_update_stream_same: fail at aclnnFusedInferAttentionScoreV3 (a paged / quantized /
#     masked attention kernel with dozens of layouts; modelling it honestly is a project of its
#     own, not attempted);
#   - the 6 aclgraph_userinput_construct_*: fail before the runtime (Dynamo's fake-tensor pass
#     refuses the test's float16 attention output @ a float32 Linear); FIA V3 would come next;
#   - close_pattern_pass_for_aclgraph, pattern_pass_addrmsnorm_quant, ..._mismatched,
#     pattern_pass_for_cast_with_subgraph_in_diff_stream,
#     pattern_pass_for_dynamicquant_with_subgraph_in_diff_stream: aclnnAddRmsNorm (not modelled);
#   - pattern_pass_for_aclgraph, ..._with_epsilon, ..._with_multistream:
#     aclnnAddRmsNormDynamicQuantV2 (the fused op TorchAir's pattern pass produces; not modelled);
#   - pattern_pass_addrmsnorm_quant_with_diff_stream: torch._dynamo.utils.store_user_object_weakref
#     (gone in torch 2.14);
#   - pattern_pass_addrmsnorm_quant_skip_duplicates: passes (not yet in the selection);
#   - aclgraph_update_param_with__npu_paged_attention, aclgraph_with_superkernel: skipped by the
#     file (no ATB; "unsupported until cann support");
#   - pattern_pass_for_ge, close_pattern_pass_for_ge: not run (the graph engine).
#
# Simulator variables pass through: SIMCANN_CANN_VERSION=8.5.0 makes the simulated runtime report
# a CANN / driver new enough for torch_npu's version-gated features
# (pin_memory_expandable_segments, pinned_mem_register), otherwise off. PINPOOL_SIM_ROOT=DIR builds
# this checkout's simulator under DIR instead of in the shared env.
#
# What it does:
#   1. `source ci/sim-env.sh PAIR` (creates / reuses the pair's env and simulator build);
#   2. imports each FILE once (plugin off); a module it lacks (ModuleNotFoundError: expecttest,
#      hypothesis, ...) is pip-installed into the env and the import retried (a few rounds);
#   3. builds the plugin from this checkout into a private directory
#      (PINPOOL_PLUGIN_TARGET=DIR ci/lib/install-plugin.sh; DIR under the env, one per checkout),
#      put first on PYTHONPATH, so the env's own install is left alone;
#   4. per FILE: `python -m pytest FILE` in FILE's directory, once with the plugin on (torch's
#      backend autoload on, as users have it: the plugin's `torch.backends` entry point
#      activates it; checked before the run) and once with TORCH_NPU_PINPOOL=0; each run under a
#      timeout (PINPOOL_UPSTREAM_TIMEOUT seconds, default 1200), results from pytest's JUnit XML;
#   5. prints the table: file, plugin on / off as passed / failed (incl. errors) / skipped;
#   6. writes one JSON record per FILE (ci/lib/upstream_record.py: pair, torch / torch_npu, the
#      file, --source (where it came from: repository, commit, path), -k, SIMCANN_CANN_VERSION,
#      --note, both counts, this checkout's commit, the date, the command) into $WORK/records/,
#      and with --record DIR into DIR too: `--record ci/results/upstream` keeps it in the
#      repository, where `python ci/render_results.py` puts it in docs/test-results.md.
# Exit status: 0 when every run finished (whatever its results), 1 when a step failed.
# The files are never copied into the repository: keep them outside it (pytest runs from their
# directory, and this repository's pytest.ini / conftest.py must not apply to them).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
USAGE="usage: bash ci/upstream.sh PAIR FILE... [-k EXPR] [--source TEXT] [--note TEXT] [--record DIR]"
PAIR="${1:?$USAGE}"
shift
FILES=()
KEXPR=()
SOURCE=""
NOTE=""
RECORD=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        -k) KEXPR=(-k "${2:?-k needs an expression}"); shift 2 ;;
        --source) SOURCE="${2:?--source needs a text}"; shift 2 ;;
        --note) NOTE="${2:?--note needs a text}"; shift 2 ;;
        --record) RECORD="$(mkdir -p "${2:?--record needs a directory}" && cd "$2" && pwd)"; shift 2 ;;
        *) FILES+=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
    esac
done
[[ ${#FILES[@]} -gt 0 ]] || { echo "$USAGE" >&2; exit 2; }
say() { printf '[upstream %s] %s\n' "$PAIR" "$*" >&2; }

cd "$REPO"
# shellcheck source=ci/sim-env.sh
source ci/sim-env.sh "$PAIR" || exit 1
WORK="$VIRTUAL_ENV/upstream/$(printf '%s' "$REPO" | md5sum | cut -c1-8)"
mkdir -p "$WORK"

# ---- 2. what the files import ------------------------------------------------------------
# Import names whose PyPI package has another name.
pypi_name() {
    case "$1" in
        yaml) echo pyyaml ;;
        google) echo protobuf ;;
        *) echo "$1" ;;
    esac
}
missing_module() { # $1: file; prints the module its import lacks, nothing if it imports
    (cd "$(dirname "$1")" && TORCH_NPU_PINPOOL=0 timeout 300 python - "$1" <<'EOF' 2>/dev/null
import importlib.util, sys
spec = importlib.util.spec_from_file_location("upstream_under_test", sys.argv[1])
try:
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
except ModuleNotFoundError as e:
    print("UPSTREAM-MISSING:" + (e.name or "").split(".")[0])
except BaseException:
    pass  # not a missing module: pytest will report it
EOF
    ) | sed -n 's/^UPSTREAM-MISSING://p' | head -1
}
for f in "${FILES[@]}"; do
    for _round in 1 2 3 4 5; do
        mod="$(missing_module "$f")"
        [[ -z "$mod" ]] && break
        say "$(basename "$f") imports '$mod', missing: pip install $(pypi_name "$mod")"
        python -m pip install -q --disable-pip-version-check "$(pypi_name "$mod")" >&2 ||
            { say "FAILED: pip install $(pypi_name "$mod")"; exit 1; }
    done
done

# ---- 3. the plugin, private ---------------------------------------------------------------
# Rebuilt only when the plugin's sources (tracked or not, uncommitted edits included) changed.
SITE="$WORK/site"
stamp="$(git ls-files -z --cached --others --exclude-standard -- csrc torch_npu_pinpool setup.py \
    pyproject.toml build_backend MANIFEST.in | xargs -0 sha1sum 2>/dev/null | sha1sum | cut -c1-16)"
if [[ -d "$SITE" && "$(cat "$WORK/site.stamp" 2>/dev/null)" == "$stamp" ]]; then
    say "plugin: $SITE is up to date"
else
    say "building the plugin into $SITE (log: $WORK/install.log)"
    rm -f "$WORK/site.stamp"
    PINPOOL_PLUGIN_TARGET="$SITE" bash ci/lib/install-plugin.sh "$WORK/install.log" ||
        { say "FAILED: plugin build (tail of $WORK/install.log below)"; tail -20 "$WORK/install.log" >&2; exit 1; }
    echo "$stamp" >"$WORK/site.stamp"
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export TORCH_DEVICE_BACKEND_AUTOLOAD=1

plugin_active() { # prints yes / no for the current TORCH_NPU_PINPOOL (run outside the checkout,
    # whose torch_npu_pinpool/ sources would shadow the installed package)
    cd "$WORK" && python -c 'import sys, torch, torch_npu
m = sys.modules.get("torch_npu_pinpool")
print("yes" if m is not None and m.is_active() else "no")' 2>/dev/null | tail -1
}
[[ "$(plugin_active)" == yes ]] || { say "FAILED: the plugin is not active with the autoload on"; exit 1; }
[[ "$(TORCH_NPU_PINPOOL=0 plugin_active)" == no ]] || { say "FAILED: TORCH_NPU_PINPOOL=0 left it on"; exit 1; }

# ---- 4. the runs --------------------------------------------------------------------------
counts() { # $1: junit xml -> "passed/failed/skipped"
    python - "$1" <<'EOF'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print("no result"); sys.exit()
p = f = s = 0
for case in root.iter("testcase"):
    kinds = {child.tag for child in case}
    if kinds & {"failure", "error"}:
        f += 1
    elif "skipped" in kinds:
        s += 1
    else:
        p += 1
print(f"{p}/{f}/{s}")
EOF
}
ROWS=()
COUNTS=() # per file: "on off" as passed/failed/skipped[ (timed out)]
n=0
for f in "${FILES[@]}"; do
    n=$((n + 1))
    row="$(basename "$f")"
    for mode in on off; do
        xml="$WORK/$n-$mode.xml"
        log="$WORK/$n-$mode.log"
        rm -f "$xml"
        pinpool=1
        [[ "$mode" == off ]] && pinpool=0
        say "$(basename "$f"), plugin $mode (log: $log)"
        (cd "$(dirname "$f")" && TORCH_NPU_PINPOOL=$pinpool timeout "${PINPOOL_UPSTREAM_TIMEOUT:-1200}" \
            python -m pytest -q -p no:cacheprovider --rootdir "$(dirname "$f")" \
            --junitxml "$xml" "${KEXPR[@]}" "$f") >"$log" 2>&1
        rc=$?
        c="$(counts "$xml")"
        [[ $rc -eq 124 ]] && c="$c (timed out)"
        row="$row|$c"
    done
    ROWS+=("$row")
    COUNTS+=("${row#*|}")
done

# ---- 5. the table -------------------------------------------------------------------------
echo
echo "torch_npu $(cd "$WORK" && python -c "import torch, torch_npu; print(torch_npu.__version__)" 2>/dev/null | tail -1) (pair $PAIR), simulated CANN runtime; passed/failed/skipped"
printf '| %s | %s | %s |\n' "file" "plugin on" "plugin off (TORCH_NPU_PINPOOL=0)"
printf '|---|---|---|\n'
for r in "${ROWS[@]}"; do
    IFS='|' read -r name on off <<<"$r"
    printf '| %s | %s | %s |\n' "$name" "$on" "$off"
done
echo "logs and JUnit XML: $WORK"

# ---- 6. the records -----------------------------------------------------------------------
# torch before torch_npu: with the backend autoload on, a bare `import torch_npu` aborts in the
# test envs ("Duplicated key 'pinned_reserve_segment_size_mb'": the autoload imports torch_npu
# before _pinpool_testenv's key fix runs), which left the records' torch / torch_npu empty.
versions="$(cd "$WORK" && python -c 'import importlib.metadata as m, torch, torch_npu
print(m.version("torch"), torch_npu.__version__)' 2>/dev/null | tail -1)"
commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
[[ -z "$(git status --porcelain -- csrc torch_npu_pinpool simcann ci ':!ci/results' 2>/dev/null)" ]] ||
    commit="$commit+changes"
n=0
for f in "${FILES[@]}"; do
    IFS='|' read -r on off <<<"${COUNTS[$n]}"
    n=$((n + 1))
    args=(--pair "$PAIR" --torch "${versions%% *}" --torch-npu "${versions##* }" --file "$f"
        --source "$SOURCE" --select "${KEXPR[1]:-}" --cann-version "${SIMCANN_CANN_VERSION:-}"
        --note "$NOTE" --on "$on" --off "$off" --commit "$commit" --out "$WORK/records")
    [[ -n "$RECORD" ]] && args+=(--out "$RECORD")
    python "$REPO/ci/lib/upstream_record.py" "${args[@]}" >&2 ||
        { say "FAILED: writing the record of $(basename "$f")"; exit 1; }
done
