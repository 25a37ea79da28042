"""The "as a real NPU" leg of ci/test.sh (ci/legs/as_npu.sh): which tests it runs, and the check
of what it ran.

    python ci/lib/as_npu_selection.py --select [RECORD] [--covered FILE]
                                                         # the leg's pytest arguments, one a line
    python ci/lib/as_npu_selection.py JUNIT.xml [--partial]

What the leg changes, and nothing else (issue #50): SIMCANN_LIB_DIR is unset and
PINPOOL_TEST_AS_NPU=1, over the same simulated runtime (through LD_LIBRARY_PATH), the same env,
the same installed plugin. Neither the simulator (its configuration: SIMCANN_DEVICE_COUNT,
SIMCANN_CANN_VERSION, SIMCANN_STRICT, ...: simcann/src/common.cpp) nor the plugin reads
either variable; the tests read them in three places only:
  - test/conftest.py: `simulator` tests are skipped (the leg deselects them: -m "not simulator"),
    `npu` tests run (skipped on the simulator);
  - simctl.available() (test/scenarios/_lib/simctl.py), which every scenario process asks, and
    simulator_api() (test/pinpool/_snippets.py), which the tests ask: the simulator's extra
    checks, task delays and the like are left out;
  - test/stress/ (every test there is `simulator`).
ci/lib/check_sim_markers.py fails the lint when another file of test/pinpool, test/repo,
test/consumers or test/scenarios names either variable. So a test whose processes never asked
simctl.available() runs the same code on the same runtime in both legs, and the simulator leg has
run it already.

The selection (--select RECORD): RECORD is the simulator leg's record (PINPOOL_SIM_API_RECORD,
ci/legs/simulator.sh): the id of every test during which some process asked simctl.available(),
and every `npu` test (test/conftest.py). The leg runs those tests; the whole file where the
file's tests can see each other's results (keeps_state below: a module-level cache of scenario
results, as the consumer tests keep, a fixture wider than a test, a test class); and REQUIRED,
the floor that shows each feature without the simulator's API even when nothing asked. State
that test files share (test/conftest.py, test/pinpool/_snippets.py: audit_built, whose child
never asks) must stay independent of the answer. `simulator` tests in RECORD are deselected by
the leg's -m "not simulator". Without RECORD (a build check has no simulator leg), with an entry
no test claims ("*": asked at collection outside a test file), or RECORD missing: the whole
selection, test/pinpool test/repo test/stress test/consumers.

The check (JUNIT): prints one line (tests that ran without the simulator API, skipped, failed)
and exits 1 when a test failed or, unless --partial (the run had extra pytest arguments such as
-k), a feature of REQUIRED ran no test.

--covered FILE: the pytest arguments an earlier as-npu leg of the same run passed with (another
pair's; ci/legs/as_npu.sh keeps them in PINPOOL_AS_NPU_COVERED), left out here but for REQUIRED:
every test that asked on some pair runs without the simulator's API once per run, on the first
pair where it asked, and the simulator leg of every pair has run it with the API.
"""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The directories of the leg; test_packaging.py builds sdists and never touches the runtime.
SCOPE = ("test/pinpool/", "test/repo/", "test/stress/", "test/consumers/")
NOT_RUNTIME = "test/repo/test_packaging.py"
FULL = ["test/pinpool", "test/repo", "test/stress", "test/consumers", "--deselect", NOT_RUNTIME]
# Without the simulator the leg must still run these (one node id prefix each: every parameter).
REQUIRED = {
    "capture/replay": "test/pinpool/test_capture_replay.py::test_replay_reads_captured_bytes",
    "lifetime": "test/pinpool/test_graph_pools.py::test_recapture_into_released_pool_id",
    "stats": "test/pinpool/test_stats.py::test_host_memory_stats_count_graph_pools",
    "threads": "test/pinpool/test_threads_during_capture.py::test_other_threads_during_capture",
    "failure-path": "test/pinpool/test_failure_paths.py::test_user_errors",
    "graph ownership": "test/pinpool/test_graph_ownership.py::test_captures_in_turn_share_a_buffer",
    "consumers": "test/consumers/test_vllm_patterns.py::test_kv_offload_replays_right_with_plugin",
}
MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem",
            "remove", "discard", "clear", "__setitem__"}


def keeps_state(path: Path) -> bool:
    """Whether the tests of this file can see each other's results: a name of the module
    changed inside a function that does not bind it itself (``_RESULTS[key] = ...``, a cache),
    ``global``, a cached function, a fixture with a scope, or a test class."""
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return True
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            func = ast.unparse(deco.func if isinstance(deco, ast.Call) else deco)
            scoped = func.endswith("fixture") and "scope=" in ast.unparse(deco)
            if func.endswith("cache") or scoped:
                return True
        local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        local |= {
            n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        for n in ast.walk(node):
            targets = []
            if isinstance(n, (ast.Assign, ast.Delete)):
                targets = n.targets
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
                targets = [n.target]
            for t in targets:
                base = t
                while isinstance(base, (ast.Subscript, ast.Attribute)):
                    base = base.value
                if base is not t and isinstance(base, ast.Name) and base.id in names - local:
                    return True
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in MUTATORS and isinstance(n.func.value, ast.Name)
                    and n.func.value.id in names - local):
                return True
    return False


def select(record: Path | None, covered: Path | None = None) -> tuple[list[str], str]:
    """The leg's pytest arguments and a line that says what they are."""
    args, what = _select(record)
    done = set(covered.read_text().splitlines()) if covered and covered.is_file() else set()
    if not done:
        return args, what
    keep = [a for a in args if a not in done or a in REQUIRED.values()]
    left_out = len(args) - len(keep)
    # a required test whose whole file was left out runs alone
    keep += [r for r in REQUIRED.values() if not any(_covers(a, r) for a in keep)]
    return keep, f"{what}; {left_out} of these already passed on an earlier pair"


def _covers(arg: str, node: str) -> bool:
    return node == arg or node.startswith((arg + "::", arg + "/"))


def _select(record: Path | None) -> tuple[list[str], str]:
    if record is None or not record.is_file():
        return FULL, "every test (no record of the simulator leg)"
    asked = {line.strip() for line in record.read_text().splitlines() if line.strip()}
    if "*" in asked:
        return FULL, "every test (the record names a question asked outside a test)"
    tests, files = set(), set()
    for node in asked:
        path = node.split("::")[0]
        if not path.startswith(SCOPE) or path == NOT_RUNTIME:
            continue
        if "::" in node and not keeps_state(REPO / path):
            tests.add(node)
        else:
            files.add(path)
    floor = {r for r in REQUIRED.values() if r.split("::")[0] not in files}
    tests = {t for t in tests if t.split("::")[0] not in files and t.split("[")[0] not in floor}
    return sorted(files) + sorted(tests | floor), (
        f"{len(tests)} tests and {len(files)} whole files (their tests share state) that asked "
        f"simctl.available() in the simulator leg, and the {len(floor)} required tests"
    )


def check(path: str, partial: bool) -> int:
    ran, skipped, failed = [], 0, 0
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = {child.tag for child in case}
        if "skipped" in outcome:
            skipped += 1
        elif outcome & {"failure", "error"}:
            failed += 1
        else:
            ran.append((case.get("classname", ""), case.get("name", "")))

    def covered(prefix: str) -> bool:
        path, _, name = prefix.partition("::")
        module = path.removesuffix(".py").replace("/", ".")
        return any(cls == module and test.split("[")[0] == name for cls, test in ran)

    missing = [] if partial else [what for what, key in REQUIRED.items() if not covered(key)]
    line = f"{len(ran)} tests passed without the simulator API, {skipped} skipped, {failed} failed"
    if missing:
        line += f"; MISSING required: {', '.join(missing)}"
    print(line)
    return 1 if failed or missing else 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--select":
        covered = Path(argv[argv.index("--covered") + 1]) if "--covered" in argv else None
        rest = [a for a in argv[1:] if a != "--covered" and (covered is None or a != str(covered))]
        args, what = select(Path(rest[0]) if rest else None, covered)
        print(f"# {what}")
        print("\n".join(args))
        return 0
    if not argv or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return check(argv[0], "--partial" in argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
