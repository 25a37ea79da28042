#!/usr/bin/env bash
# Set up, install the plugin and run its self-check (`python -m torch_npu_pinpool doctor`).
#
#   bash ci/demo.sh
#
# On a machine with a real Ascend NPU (/dev/davinci0 present and torch_npu importable from the
# current python) it uses the current environment. Anywhere else it uses the simulated CANN
# runtime with the torch 2.14 / torch_npu 2.14 test env (`source ci/sim-env.sh 2.14`; the first
# run creates it, a few minutes: PyPI's torch 2.14 is a large download). It is the env of the
# newest pair `bash ci/test.sh` always runs, so the tests reuse it afterwards.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

say() { printf '[demo] %s\n' "$*"; }
# The newest required pair of ci/test.sh (ci/lib/pairs.sh), so that its env serves both.
# shellcheck source=ci/lib/pairs.sh
. ci/lib/pairs.sh
DEMO_PAIR="${PINPOOL_CI_PAIRS%% *}"

if [[ -e /dev/davinci0 ]] && python -c 'import torch, torch_npu' >/dev/null 2>&1; then
    say "real NPU found: using the current environment ($(command -v python))"
else
    [[ -e /dev/davinci0 ]] && say "an NPU device exists but 'import torch_npu' fails in $(command -v python || echo '(no python)'): using the simulator"
    say "no usable NPU here: using the simulated CANN runtime (torch $DEMO_PAIR / torch_npu $DEMO_PAIR)"
    # shellcheck source=ci/sim-env.sh
    source ci/sim-env.sh "$DEMO_PAIR" || { say "FAILED: setting up the simulated environment (see above)"; exit 1; }
fi

if [[ -f setup.py ]]; then
    say "installing the plugin (sdist + pip install, as the README says: ci/lib/install-plugin.sh)"
    log="$(mktemp)"
    if ! bash ci/lib/install-plugin.sh "$log"; then
        tail -n 60 "$log"
        say "FAILED: building/installing the plugin (full log: $log)"
        exit 1
    fi
    rm -f "$log"
else
    say "NOTE: setup.py does not exist yet in this checkout: the plugin cannot be installed"
fi

if [[ -f torch_npu_pinpool/__main__.py ]]; then
    say "python -m torch_npu_pinpool doctor"
    # From outside the checkout: `python -m` puts the current directory first on sys.path, and
    # the source tree's torch_npu_pinpool has no compiled extension (pip built it elsewhere).
    cd /
    exec python -m torch_npu_pinpool doctor
else
    say "NOTE: the doctor (python -m torch_npu_pinpool doctor) does not exist yet in this checkout"
    say "environment ready: torch $(python -c 'import torch; print(torch.__version__)')," \
        "python $(command -v python)"
fi
