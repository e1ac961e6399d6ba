"""SIGKILL one collector worker of a running collection, to check that a run survives it (issue 13's fault runs).

    python scripts/kill_worker.py --parent PID --gpu 1 [--after 50]

Among the direct children of PID (the `costmodel collect --gpus` process, or a Dask nanny started by
scripts/dask_cluster.sh) it kills the one serving CUDA device GPU: the child whose environment says
CUDA_VISIBLE_DEVICES=GPU and that has children of its own (the benchmarker's processes; this skips
multiprocessing's resource tracker). Prints one JSON line: the pid killed, when, and what it had started."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

import psutil


def worker_of(parent: int, gpu: str) -> psutil.Process | None:
    for child in psutil.Process(parent).children():
        try:
            env = child.environ()
            if env.get("CUDA_VISIBLE_DEVICES") == gpu and child.children(recursive=True):
                return child
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--gpu", required=True, help="the CUDA device id the worker to kill serves")
    ap.add_argument("--after", type=float, default=0.0, help="seconds to wait first")
    args = ap.parse_args()
    time.sleep(args.after)
    deadline = time.monotonic() + 30
    while (proc := worker_of(args.parent, args.gpu)) is None:
        if time.monotonic() > deadline:
            print(json.dumps({"killed": None, "error": f"no worker of GPU {args.gpu} under pid {args.parent}"}))
            return 1
        time.sleep(0.2)
    descendants = len(proc.children(recursive=True))
    os.kill(proc.pid, signal.SIGKILL)
    print(json.dumps({"killed": proc.pid, "gpu": args.gpu, "parent": args.parent, "at": time.time(),
                      "descendants": descendants}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
