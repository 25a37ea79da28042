"""``python test/fuzz ...`` (or ``python -m fuzz`` from test/): the command line of cli.py.

(``python -m test.fuzz`` cannot work: ``test`` is the standard library's package.)
"""

import os
import sys

if __package__ in (None, ""):  # run as a directory: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz.cli import main  # noqa: E402

sys.exit(main())
