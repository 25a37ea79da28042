#!/usr/bin/env bash
# The next torch, compile only (issue #35; row "torch VERSION headers"): every csrc/ unit against
# the headers of PINPOOL_NEXT_TORCH (ci/lib/pairs.sh; a torch release no torch_npu pairs with
# yet) and the newest torch_npu's, when the header cache exists: ci/lib/compile_check.sh, whose
# header says what passes. "not run" without the cache (`bash ci/lib/compile_check.sh fetch
# VERSION` makes it). ci/test.sh runs it on x86_64 when the run has a plain pair: not in a
# sanitizer-only run, on aarch64, or in a run of build checks only (builds.yml has a job for it).
#
#   bash ci/legs/next_torch.sh VERSION
set -uo pipefail
# shellcheck source=ci/legs/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
version="${1:?usage: bash ci/legs/next_torch.sh VERSION}"
label="torch $version headers"
if ! bash ci/lib/compile_check.sh cached "$version"; then
    row "$label" "not run" - "no header cache; make it: bash ci/lib/compile_check.sh fetch $version"
    exit 0
fi
banner "compile check: torch $version headers"
t0=$SECONDS
out="$(mktemp)"
bash ci/lib/compile_check.sh check "$version" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
detail="$(grep -E '^  (compiled|PASS|FAILED|stopped)' "$out" | sed 's/^ *//' | cut -c1-120 | paste -sd';' -)"
rm -f "$out"
if [[ $rc == 0 ]]; then
    row "$label" PASS "$((SECONDS - t0))s" "$detail"
else
    row "$label" FAIL "$((SECONDS - t0))s" "${detail:-exit $rc}"
fi
exit "$rc"
