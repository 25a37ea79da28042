"""Run a command as a terminal would start it: ``python sigint_default.py PROGRAM ARGS...``
executes PROGRAM in this process with SIGINT at its default action. A job that a script starts in
the background (job control off) inherits SIGINT ignored, and Python then installs no handler;
tests that send SIGINT start their command through this file. Same PID as the command."""

import os
import signal
import sys

signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])
