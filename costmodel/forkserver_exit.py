"""Imported last by the benchmarker's process server (``benchmark.process_context``), never by a command's own
process: when its parent goes, the server leaves at once instead of tearing torch down.

The server inherits the command's stdout and stderr, and whoever reads them (a pipe, ``subprocess.run`` with
captured output, as ``scripts/bench_tune.py`` times a command) waits until the server has closed them too. After a
tune's last line they stayed open 1.7 s with the server's ordinary exit (torch's teardown included) and the command's,
0.95 s with this alone, 0.08 s with ``costmodel.cli.run``'s fast exit too (median of 3 on the CPU machine, session 16:
scripts/experiments/exit_probe.py). Its children never run this: a forked process leaves through ``os._exit``.
Registered after torch's import, this runs before torch's own exit handlers."""

import atexit
import os
import sys


def _leave_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


atexit.register(_leave_now)
