"""The README's "Public surface" is the one place the simulator's knobs are listed: every
environment variable the sources read, every exported ``simcann_*`` function and every fault
``simcann_set_fault`` arms is named there, and nothing it names is gone. Reads files only."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INTERNAL = {"simcann_stub_hit"}  # the generated stubs' hook, not for tests
NOT_READ_BY_THE_LIBRARY = {"SIMCANN_LIB_DIR"}  # where the tests load it from


def _surface() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n## Public surface\n", 1)[1].split("\n## ", 1)[0]


def _sources() -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "src").rglob("*.cpp")))


def test_every_variable_read_is_listed():
    read = set(re.findall(r'(?:getenv|env_int|env_flag)\("(SIMCANN_[A-Z_]+)"', _sources()))
    listed = set(re.findall(r"^\| `(SIMCANN_[A-Z_]+)", _surface(), flags=re.M))
    assert read, "no variable found in src/: the pattern is out of date"
    assert listed == read | NOT_READ_BY_THE_LIBRARY


def test_every_exported_function_is_listed():
    defined = set(re.findall(r"^[\w ]+?\*? ?(simcann_\w+)\(", _sources(), flags=re.M))
    listed = set(re.findall(r"^\| `[^`]*?(simcann_\w+)\(", _surface(), flags=re.M))
    listed |= set(re.findall(r"/ `[^`]*?(simcann_\w+)\(", _surface()))
    assert len(defined) > 5, defined
    assert listed == defined - INTERNAL


def test_every_fault_is_listed():
    body = _sources().split("int simcann_set_fault(", 1)[1].split("\n}\n", 1)[0]
    armed = set(re.findall(r'strcmp\(what, "(\w+)"\)', body))
    listed = set(re.findall(r"^\| `(\w+)` \| ", _surface(), flags=re.M))
    assert len(armed) >= 6, armed
    assert armed <= listed
