"""torch_npu_pinpool/_C.pyi names exactly what the built extension defines (the lint step
checks the stub's syntax; this checks that it is true)."""

from __future__ import annotations

import ast
import importlib.util
import os

# Names a build may leave out (csrc/python/report.cpp, module.cpp).
AUDIT_ONLY = {
    "enable_report",
    "install_copy_direction_scope",
    "audit_replay_begin",
    "audit_replay_end",
    "audit_host_function",
    "report_data",
    "report_checks",
    "report_close",
    "audit_sizes",
    "hazard_kinds",
}
SANITIZED_ONLY = {"inject_sanitizer_report"}


def test_stub_matches_extension(scenario):
    spec = importlib.util.find_spec("torch_npu_pinpool")
    stub = os.path.join(os.path.dirname(spec.origin), "_C.pyi")
    tree = ast.parse(open(stub).read())
    declared = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    declared |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    built = scenario("extension_names").result
    defined = set(built["names"])
    if not built["audit_built"]:  # TORCH_NPU_PINPOOL_AUDIT=0: report_enabled stays
        declared -= AUDIT_ONLY
    if not built["sanitizers"]:  # the injected defects: sanitized builds only
        declared -= SANITIZED_ONLY
    assert declared == defined, {
        "stub only": declared - defined,
        "extension only": defined - declared,
    }
