"""Issue 18, CPU: the race tunes that stopped short of quick (rms_norm 13911x12466 fp16), replayed with ``restarts``
on and off. Each config is answered with the time that tune recorded for it on the H200 (its batch timing, and the
re-timing from its verification), else the first time another tune of the same device call recorded, else None
(not run: that changes the path). Run under Helion 1.4.0 answering as the H200 (its space is the H200's):

    PYTHONPATH=.:tests/helion_scripts .venv-helion140/bin/python scripts/experiments/helion_restart_replay.py \
      --out scripts/results/helion_restart_replay-helion140-cpu-2026-12-05-s44.json

Per tune: its steps (from which config, how many timed, how many faster, whether the walk started again), the pick,
and the pick's time beside the default's, both as the tune's record gives them (``best.ms``/``default_ms`` where the
verification re-timed them). A replay says where the walk goes on the recorded times; the pick's speed against
Helion quick needs the H200 (the plan's race).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "helion_scripts"))
from replay_tune import emit  # noqa: E402

# (the tune's file and line, the lines of files from the same device call whose timings answer for it): the two
# tunes of the recipe before session 44 that stopped with rounds left far below quick
CASES = {"s34c.2": (("2026-12-04-s34c.2", 1), (("2026-12-04-s34c.1", 1), ("2026-12-04-s34c.3", 1))),
         "s35b.3": (("2026-12-04-s35b", 3), (("2026-12-04-s35b", 0), ("2026-12-04-s35b", 1), ("2026-12-04-s35b", 2)))}


def _row(name: str, line: int) -> dict:
    return json.loads((ROOT / f"scripts/results/bench_helion-retimed-h200-{name}.jsonl").read_text().splitlines()[line])


def replay(case: str, restarts: int) -> dict:
    from costmodel.helion import configs, families
    from costmodel.helion import model as helion_model
    from tuner import helion as htune

    (name, line), others = CASES[case]
    row = _row(name, line)
    key = configs.config_json
    searches = [row["costmodel"]["search"], *(_row(*o)["costmodel"]["search"] for o in others)]
    timer = htune.HelionReplay.of_tunes(searches)
    bound, args = families.get(row["kernel"].removeprefix("helion:")).bind(row["problem"], row["dtype"])
    knobs = {**htune.recipe_knobs(row["costmodel"]["search"]["recipe"]), "restarts": restarts}
    tuner = htune.CostModelAutotuner(timer=timer, gpu="nvidia-h200", helion_version="1.4.0", objective="graph",
                                     **knobs)
    got = configs.normalise(dict(htune.CostModelSearch(tuner, helion_model.load("nvidia-h200"), bound,
                                                       args).autotune()))
    last = tuner.last

    def brief(c: dict) -> dict:
        return {k: c.get(k) for k in ("num_warps", "reduction_loops", "pid_type")}

    return {"case": case, "restarts": restarts, "race_vs_quick": round(row["graph_ms"]["quick"] /
                                                                       row["graph_ms"]["costmodel"], 4),
            "steps": [{"from": brief(s["from"]), "timed": s.get("timed"), "faster": s.get("faster"),
                       "restart": bool(s.get("restart"))} for s in last["steps"]],
            "unanswered": sum(t["ms"] is None for t in last["timed"]) - sum(t["ms"] is None for t in
                                                                             row["costmodel"]["search"]["timed"]),
            "pick": brief(got), "pick_is_default": key(got) == key(row["default"]["config"]),
            "best_ms": last["best"]["ms"], "default_ms": last["default_ms"]}


@click.command()
@click.option("--out", type=click.Path(dir_okay=False), help="write the replays here as JSON")
def main(out):
    """Replay the tunes that stopped short of Helion quick with restarts 0 and 1 (Helion 1.4.0 as the H200)."""
    from h200_answers import answer_as  # noqa: F401 - answers Helion's device checks as the H200 on import

    from costmodel.helion import helion_version

    if helion_version() != "1.4.0":
        raise click.UsageError(f"Helion {helion_version()}: the H200's space needs Helion 1.4.0 (.venv-helion140)")
    emit([replay(case, r) for case in CASES for r in (0, 1)], Path(out) if out else None)


if __name__ == "__main__":
    main()
