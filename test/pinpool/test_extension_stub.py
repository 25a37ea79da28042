"""torch_npu_pinpool/_C.pyi names exactly what the built extension defines (the lint step
checks the stub's syntax; this checks that it is true)."""

from __future__ import annotations

import ast
import importlib.util
import os


def test_stub_matches_extension(scenario):
    spec = importlib.util.find_spec("torch_npu_pinpool")
    stub = os.path.join(os.path.dirname(spec.origin), "_C.pyi")
    tree = ast.parse(open(stub).read())
    declared = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    declared |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}
    defined = set(scenario("extension_names").result)
    assert declared == defined, {
        "stub only": declared - defined,
        "extension only": defined - declared,
    }
