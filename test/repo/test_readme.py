"""The README's usage example runs as written and shows what it promises."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _usage_example() -> str:
    text = README.read_text()
    section = text.split("## Use", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "README's '## Use' section lost its python example"
    return blocks[0]


@pytest.mark.parametrize("plugin", ["on", "off"])
def test_readme_usage_example(run_isolated, plugin):
    """With the plugin the example's assertion holds; with it off the same code must fail on
    torch_npu <= 2.10 (the replay reads the other tensor's bytes). On >= 2.11 native keeps
    this simple case correct (its defects need the scenarios of test/pinpool/test_graph_pools.py),
    so 'off' is only required to fail there where torch_npu is older."""
    code = (
        "import torch_npu\n"
        "from packaging.version import Version\n"
        "old = Version(torch_npu.__version__.split('+')[0]) < Version('2.11')\n"
        "try:\n"
        + "".join("    " + line + "\n" for line in _usage_example().splitlines())
        + "    result = {'ok': True, 'old': old}\n"
        "except AssertionError:\n"
        "    result = {'ok': False, 'old': old}\n"
    )
    env = {"TORCH_NPU_PINPOOL": "0"} if plugin == "off" else {}
    r = run_isolated(code, env=env).result
    if plugin == "on":
        assert r["ok"], "README example's assertion failed with the plugin active"
    elif r["old"]:
        assert not r["ok"], "without the plugin the README example should show the hazard"
