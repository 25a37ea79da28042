"""Write the record of one upstream test file's run (``bash ci/upstream.sh``, step 6): which file,
from where, on which pair, with which selection, and its counts with the plugin on and off.

    python ci/lib/upstream_record.py --pair 2.14 --torch 2.14.0 --torch-npu 2.14.0 \\
        --file /tmp/upstream/test_npu.py --source "Ascend/pytorch 9e73e708ab93" \\
        --select "pinned_memory" --on 7/0/0 --off 7/0/0 --commit 0123abcdef01 --out DIR [--out DIR2]

Each --out DIR gets ``upstream-PAIR-FILESTEM[-HASH].json``; HASH (8 hex digits) names the
selection / CANN version / source when any is given, so that runs of one file differing in them
keep separate records. ``python ci/render_results.py`` renders the records of
``ci/results/upstream/`` as the "Upstream tests" section of docs/test-results.md. Plain Python.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import sys
from pathlib import Path

# The fields every record has (ci/render_results.py checks them).
FIELDS = (
    "kind", "pair", "torch", "torch_npu", "file", "source", "select", "cann_version", "note",
    "on", "off", "commit", "date", "command",
)
COUNTS = re.compile(r"^(\d+)/(\d+)/(\d+)( \(timed out\))?$")


def parse_counts(text: str) -> dict[str, object]:
    """'7/0/1' -> passed 7, failed 0, skipped 1; anything else (no result) -> its text."""
    m = COUNTS.match(text.strip())
    if not m:
        status = text.strip() or "no result"
        return {"passed": None, "failed": None, "skipped": None, "status": status}
    status = "timed out" if m.group(4) else ("PASS" if m.group(2) == "0" else "FAIL")
    return {"passed": int(m.group(1)), "failed": int(m.group(2)), "skipped": int(m.group(3)),
            "status": status}


def record(args: argparse.Namespace) -> dict[str, object]:
    name = Path(args.file).name
    command = f"bash ci/upstream.sh {args.pair} {name}"
    if args.select:
        command += f' -k "{args.select}"'
    if args.cann_version:
        command = f"SIMCANN_CANN_VERSION={args.cann_version} " + command
    return {
        "kind": "upstream",
        "pair": args.pair,
        "torch": args.torch,
        "torch_npu": args.torch_npu,
        "file": name,
        "source": args.source,
        "select": args.select,
        "cann_version": args.cann_version,
        "note": args.note,
        "on": parse_counts(args.on),
        "off": parse_counts(args.off),
        "commit": args.commit,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "command": command,
    }


def file_name(rec: dict[str, object]) -> str:
    stem = Path(str(rec["file"])).stem
    key = "\0".join(str(rec[k]) for k in ("select", "cann_version", "source"))
    suffix = "" if not key.strip("\0") else "-" + hashlib.sha1(key.encode()).hexdigest()[:8]
    return f"upstream-{rec['pair']}-{stem}{suffix}.json"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for opt in ("--pair", "--torch", "--torch-npu", "--file", "--on", "--off", "--commit"):
        p.add_argument(opt, required=True)
    for opt in ("--source", "--select", "--cann-version", "--note"):
        p.add_argument(opt, default="")
    p.add_argument("--out", action="append", type=Path, required=True, help="directory")
    args = p.parse_args(argv)
    rec = record(args)
    for directory in args.out:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / file_name(rec)
        path.write_text(json.dumps(rec, indent=2) + "\n")
        print(f"upstream_record: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
