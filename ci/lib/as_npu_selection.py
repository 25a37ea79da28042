"""Check and summarise the "as a real NPU" leg of ci/test.sh from its JUnit XML.

    python ci/lib/as_npu_selection.py JUNIT.xml

Prints one line (how many tests ran without the simulator API, skipped, failed) and exits 1 when
a test failed or a required feature ran no test: without the simulator the suite must still run
the capture/replay, lifetime, stats, threads and failure-path tests.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

REQUIRED = {
    "capture/replay": "test_capture_replay",
    "lifetime": "test_pool_lifetime",
    "stats": "test_stats_and_tools",
    "threads": "test_other_threads_during_capture",
    "failure-path": "test_failure_paths",
    "graph ownership": "test_graph_ownership",
    "consumers": "test_vllm_patterns",
}


def main(path: str) -> int:
    ran, skipped, failed = [], 0, 0
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = {child.tag for child in case}
        if "skipped" in outcome:
            skipped += 1
        elif outcome & {"failure", "error"}:
            failed += 1
        else:
            ran.append(f"{case.get('classname', '')}.{case.get('name', '')}")
    missing = [what for what, key in REQUIRED.items() if not any(key in t for t in ran)]
    line = f"{len(ran)} tests passed without the simulator API, {skipped} skipped, {failed} failed"
    if missing:
        line += f"; MISSING required: {', '.join(missing)}"
    print(line)
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
