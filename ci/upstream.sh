#!/usr/bin/env bash
# Run other projects' test files, unmodified, on a pair's simulated runtime, with the plugin on and
# off, and print one table (docs/testing.md, "Upstream tests").
#
#   bash ci/upstream.sh PAIR FILE... [-k EXPR] [--source TEXT] [--note TEXT] [--record DIR]
#
#   e.g. the pinned-memory tests of torch_npu at a commit of Ascend/pytorch:
#     git --git-dir=DIR show REV:test/npu/test_aclgraph_pin_memory.py > /tmp/upstream/a.py
#     bash ci/upstream.sh 2.14 /tmp/upstream/a.py
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
[[ -z "$(git status --porcelain -- csrc torch_npu_pinpool test/simcann ci ':!ci/results' 2>/dev/null)" ]] ||
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
