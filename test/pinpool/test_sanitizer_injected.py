"""A sanitizer leg catches what it looks for: a defect injected on purpose into the sanitized
build (Note [Injected sanitizer reports], csrc/testing/sanitizer_selftest.cpp), run in a scenario
process, must FAIL the test through the sanitizer's report (test/conftest.py attributes a
scenario's reports to the test that spawned it).

Marker ``sanitizer_injected``: skipped outside a sanitizer leg; ``ci/lib/sanitize.sh`` runs these
apart from the suite and requires each to fail with its sanitizer's report (a pass, or a failure
without the report, turns the leg red).
"""

from __future__ import annotations

import pytest
from sanitizer_reports import INJECTED  # test/sanitizer_reports.py: kind -> sanitizer, report


@pytest.mark.sanitizer_injected
@pytest.mark.parametrize("kind", sorted(INJECTED))
def test_injected_defect_fails_the_test(scenario, kind):
    o = scenario("sanitizer_injected", args=[kind], expect_ok=False)
    if o.result and "skipped" in o.result:
        pytest.skip(o.result["skipped"])
    pytest.fail(
        f"the injected {kind} ran without a sanitizer report (exit {o.returncode}, result "
        f"{o.result}):\n{o.stderr[-4000:]}",
        pytrace=False,
    )
