"""Lint: no test in test/pinpool, test/repo or test/stress reads simulator state without the
`simulator` marker (ci/test.sh's lint step runs it; `python ci/lib/check_sim_markers.py [files]`).

Simulator state is what a real NPU does not have: the control API (`simctl`, `stresslib`, any
`SIMCANN_*` variable, `simcann_*` symbols) and the scenarios that use it. A scenario file
(test/scenarios/<name>.py) needs the simulator when it calls `simctl.<anything>` without ever
asking `simctl.available()` (or imports a helper module of test/scenarios/_lib that does); a
runtime-neutral scenario guards its simulator-only extras with `if simctl.available():`.

A test needs the marker when its body (or module-level code of its file) names simulator state
or runs such a scenario by a literal name (`scenario("name")` / `run_scenario("name")`). It
has the marker through `pytestmark`, a decorator, or a `pytest.param(..., marks=...)` of its
parametrization (the delay variant of a test).

And no file of test/pinpool, test/repo, test/consumers or test/scenarios but _lib/simctl.py names
the variables that make the "as a real NPU" leg (SIMCANN_LIB_DIR, PINPOOL_TEST_AS_NPU): they ask
`simctl.available()` (a scenario) or `simulator_api()` (a test), which the simulator leg records,
so that the as-NPU leg runs every test whose path can differ there (ci/lib/as_npu_selection.py).
test/conftest.py (the markers) and test/stress (every test `simulator`) may.
Exit 1 with one line per offence.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "test" / "scenarios"
SIM_NAMES = {"simctl", "stresslib"}
SIM_STRINGS = ("SIMCANN_", "simcann_")
SCENARIO_CALLS = {"scenario", "run_scenario"}
LEG_VARIABLES = ("SIMCANN_LIB_DIR", "PINPOOL_TEST_AS_NPU")
TEST_DIRS = ("test/pinpool", "test/repo", "test/stress")  # checked for the marker
LEG_DIRS = ("test/pinpool", "test/repo", "test/consumers", "test/scenarios")
LEG_READERS = {"test/scenarios/_lib/simctl.py"}


def _mentions_simulator_marker(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr == "simulator" for n in ast.walk(node)
    )


def scenario_needs_sim(path: Path, seen: set[Path] | None = None) -> bool:
    """Whether scenario (or helper) file ``path`` reads simulator state unconditionally."""
    seen = seen if seen is not None else set()
    if path in seen or not path.is_file():
        return False
    seen.add(path)
    tree = ast.parse(path.read_text(), str(path))
    uses, guarded = False, False
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            if n.value.id == "simctl":
                if n.attr == "available":
                    guarded = True
                else:
                    uses = True
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            uses |= any(s in n.value for s in SIM_STRINGS) and "simctl" not in path.name
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            if n.module not in ("_lib", "_lib.scenario", "_lib.simctl"):
                uses |= scenario_needs_sim(SCENARIOS / f"{n.module.replace('.', '/')}.py", seen)
    return uses and not guarded


def _offences(node: ast.AST) -> list[tuple[int, str]]:
    found = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in SIM_NAMES:
            found.append((n.lineno, f"uses {n.id}"))
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in n.names] + ([n.module] if getattr(n, "module", None) else [])
            for name in names:
                if name.split(".")[-1] in SIM_NAMES:
                    found.append((n.lineno, f"imports {name}"))
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            if any(s in n.value for s in SIM_STRINGS):
                found.append((n.lineno, f"names simulator state ({n.value[:40]!r})"))
        elif isinstance(n, ast.Call):
            func = n.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in SCENARIO_CALLS and n.args and isinstance(n.args[0], ast.Constant):
                scen = str(n.args[0].value)
                path = SCENARIOS / (scen if scen.endswith(".py") else scen + ".py")
                if scenario_needs_sim(path):
                    found.append((n.lineno, f"runs scenario {scen!r}, which uses simctl"))
    return found


def check_file(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    module_marked = any(
        isinstance(stmt, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets)
        and _mentions_simulator_marker(stmt.value)
        for stmt in tree.body
    )
    if module_marked:
        return []
    problems = []
    for stmt in tree.body:
        is_test = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            stmt.name.startswith("test")
        )
        if is_test and any(_mentions_simulator_marker(d) for d in stmt.decorator_list):
            continue
        where = f"test {stmt.name}" if is_test else "module-level code"
        for line, what in _offences(stmt):
            problems.append(
                f"{path.relative_to(REPO)}:{line}: {where} {what} but is not marked "
                "'simulator': add @pytest.mark.simulator, or make the check an extra taken "
                "only when the simulator is present (simctl.available() in the scenario)"
            )
    return problems


def leg_variable_readers() -> list[str]:
    """Files that name the as-NPU leg's variables instead of asking simctl.available()."""
    problems = []
    for path in sorted(p for d in LEG_DIRS for p in (REPO / d).rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for var in LEG_VARIABLES:
                if var in line and rel not in LEG_READERS:
                    problems.append(
                        f"{rel}:{lineno}: names {var}: ask simctl.available() (a scenario) or "
                        "simulator_api() (a test), which the simulator leg records for the "
                        "as-a-real-NPU leg's selection (ci/lib/as_npu_selection.py)"
                    )
    return problems


def main(argv: list[str]) -> int:
    files = [Path(a).resolve() for a in argv] or sorted(
        p for d in TEST_DIRS for p in (REPO / d).glob("test_*.py")
    )
    problems = [msg for f in files for msg in check_file(f)]
    if not argv:
        problems += leg_variable_readers()
    for msg in problems:
        print(msg)
    print(
        f"check_sim_markers: {len(files)} test files, "
        + (f"{len(problems)} unmarked simulator reads" if problems else "OK")
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
