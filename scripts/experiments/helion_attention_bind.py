"""Which `helion:attention` problems the installed Helion compiles (binds), on the CPU: Helion 1.4.0 on the H200
raised ShapeMismatch for the kernel (session 10, call 3). One JSON line a problem: its dims and the outcome.

    PYTHONPATH=<helion site>:. python3 scripts/experiments/helion_attention_bind.py [--out FILE]
"""

from __future__ import annotations

import itertools
import json

import click

from costmodel.helion import families, helion_version


@click.command()
@click.option("--out", default=None, help="also append the lines to this file")
def main(out: str | None) -> None:
    fam = families.get("attention")
    for s, d, causal in itertools.product((64, 100, 333, 1024), (64, 128), (0, 1)):
        problem = {"B": 2, "H": 4, "S": s, "D": d, "CAUSAL": causal}
        try:
            fam.bind(problem, "float16", "cpu")
            outcome = "ok"
        except Exception as e:  # noqa: BLE001 - the outcome is what is recorded
            outcome = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        line = json.dumps({"helion": helion_version(), "problem": problem, "outcome": outcome})
        print(line, flush=True)
        if out:
            with open(out, "a") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    main()
