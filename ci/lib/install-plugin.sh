#!/usr/bin/env bash
# Build and install the plugin into the active env (run after `source ci/sim-env.sh PAIR`, or in
# a real NPU env): `pip install --no-build-isolation --no-deps .`, from a per-env copy of the
# checkout.
#
#   bash ci/lib/install-plugin.sh LOGFILE
#
# Why a copy: pip builds in the source tree, and setuptools / ninja reuse the objects in build/
# even when the torch they were compiled against changed, so installing into the 2.10 env after
# the 2.13 env loads a 2.13 build there ("undefined symbol: _ZN3c1013MessageLogger..."). Each
# env gets its own copy ($VIRTUAL_ENV/.plugin-src, or a temp dir without a venv) holding the
# checkout's tracked and untracked-but-not-ignored files (uncommitted edits included), with
# their mtimes, so the build there stays incremental and always matches that env's torch.
set -euo pipefail
LOGFILE="${1:?usage: install-plugin.sh LOGFILE}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ -n "${VIRTUAL_ENV:-}" ]]; then
    SRC="$VIRTUAL_ENV/.plugin-src"
else
    SRC="$(mktemp -d)"
fi
mkdir -p "$SRC"
# Replace everything but the build output with the checkout's current files.
find "$SRC" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 -I{} sh -c '[ -e "$1" ] && printf "%s\0" "$1"' _ {} |
    tar --null -T - -cf -) | tar -xf - -C "$SRC"
cd "$SRC"
python -m pip install --disable-pip-version-check --no-build-isolation --no-deps \
    --force-reinstall . >"$LOGFILE" 2>&1
