"""A scenario's result line: ``report(value)`` prints ``PINPOOL_RESULT:<json>``, which
``run_scenario`` in ``test/conftest.py`` parses. Imports nothing of torch, so a scenario that
must not load torch (``autoload_workers.py``'s parent) reports through it too."""

from __future__ import annotations

import json
import sys
from typing import Any

RESULT_TAG = "PINPOOL_RESULT:"


def report(value: Any) -> None:
    """The scenario's result, for ``run_scenario`` (and for a reader running it by hand)."""
    sys.stdout.flush()
    print(RESULT_TAG + json.dumps(value), flush=True)
