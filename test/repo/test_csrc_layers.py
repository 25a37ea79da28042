"""csrc/'s layers, as docs/design.md draws them: which files may include torch_npu's C++ headers
(runtime/; the completion probe launches through OpCommand), and which may know of the audit
(audit/, and python/report.cpp, which installs its observers)."""

from __future__ import annotations

import pathlib
import re

CSRC = pathlib.Path(__file__).resolve().parents[2] / "csrc"


def _sources() -> list[pathlib.Path]:
    return sorted(p for p in CSRC.rglob("*") if p.suffix in (".h", ".cpp"))


def _rel(path: pathlib.Path) -> str:
    return path.relative_to(CSRC).as_posix()


def test_only_the_runtime_layer_includes_torch_npus_headers():
    """NPUStream.h and its kin include every NPU operator's declaration: a file including one
    parses for seconds, so the rest of csrc/ sees an NPU stream as a c10::Stream."""
    allowed = {"runtime/npu_runtime.cpp", "audit/completion_probe.cpp"}
    including = {
        _rel(p)
        for p in _sources()
        if re.search(r"#include\s*[<\"]torch_npu/", p.read_text(), re.MULTILINE)
    }
    assert including <= allowed, sorted(including - allowed)
    assert "runtime/npu_runtime.cpp" in including  # the pattern still finds what it looks for


def test_only_the_audit_and_its_installer_know_the_audit():
    """Issue #50: the allocator and the copy guard report through observers; only audit/ and
    the file that installs the observers name the audit."""
    naming = {_rel(p) for p in _sources() if "audit" in p.read_text().lower()}
    outside = {f for f in naming if not f.startswith("audit/")}
    assert outside == {"python/report.cpp"}, sorted(outside)
