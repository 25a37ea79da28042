"""``import torch`` alone (backend autoload on): does the entry point load and activate the
plugin? Logs at INFO to stdout. ``scenario`` (which imports the plugin itself) is imported only
after the result is taken."""

import logging
import sys

logging.basicConfig(level=logging.INFO, stream=sys.stdout)
import torch  # noqa: E402,F401  autoloads torch_npu and torch_npu_pinpool through torch.backends

loaded = "torch_npu_pinpool" in sys.modules
out = {"loaded": loaded, "active": loaded and sys.modules["torch_npu_pinpool"].is_active()}

from _lib.scenario import report  # noqa: E402

report(out)
