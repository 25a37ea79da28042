#!/usr/bin/env bash
# The compile-only check against a torch release that no torch_npu pairs with yet (issue #35:
# torch 2.15.0 shipped before torch_npu 2.15). Owns the header cache and the check: every csrc/
# unit compiled (-fsyntax-only, the flags torch's CppExtension uses) against that torch's headers
# and the newest supported torch_npu's headers (the first pair of PINPOOL_ALL_PAIRS, from its
# cached env). Nothing is linked or run.
#
#   bash ci/lib/compile_check.sh fetch 2.15.0    # download torch's wheel (pip download --no-deps),
#                                                # keep torch/include/ only; ~540 MB download
#   bash ci/lib/compile_check.sh cached 2.15.0   # exit 0 if that header cache exists
#   bash ci/lib/compile_check.sh check 2.15.0    # compile every csrc/**/*.cpp; log in the cache dir
#
# Cache: ${PINPOOL_ENV_ROOT:-$HOME/.cache/torch_npu_pinpool/envs}/headers/torch-VERSION/
# (include/ and cflags: the -std flag of that torch's cpp_extension.py). ci/test.sh runs `check`
# for PINPOOL_NEXT_TORCH (ci/lib/pairs.sh) only when the cache exists.
#
# Verdict: PASS when every unit compiles. An error located in torch_npu's own headers (that
# torch_npu release was built for an older torch) is reported as such, not worked around, and
# does not fail the check: the units it stops are named, and docs/matrix.md lists it. Any other
# error (in csrc/, or in torch's headers reached from csrc/) fails it: csrc/runtime/version_shim.h is the
# place to handle the new torch.
#
# PINPOOL_CHECK_TORCH_INCLUDE=DIR: check against the torch headers in DIR instead of the cache
# (a control run: an installed torch's site-packages/torch/include). PINPOOL_CHECK_JOBS: parallel
# compiles (default 2).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=ci/lib/pairs.sh
. "$HERE/pairs.sh"

usage() {
    echo "usage: bash ci/lib/compile_check.sh fetch|cached|check TORCH_VERSION   (e.g. 2.15.0)" >&2
    exit 2
}
[[ $# == 2 ]] || usage
CMD="$1"
VERSION="$2"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || usage
ROOT="${PINPOOL_ENV_ROOT:-$HOME/.cache/torch_npu_pinpool/envs}"
CACHE="$ROOT/headers/torch-$VERSION"
say() { printf '[compile-check torch %s] %s\n' "$VERSION" "$*" >&2; }
die() {
    # $1: what failed, $2: what to do
    printf '[compile-check torch %s] FAILED: %s\n[compile-check torch %s] what to do: %s\n' \
        "$VERSION" "$1" "$VERSION" "$2" >&2
    exit 1
}

cache_is_complete() { [[ -f "$CACHE/.pinpool-stamp" && -d "$CACHE/include/ATen" ]]; }

fetch() {
    cache_is_complete && { say "header cache exists: $CACHE"; return 0; }
    local tmp out wheel
    tmp="$(mktemp -d)"
    trap "rm -rf '$tmp'" EXIT
    say "downloading torch==$VERSION (the wheel only, --no-deps) to extract its headers"
    if ! out="$(python3 -m pip download --disable-pip-version-check --no-deps \
        --only-binary=:all: --python-version 3.11 "torch==$VERSION" -d "$tmp" 2>&1)"; then
        printf '%s\n' "$out" | tail -n 15 >&2
        if [[ "$out" == *"(constraint)"* ]]; then
            die "pip's configuration caps torch below $VERSION (a constraint file, e.g. /etc/xdg/pip)" \
                "rerun with PIP_CONFIG_FILE=/dev/null (pip then reads no configuration file), or lift the cap"
        fi
        die "pip download torch==$VERSION" "check the network / package index access and rerun"
    fi
    wheel="$(compgen -G "$tmp/torch-$VERSION-*.whl" | head -n 1)" ||
        die "pip download left no torch-$VERSION wheel in $tmp" "see pip's output above"
    rm -rf "$CACHE.new"
    mkdir -p "$CACHE.new"
    python3 - "$wheel" "$CACHE.new" <<'EOF' || die "extracting the headers" "see the error above"
"""Extract torch/include/ and read the C++ standard of the wheel's cpp_extension.py."""
import re, sys, zipfile
wheel, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    n = 0
    for info in z.infolist():
        if info.filename.startswith("torch/include/") and not info.is_dir():
            info.filename = info.filename[len("torch/"):]
            z.extract(info, dest)
            n += 1
    ext = z.read("torch/utils/cpp_extension.py").decode()
    version = z.read("torch/version.py").decode()
std = re.search(r"common_cflags \+= \['(-std=c\+\+\d+)'", ext)
if std is None:
    raise SystemExit("no '-std=c++NN' in the wheel's torch/utils/cpp_extension.py (common_cflags)")
with open(f"{dest}/cflags", "w") as f:
    f.write(std.group(1) + "\n")
ver = re.search(r"__version__ = '([^']+)'", version)
print(f"{n} header files; {std.group(1)}; torch {ver.group(1) if ver else '?'}")
EOF
    basename "$wheel" >"$CACHE.new/.pinpool-stamp"
    rm -rf "$CACHE"
    mv "$CACHE.new" "$CACHE"
    say "header cache ready: $CACHE ($(du -sh "$CACHE" | cut -f1))"
}

check() {
    local torch_inc std npu_pair npu_venv npu_inc py_inc log units=() u name
    if [[ -n "${PINPOOL_CHECK_TORCH_INCLUDE:-}" ]]; then
        torch_inc="$PINPOOL_CHECK_TORCH_INCLUDE"
        std="-std=c++20"
        [[ -d "$torch_inc/ATen" ]] || die "no ATen/ in PINPOOL_CHECK_TORCH_INCLUDE=$torch_inc" \
            "point it at a torch's site-packages/torch/include"
        log="$(mktemp)"
    else
        cache_is_complete || die "no header cache for torch $VERSION ($CACHE)" \
            "bash ci/lib/compile_check.sh fetch $VERSION"
        torch_inc="$CACHE/include"
        std="$(cat "$CACHE/cflags")"
        log="$CACHE/check.log"
    fi
    # The newest supported torch_npu's headers: the first pair's env.
    npu_pair="${PINPOOL_ALL_PAIRS%% *}"
    bash "$HERE/envsetup.sh" "$npu_pair" --cached ||
        die "the env of pair $npu_pair (the newest torch_npu, whose headers are used) is not cached" \
            "source ci/sim-env.sh $npu_pair once"
    npu_venv="$ROOT/$npu_pair"
    npu_inc="$(compgen -G "$npu_venv/lib/python3*/site-packages/torch_npu/include" | head -n 1)" ||
        die "no torch_npu/include in $npu_venv" "recreate the env: rm -rf $npu_venv; source ci/sim-env.sh $npu_pair"
    py_inc="$("$npu_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
    local npu_version
    npu_version="$(compgen -G "$npu_venv/lib/python3*/site-packages/torch_npu-*.dist-info" | head -n 1)"
    npu_version="${npu_version##*/torch_npu-}"
    npu_version="${npu_version%.dist-info}"
    # As setup.py's CppExtension (torch/utils/cpp_extension.py) compiles the units.
    local flags=("$std" -fPIC -fsyntax-only -fvisibility=hidden -D_GLIBCXX_USE_CXX11_ABI=1
        -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C
        -I"$REPO/csrc" -I"$torch_inc" -I"$torch_inc/torch/csrc/api/include" -I"$npu_inc" -I"$py_inc")
    [[ ! -d "$npu_inc/third_party/acl/inc" ]] || flags+=(-I"$npu_inc/third_party/acl/inc")
    while IFS= read -r u; do units+=("$u"); done < <(find "$REPO/csrc" -name '*.cpp' | sort)
    say "compiling ${#units[@]} csrc/ units against $torch_inc with torch_npu $npu_version's headers ($npu_inc); log: $log"
    : >"$log"
    local out
    out="$(mktemp -d)"
    local running=0
    for u in "${units[@]}"; do
        name="$(basename "$u" .cpp)"
        (
            rc=0
            "${CXX:-g++}" "${flags[@]}" "$u" >"$out/$name.log" 2>&1 || rc=$?
            echo "$rc" >"$out/$name.rc"
        ) &
        running=$((running + 1))
        if ((running >= ${PINPOOL_CHECK_JOBS:-2})); then
            wait -n || true
            running=$((running - 1))
        fi
    done
    wait || true
    local failed=() npu_only=() ok=() rc errs npu_errs
    for u in "${units[@]}"; do
        name="$(basename "$u" .cpp)"
        rc="$(cat "$out/$name.rc" 2>/dev/null || echo 1)"
        {
            printf '=== csrc/%s.cpp (exit %s)\n' "$name" "$rc"
            cat "$out/$name.log" 2>/dev/null
        } >>"$log"
        if [[ "$rc" == 0 ]]; then
            ok+=("$name")
            continue
        fi
        errs="$(grep -E '^[^ ]+:[0-9]+:[0-9]+: (fatal )?error:' "$out/$name.log" || true)"
        npu_errs="$(grep -F "$npu_inc/" <<<"$errs" || true)"
        if [[ -n "$errs" && "$(wc -l <<<"$errs")" == "$(grep -c . <<<"$npu_errs")" ]]; then
            npu_only+=("$name")
        else
            failed+=("$name")
        fi
    done
    rm -rf "$out"
    echo "compile check, torch $VERSION headers ($torch_inc) + torch_npu $npu_version headers:"
    echo "  compiled: ${#ok[@]} of ${#units[@]} units"
    if ((${#npu_only[@]})); then
        echo "  stopped only by errors inside torch_npu $npu_version's own headers (reported, not worked around; docs/matrix.md): ${npu_only[*]}"
        grep -hE '^[^ ]+:[0-9]+:[0-9]+: (fatal )?error:' "$log" | grep -F "$npu_inc/" |
            sed "s|$npu_inc/|torch_npu/include/|" | sort | uniq -c | head -n 40 | sed 's/^/    /'
    fi
    if ((${#failed[@]})); then
        echo "  FAILED (errors outside torch_npu's headers; handle them in csrc/runtime/version_shim.h): ${failed[*]}"
        grep -hE '^[^ ]+:[0-9]+:[0-9]+: (fatal )?error:' "$log" | grep -vF "$npu_inc/" |
            sed -e "s|$REPO/||" -e "s|$torch_inc/|torch/include/|" | sort | uniq -c | head -n 40 | sed 's/^/    /'
        echo "  full compiler output: $log"
        return 1
    fi
    if ((${#npu_only[@]})); then
        echo "  PASS, but for the errors inside torch_npu headers above"
    else
        echo "  PASS"
    fi
}

case "$CMD" in
    fetch) fetch ;;
    cached) cache_is_complete ;;
    check) check ;;
    *) usage ;;
esac
