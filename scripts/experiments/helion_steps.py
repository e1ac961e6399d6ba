"""Issue 18: where the tuner's step to neighbours (tuner.helion.step) would go on the race's rows (CPU).

Per race row (``bench_helion.py`` output): the fastest config its costmodel tune timed, that config's neighbours in
this machine's Helion space (``families.neighbours``; the kernel bound on CPU tensors), the model's order of them
(``model_first``) and the order a step times them in (``tuner.helion.spread``: the first of each knob first), and
Helion quick's pick: how many knobs apart it is from the fastest (flattened as Helion's ConfigGeneration flattens)
and, one knob apart, its rank among the neighbours. Nothing is timed: which step pays is for the H200 to say.

    .venv/bin/python scripts/experiments/helion_steps.py scripts/results/bench_helion-h200-2026-12-02-s24b.jsonl \
        [--model nvidia-h200] [--local 6] [--radius 1] [--start fastest|default] [--h200] [--json]

Run under Helion 1.4.0 (the H200's; it imports beside torch 2.11, not 2.13) with --h200, the space is the one the
H200's tunes step in (``costmodel.helion.target.answer_as``). Sessions 19-26 ran these scripts with ``--tma``, which
answered Helion's tensor-descriptor check alone: the space lacked ``maxnreg``, so its random population was not the
H200's.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from costmodel.helion import configs, families  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402


def knobs_apart(bound, a: dict, b: dict) -> list[str]:
    """The flat knobs in which two configs differ (Helion's ConfigGeneration.flatten), by fragment type and index."""
    from helion.autotuner.config_generation import ConfigGeneration

    gen = ConfigGeneration(bound.config_spec)
    fa, fb = gen.flatten(families.helion_config(a)), gen.flatten(families.helion_config(b))
    return [f"{type(gen.flat_spec[i]).__name__}[{i}]: {x} -> {y}" for i, (x, y) in enumerate(zip(fa, fb)) if x != y]


def brief(c: dict) -> str:
    ix, ev = c.get("indexing", []), c.get("load_eviction_policies", [])
    return (f"block {c.get('block_sizes')} red {c.get('reduction_loops')} warps {c.get('num_warps')} stages "
            f"{c.get('num_stages')} {c.get('pid_type')} td {sum(i == 'tensor_descriptor' for i in ix)}/{len(ix)} "
            f"evict {''.join((e or '-')[0] for e in ev)} flat {c.get('range_flattens')} l2 {c.get('l2_groupings')}")


def one(row: dict, cm, local: int, radius: int = 1, start: str = "fastest") -> dict:
    from tuner.helion import Call, by_score, runnable, spread

    name = row["kernel"].removeprefix("helion:")
    fam = families.get(name)
    bound, args = fam.bind(row["problem"], row["dtype"])
    call = Call.of(bound, args)
    timed = [t for t in row["costmodel"]["search"]["timed"] if t["ms"] is not None]
    fastest = min(timed, key=lambda t: t["ms"])["config"]
    origin = fastest if start == "fastest" else row["default"]["config"]
    done = {configs.config_json(t["config"]) for t in row["costmodel"]["search"]["timed"]}
    near = [c for c in families.neighbours(bound, origin, radius) if configs.config_json(c) not in done]
    ranked = by_score(cm, call, near)
    order = spread(origin, runnable(cm, call, ranked, 0))  # as the tuner's step orders them
    quick = row["quick"]["config"]
    apart = knobs_apart(bound, origin, quick)
    keys = [configs.config_json(c) for c in order]
    rank = keys.index(configs.config_json(quick)) + 1 if configs.config_json(quick) in keys else None
    from bench_helion import ratio

    return {"kernel": row["kernel"], "problem": row["problem"], "dtype": row["dtype"],
            "vs_quick": ratio(row, "quick"),  # as the race's summary reads it
            "fastest_timed": brief(fastest), "fastest_ms": min(t["ms"] for t in timed), "quick": brief(quick),
            "start": start, "from": brief(origin), "from_ms": next((t["ms"] for t in timed if t["config"] == origin),
                                                                    None),
            "quick_knobs_apart": len(apart), "apart": apart, "neighbours": len(order),
            "quick_rank_among_neighbours": rank,
            "model_first": [changed(origin, c) for c in ranked[:local]],
            f"first_{local}": [changed(origin, c) for c in order[:local]]}


def changed(base: dict, c: dict) -> dict:
    """The keys in which ``c`` differs from ``base``, with its values."""
    return {k: c.get(k) for k in sorted(set(base) | set(c)) if base.get(k) != c.get(k)}


H200 = click.option("--h200", is_flag=True, help="answer Helion's device checks as the H200 does (a CPU has no "
                    "tensor descriptors, no maxnreg: its space and random population are not the H200's)")


def model_and_rows(model: str, rows_files: tuple[str, ...], h200: bool):
    """(the Helion model, the race rows of the files), Helion's device checks answered as the H200's with
    ``h200`` (``costmodel.helion.target.answer_as``)."""
    warnings.simplefilter("ignore")
    if h200:
        from costmodel.hardware import KNOWN
        from costmodel.helion.target import answer_as

        answer_as(KNOWN["nvidia-h200"])
    cm = helion_model.load(model)
    try:
        return cm, [json.loads(line) for f in rows_files for line in open(f) if line.strip()]
    except (OSError, ValueError) as e:
        raise click.UsageError(f"cannot read race rows: {e}") from None


@click.command()
@click.argument("rows_files", nargs=-1, required=True)
@click.option("--model", default="nvidia-h200", help="Helion model directory or GPU slug")
@click.option("--local", default=6, help="neighbours a step times (tuner.helion.LOCAL)")
@click.option("--radius", default=1, help="how far a step reaches along each knob (tuner.helion.RADIUS)")
@click.option("--start", type=click.Choice(["fastest", "default"]), default="fastest", show_default=True,
              help="the step from the fastest config the row's tune timed, or from Helion's default config (where "
              "the tuner's second walk starts: tuner.helion.DEFAULT_WALK)")
@click.option("--json", "as_json", is_flag=True, help="one JSON line per row on stdout")
@H200
def main(rows_files, model, local, radius, start, as_json, h200) -> None:
    cm, rows = model_and_rows(model, rows_files, h200)
    for row in rows:
        if "config" not in row.get("costmodel", {}) or not row["costmodel"].get("search", {}).get("timed"):
            continue
        out = one(row, cm, local, radius, start)
        if as_json:
            print(json.dumps(out))
        else:
            print(f"{out['kernel']} {out['problem']} {out['dtype']} vs quick {out['vs_quick']}", file=sys.stderr)
            print(f"  fastest timed {out['fastest_ms']:.4f} ms: {out['fastest_timed']}", file=sys.stderr)
            print(f"  a step from the {start} ({out['from_ms']} ms): {out['from']}", file=sys.stderr)
            print(f"  quick: {out['quick']}; {out['quick_knobs_apart']} knobs apart, rank "
                  f"{out['quick_rank_among_neighbours']} of {out['neighbours']}", file=sys.stderr)
            for a, b in zip(out["model_first"], out[f"first_{local}"]):
                print(f"    model's order: {json.dumps(a)[:70]:72s} a step's: {json.dumps(b)[:70]}", file=sys.stderr)


if __name__ == "__main__":
    main()
