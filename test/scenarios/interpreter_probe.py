"""What this interpreter looks like to a script: argv, __main__, sys.path[0], cwd, the
environment, whether torch_npu was loaded before the script's first import; then it exits as
``sys.argv[1]`` says (a status, or ``raise``: an uncaught exception). test/ci/test_forkserver.py
runs it forked from each kind of server and fresh and compares. It imports torch_npu first, as a
scenario does, and never touches a device."""

import atexit
import json
import os
import sys

torch_npu_at_start = "torch_npu" in sys.modules
import torch_npu  # noqa: E402,F401  (a scenario's first import)

main = sys.modules["__main__"]
print(
    "PROBE:"
    + json.dumps(
        {
            "argv": sys.argv,
            "name": __name__,
            "file": main.__dict__.get("__file__"),
            "path0": sys.path[0],
            "cwd": os.getcwd(),
            "knob": os.environ.get("PROBE_KNOB"),
            "torch_npu_at_start": torch_npu_at_start,
        }
    ),
    flush=True,
)
atexit.register(lambda: print("atexit ran", flush=True))
how = sys.argv[1]
if how == "raise":
    raise ValueError("probe raised")
sys.exit(int(how))
