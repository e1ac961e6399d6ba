"""The whole-space groups a dataset holds: per family, how many are complete (every valid config of today's space
measured), how many configs the others lack (what ``collect --complete`` would measure), and for matmul the kinds of
shape issue 16 asks the data to spread over. ``--since REV`` counts only the groups swept since a git revision: none of
their whole-space rows lie in a shard that REV's tree already held.

    .venv/bin/python scripts/whole_space_groups.py --data data --since 2fb0748^ --out scripts/results/X.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow.compute as pc  # noqa: E402
import pyarrow.dataset as ds  # noqa: E402

from costmodel import dataset, hardware, space  # noqa: E402
from costmodel.kernels import family_names, get_family  # noqa: E402

LARGE_FLOP = 1e11  # 2*M*N*K at or over this is large (4096^3 is 1.4e11); under 1e9 is small (issue 16's "1 GFLOP")


def matmul_kinds(p: dict, dtype: str) -> list[str]:
    """Issue 16's kinds of matmul shape that ``p`` belongs to (several at once)."""
    dims = [p["M"], p["N"], p["K"]]
    aligned = [d % 16 == 0 for d in dims]
    flop = 2.0 * p["M"] * p["N"] * p["K"]
    kinds = [dtype, "aligned" if all(aligned) else "unaligned" if not any(aligned) else "some_unaligned"]
    kinds += [k for k, hit in (("odd", any(d % 2 for d in dims)), ("skinny", p["M"] <= 64),
                               ("tall_skinny", p["N"] <= 1024), ("small", flop < 1e9), ("large", flop >= LARGE_FLOP))
              if hit]
    return kinds


def shards_at(rev: str, root: str) -> set[str]:
    """Names of the Parquet shards under ``root`` in git revision ``rev``'s tree."""
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "--", root], capture_output=True, text=True,
                         check=True).stdout
    return {Path(line).name for line in out.splitlines() if line.endswith(".parquet")}


def groups(root: str, since: str | None) -> list[dict]:
    hw = hardware.KNOWN["nvidia-h200"]
    old = shards_at(since, root) if since else set()
    out = []
    for name in family_names():
        fam = get_family(name)
        t = dataset.read(root, ["group_id", "problem_json", "dtype", "config_json", "exhaustive", "__filename"],
                         (ds.field("kernel") == name) & ds.field("source_hash").isin(list(fam.group_hashes)),
                         every_measurement=True)
        # a whole-space group: one of its runs swept the space (its probe's or sample's rows count too)
        t = t.filter(pc.is_in(t["group_id"], pc.unique(t.filter(t["exhaustive"])["group_id"])))
        if not t.num_rows:
            continue
        t = t.append_column("shard", pc.replace_substring_regex(t["__filename"], r"^.*/", ""))
        swept_in = t.filter(t["exhaustive"]).group_by("group_id").aggregate([("shard", "distinct")])
        shards = dict(zip(swept_in["group_id"].to_pylist(), swept_in["shard_distinct"].to_pylist()))
        per_group = t.group_by(["group_id", "problem_json", "dtype"]).aggregate([("config_json", "distinct")])
        cols = ("group_id", "problem_json", "dtype", "config_json_distinct")
        for gid, pj, dtype, measured in zip(*(per_group[c].to_pylist() for c in cols)):
            problem = json.loads(pj)
            valid = {dataset.canonical_json(c) for c in space.enumerate_valid(fam, problem, dtype, hw)}
            out.append({"family": name, "problem": problem, "dtype": dtype, "complete": valid <= set(measured),
                        "lacking": len(valid - set(measured)),
                        "new": not set(shards[gid]) & old,
                        "kinds": matmul_kinds(problem, dtype) if name == "matmul" else [dtype]})
    return out


def summary(gs: list[dict]) -> dict:
    out = {}
    for name in sorted({g["family"] for g in gs}):
        mine = [g for g in gs if g["family"] == name and g["complete"]]
        new = [g for g in mine if g["new"]]
        out[name] = {"complete": len(mine), "incomplete": sum(g["family"] == name and not g["complete"] for g in gs),
                     "lacking": sum(g["lacking"] for g in gs if g["family"] == name),
                     "complete_new": len(new), "kinds": dict(Counter(k for g in mine for k in g["kinds"])),
                     "kinds_new": dict(Counter(k for g in new for k in g["kinds"]))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--since", help="git revision: count as new only groups with no rows in its shards")
    ap.add_argument("--out", help="also write the summary and every group here (JSON)")
    a = ap.parse_args()
    gs = groups(a.data, a.since)
    s = {"data": a.data, "since": a.since, "families": summary(gs)}
    print(json.dumps(s, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps({**s, "groups": gs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
