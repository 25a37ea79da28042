#!/usr/bin/env bash
# Build and install the plugin into the active env (run after `source ci/sim-env.sh PAIR`, or in
# a real NPU env) the way users install it, with pip's build isolation on:
#
#   1. an sdist, built by the in-tree backend (build_backend/pinpool_backend.py) from a copy of
#      the checkout; that needs no torch;
#   2. `python -m pip install --no-deps --force-reinstall SDIST`: pip builds the wheel in an
#      isolated build environment (setuptools + wheel from PyPI) against this env's torch /
#      torch_npu (Note [Building against the installed torch] in the backend).
#
#   bash ci/lib/install-plugin.sh LOGFILE
#
# So every CI run checks what the README promises: the sdist holds everything a build needs, and
# a plain isolated `pip install` builds against the installed torch. The cost: the build is
# never incremental (pip builds an sdist in a fresh temporary directory); ninja, a build
# requirement, compiles the sources on every core.
#
# PINPOOL_NO_BUILD_ISOLATION=1 adds --no-build-isolation (a machine without PyPI access; the env
# then needs setuptools and wheel, which ci/sim-env.sh installs).
#
# PINPOOL_PLUGIN_TARGET=DIR installs into DIR (`pip install --target`, DIR emptied first) instead
# of the env: a sanitizer leg's instrumented build (ci/lib/sanitize.sh), put first on PYTHONPATH,
# leaves the env's own install alone.
#
# The copy ($VIRTUAL_ENV/.plugin-src, DIR.src with a target, or a temp dir without a venv) holds the checkout's tracked
# and untracked-but-not-ignored files (uncommitted edits included) and nothing else, so the sdist
# is what a clean checkout of this tree would give and the repository itself gets no build
# output (egg-info, dist/).
set -euo pipefail
LOGFILE="${1:?usage: install-plugin.sh LOGFILE}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET="${PINPOOL_PLUGIN_TARGET:-}"
if [[ -n "$TARGET" ]]; then
    SRC="$TARGET.src"
elif [[ -n "${VIRTUAL_ENV:-}" ]]; then
    SRC="$VIRTUAL_ENV/.plugin-src"
else
    SRC="$(mktemp -d)"
fi
rm -rf "$SRC"
mkdir -p "$SRC"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 -I{} sh -c '[ -e "$1" ] && printf "%s\0" "$1"' _ {} |
    tar --null -T - -cf -) | tar -xf - -C "$SRC"
cd "$SRC"
isolation=()
[[ "${PINPOOL_NO_BUILD_ISOLATION:-0}" == 1 ]] && isolation=(--no-build-isolation)
where=(--force-reinstall)
if [[ -n "$TARGET" ]]; then
    rm -rf "$TARGET"
    where=(--target "$TARGET")
fi
{
    t=$SECONDS
    echo "+ build_backend/pinpool_backend.py: build_sdist dist/"
    python -c 'import sys; sys.path.insert(0, "build_backend"); import pinpool_backend
pinpool_backend.build_sdist("dist")'
    sdist=(dist/torch_npu_pinpool-*.tar.gz) # the copy is fresh: exactly one
    echo "sdist: ${sdist[0]} ($((SECONDS - t)) s)"
    t=$SECONDS
    echo "+ python -m pip install --no-deps ${where[*]} ${isolation[*]} ${sdist[0]}"
    python -m pip install --disable-pip-version-check --no-deps "${where[@]}" \
        "${isolation[@]}" "${sdist[0]}"
    echo "pip install: $((SECONDS - t)) s"
} >"$LOGFILE" 2>&1
