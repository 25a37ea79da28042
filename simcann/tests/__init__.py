"""The simulator's own tests. A package, so that pytest imports tests/conftest.py as
``tests.conftest``: the plugin's tests import test/conftest.py by the plain name ``conftest``
(test/pinpool/_snippets.py, test/stress/test_stress.py), which a second top-level conftest
module in the same session would take over."""
