"""How long a tuning process holds its captured output open after its last line (what `subprocess.run(...,
capture_output=True)`, as scripts/bench_tune.py times a command, waits for), with and without the fast exits of the
process server (costmodel/forkserver_exit.py) and of the command's entry (costmodel.cli.run). A tune of a small
rmsnorm under Triton's interpreter stands in for a command (CPU only):

    .venv/bin/python scripts/experiments/exit_probe.py [--rounds 3] [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import atexit, os, sys, time
from costmodel import benchmark
if {plain_server}:
    benchmark._PRELOAD = [m for m in benchmark._PRELOAD if m != "costmodel.forkserver_exit"]
from costmodel.benchmark import IsolatedBenchmarker, start_process_server
from costmodel.hardware import KNOWN
from tuner.tune import tune

if __name__ == "__main__":
    start_process_server()
    hw = KNOWN["nvidia-h200"]
    with IsolatedBenchmarker(hw, device="cpu", compile_workers=0) as bench:
        tune("rmsnorm", {{"M": 32, "N": 64}}, "float16", bench, k=2, hw=hw)
    print(f"last line {{time.time()}}", flush=True)
    if {fast_entry}:  # what costmodel.cli.run does after main()
        atexit._run_exitfuncs()
        os._exit(0)
"""


def held_open_s(plain_server: bool, fast_entry: bool, scratch: Path) -> float:
    script = scratch / f"child_{int(plain_server)}{int(fast_entry)}.py"
    script.write_text(CHILD.format(plain_server=plain_server, fast_entry=fast_entry))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}, check=True)
    end = time.time()
    return end - float(r.stdout.split("last line ")[1].split()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / "exit_probe"
    scratch.mkdir(exist_ok=True)
    cases = {"plain": (True, False), "fast server": (False, False), "fast server and entry": (False, True)}
    times = {name: [] for name in cases}
    for _ in range(a.rounds):  # alternating, so that a slow spell of the machine touches every case
        for name, (plain, fast) in cases.items():
            times[name].append(round(held_open_s(plain, fast, scratch), 3))
    out = {name: {"median_s": statistics.median(v), "rounds_s": v} for name, v in times.items()}
    print(json.dumps(out, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
