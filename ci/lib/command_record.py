"""Record one run of the test command (``bash ci/test.sh``): its wall time, the machine's cores and
its summary rows, as ``DIR/command/test-command.json`` (ci/render_results.py renders the newest
into docs/test-results.md, "The test command").

    python3 ci/lib/command_record.py --seconds N --cached-envs K --rows ROWS_FILE --out DIR

K: how many environments PINPOOL_ENV_ROOT held when the run began (0: made from nothing).

Run by ci/test.sh as it ends, with the system python3 (no third-party imports). Never fails the run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, required=True)
    ap.add_argument("--cached-envs", type=int, default=None, help="envs at the run's start")
    ap.add_argument("--rows", type=Path, required=True, help="the table rows ci/test.sh printed")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        record = {
            "kind": "command", "command": "bash ci/test.sh", "seconds": args.seconds,
            "cores": os.cpu_count(), "cached_envs": args.cached_envs,
            "rows": args.rows.read_text().splitlines(),
            "commit": commit or "?",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        }
        out = args.out / "command"
        out.mkdir(parents=True, exist_ok=True)
        (out / "test-command.json").write_text(json.dumps(record, indent=1) + "\n")
    except (OSError, ValueError) as e:
        print(f"command_record: not written: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
