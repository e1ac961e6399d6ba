"""Check collection runs against their Parquet and compare their throughput (issue 13's figures).

    python scripts/check_collect_runs.py gpus1=/tmp/run-gpus1 gpus2=/tmp/run-gpus2 ... [--baseline gpus1] [--out F]

Each NAME=DIR is a dataset root holding one run (its manifest under DIR/_manifests). For each run it reads the
rows straight from the Parquet files (no de-duplication) and checks what a multi-GPU collector promises:
  duplicates  (group, config) pairs measured more than once            must be 0
  partial     groups with some but not all of their planned configs     must be 0 (a group is written whole)
  unreported  rows the manifest's counts do not account for, or back    must be 0
and reports ok rows/s for the run and for each worker (GPU), with the share of its time that the timing worker
spent waiting on compiles. With --baseline, the scaling efficiency of every other run:
ok_per_s / (workers x the baseline's ok_per_s)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from costmodel import dataset  # noqa: E402


def manifest(root: Path) -> dict:
    found = sorted((root / "_manifests").glob("*.json"))
    if len(found) != 1:
        raise SystemExit(f"{root}: expected one manifest, found {len(found)}")
    return json.loads(found[0].read_text())


def raw_rows(root: Path, run_id: str) -> list[dict]:
    d = ds.dataset(root, schema=dataset.SCHEMA, format="parquet", partitioning="hive")
    t = d.to_table(columns=["group_id", "config_json", "status"], filter=ds.field("run_id") == run_id)
    return t.to_pylist()


def worker_lines(m: dict) -> list[dict]:
    """Per worker: groups, ok rows, ok/s over the run's wall, and where its timing worker's time went."""
    out = []
    for w in m.get("workers") or []:
        spent = w.get("waited_s", 0) + w.get("timed_s", 0)
        out.append({**{k: w[k] for k in ("slot", "gpu", "host", "pid", "pids", "deaths", "groups", "ok",
                                         "waited_s", "timed_s", "starved_s", "compile_s", "lock_wait_s") if k in w},
                    "ok_per_s": round(w["ok"] / m["wall_s"], 2),
                    "waiting_share": round(w.get("waited_s", 0) / spent, 3) if spent else None})
    return out


def check(name: str, root: Path) -> dict:
    m = manifest(root)
    rows = raw_rows(root, m["run_id"])
    pairs = Counter((r["group_id"], r["config_json"]) for r in rows)
    by_group = Counter(r["group_id"] for r in rows)
    distinct = Counter(g for g, _ in pairs)  # configs of each group, each counted once
    planned = {}
    for i, g in enumerate(m["plan"]):  # a group is recorded under one of the ids today's kernel may use
        for gid, _ in dataset.group_candidates(m["gpu"], g["family"], g["problem"], g["dtype"]):
            planned[gid] = (i, g["configs"])
    partial = [{"index": planned[gid][0], "configs": n, "planned": planned[gid][1]}
               for gid, n in distinct.items() if gid in planned and n != planned[gid][1]]
    statuses = Counter(r["status"] for r in rows)
    reported = {k: v for k, v in m["counts"].items() if v}
    workers = m["dask"]["workers"] if m.get("dask") else len(m.get("workers") or []) or 1
    return {
        "name": name, "run_id": m["run_id"], "state": m["state"], "mode": "dask" if m.get("dask") else "gpus",
        "workers": workers, "wall_s": m["wall_s"], "ok": m["counts"]["ok"], "ok_per_s": m["ok_per_s"],
        "groups_measured": m["groups_measured"], "groups_in_data": len(by_group), "rows": len(rows),
        "duplicates": sum(n - 1 for n in pairs.values() if n > 1), "partial_groups": partial,
        "unplanned_groups": len(set(by_group) - set(planned)),
        "unreported": {k: statuses.get(k, 0) - reported.get(k, 0) for k in set(statuses) | set(reported)
                       if statuses.get(k, 0) != reported.get(k, 0)},
        "requeued": m.get("requeued"), "recovered_pairs": m.get("recovered"), "retried_groups": m.get("retried_groups"),
        "measured_ahead": m.get("measured_ahead"),  # Dask: groups a task measured while its own still compiled
        "deaths": sum(w.get("deaths", 0) for w in m.get("workers") or []),
        "per_worker": worker_lines(m),
        "group_runs": m.get("group_runs"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", metavar="NAME=DIR")
    ap.add_argument("--baseline", help="the one-GPU run that scaling efficiency is measured against")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    results = []
    for spec in args.runs:
        name, _, root = spec.partition("=")
        results.append(check(name, Path(root)))
    base = next((r for r in results if r["name"] == args.baseline), None)
    same_mode = {}  # each mode's first one-worker run: a Dask cluster of one worker pays Dask's costs too
    for r in results:
        if r["workers"] == 1:
            same_mode.setdefault(r["mode"], r)
    for r in results:
        if base is not None and r is not base:
            r["scaling_efficiency"] = round(r["ok_per_s"] / (r["workers"] * base["ok_per_s"]), 3)
        one = same_mode.get(r["mode"])
        if one is not None and r is not one:
            r["scaling_efficiency_same_mode"] = round(r["ok_per_s"] / (r["workers"] * one["ok_per_s"]), 3)
        ok = not r["duplicates"] and not r["partial_groups"] and not r["unreported"] and not r["unplanned_groups"]
        r["intact"] = ok
        print(f"{r['name']:>12} {r['mode']:5} workers {r['workers']} state {r['state']:8} ok {r['ok']:6} "
              f"wall {r['wall_s']:7.1f} s ok/s {r['ok_per_s']:6.2f} eff {r.get('scaling_efficiency', '-')!s:5} "
              f"(same mode {r.get('scaling_efficiency_same_mode', '-')!s:5}) "
              f"dup {r['duplicates']} partial {len(r['partial_groups'])} unreported {r['unreported'] or 0} "
              f"deaths {r['deaths']} requeued {r['requeued']} retried {r['retried_groups']} "
              f"measured ahead {r['measured_ahead']} "
              f"{'intact' if ok else 'NOT INTACT'}", file=sys.stderr)
        for w in r["per_worker"]:
            print(f"{'':>14}worker {w.get('slot', w.get('pid'))}: groups {w['groups']} ok {w['ok']} "
                  f"ok/s {w['ok_per_s']} waiting on compiles {w['waiting_share']} "
                  f"compile s {w.get('compile_s', '-')} lock wait s {w.get('lock_wait_s', '-')}", file=sys.stderr)
    text = json.dumps(results, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0 if all(r["intact"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
