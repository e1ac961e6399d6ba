"""`costmodel` command line. With --json, stdout carries one JSON object; progress and tables go to stderr."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import sys

import click
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from costmodel import __version__
from costmodel.errors import CostModelError

# a pipe or a file gets wide lines rather than rich's 80 columns, which cut knob names (EPILOGUE_SUBT…) and model
# paths and wrapped every table; a terminal (or COLUMNS) keeps its own width
PIPED_WIDTH = 200
err_console = Console(stderr=True, width=None if sys.stderr.isatty() or os.environ.get("COLUMNS") else PIPED_WIDTH)


def _emit(obj: dict, as_json: bool, table: Table | None = None) -> None:
    if as_json:
        click.echo(json.dumps(obj, indent=1, default=str))
    elif table is not None:
        err_console.print(table)


@contextlib.contextmanager
def stdout_on_stderr():
    """Whatever is written to stdout inside, by Python or by a process forked meanwhile, goes to stderr, so a command's
    stdout stays its one JSON object. Helion's progress bars are rich consoles on stdout (a `tune --kernel helion:`
    whose output did not parse as JSON, H200, session 45)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def handle_errors(fn):
    """Bad input and missing or corrupt data: one line on stderr and exit status 2, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CostModelError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)

    return wrapper


def parse_shape(text: str) -> dict[str, str]:
    """'M=4096,N=4096,K=4096' -> {'M': '4096', ...}: each dim once, none past features.MAX_DIM (the family checks the
    rest: the dims it needs, integers, its lower bounds)."""
    from costmodel.features import MAX_DIM

    out: dict[str, str] = {}
    for part in text.split(","):
        name, eq, value = (s.strip() for s in part.partition("="))
        if not (name and eq and value):
            raise CostModelError(f"bad shape {text!r}: expected NAME=VALUE[,NAME=VALUE...]")
        if name in out:
            raise CostModelError(f"bad shape {text!r}: dim {name} given twice")
        if re.fullmatch(r"[+-]?\d+", value) and int(value) > MAX_DIM:
            raise CostModelError(f"bad shape {text!r}: {name}={value} is over the largest dim, {MAX_DIM} (2**31-1)")
        out[name] = value
    return out


@click.group()
@click.version_option(__version__, prog_name="costmodel")  # from the package: a plain checkout has no metadata
def main() -> None:
    """costmodel: learned cost-model tuning for Triton kernels."""


def run() -> None:
    """The process's entry (the `costmodel` script, `python -m costmodel`): ``main``, then an exit without the
    interpreter's teardown. What a process must finish still runs: threads are joined, exit handlers run (MLflow's
    among them), stdout and stderr are flushed. The teardown itself (freeing every module and object) is skipped:
    with the process server's own fast exit (``costmodel.forkserver_exit``), a tune's captured output closed 0.95 s
    after its last line with the teardown and 0.08 s without (median of 3 on the CPU machine, session 16:
    scripts/experiments/exit_probe.py), and a tune is meant to finish in 10 s. Uncaught exceptions leave as usual.
    In-process callers (tests, CliRunner) use ``main``."""
    import atexit
    import threading

    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, status 1, as Python does
        print(code, file=sys.stderr)
        code = 1
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    os._exit(code or 0)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
@handle_errors
def kernels(as_json: bool) -> None:
    """List kernel families, their knobs and the valid configs for a sample problem."""
    import numpy as np

    from costmodel import space
    from costmodel.hardware import KNOWN
    from costmodel.kernels import family_names, get_family

    hw = KNOWN["nvidia-h200"]
    rows = []
    for name in family_names():
        fam = get_family(name)
        problem = fam.problems(np.random.default_rng(0), 1)[0]
        dtype = fam.dtypes[0]
        rows.append({"family": name, "dims": list(fam.dims), "dtypes": list(fam.dtypes),
                     "knobs": {k.name: list(k.values) for k in fam.knobs}, "space_size": sum(1 for _ in fam.all_configs()),
                     "sample_problem": problem, "sample_dtype": dtype,
                     "valid_configs": len(space.enumerate_valid(fam, problem, dtype, hw)),
                     "default_config": fam.default_config(problem, dtype, hw), "kernel_hash": fam.kernel_hash})
    table = Table("family", "dims", Column("knobs", overflow="fold"), "valid / space", "sample problem",
                  title=f"kernel families ({hw.gpu})")
    for r in rows:
        table.add_row(r["family"], ",".join(r["dims"]), ", ".join(r["knobs"]),
                      f"{r['valid_configs']} / {r['space_size']}", json.dumps(r["sample_problem"]))
    helion = _helion_kernels()
    _emit({"gpu": hw.gpu, "families": rows, "helion_kernels": helion}, as_json, table)
    if not as_json:
        more = Table("kernel", "dims", "twin (Triton family)", "sample problem",
                     title="Helion kernels (costmodel/helion/kernels.py; their knobs are Helion's ConfigSpec)")
        for r in helion:
            more.add_row(r["kernel"], ",".join(r["dims"]), r["twin"] or "- (fused)", json.dumps(r["sample_problem"]))
        err_console.print(more)


def _helion_kernels() -> list[dict]:
    """The costmodel Helion kernels (``collect`` / ``tune --kernel helion:<name>``); helion is not imported."""
    import numpy as np

    from costmodel.helion import families

    return [{"kernel": f.kernel, "dims": list(f.dims), "dtypes": list(f.dtypes), "twin": f.twin,
             "sample_problem": f.problems(np.random.default_rng(0), 1)[0]}
            for f in sorted(families.FAMILIES.values(), key=lambda f: f.name)]


def _describe_plan(plan: list, gpu: str) -> None:
    sweeps = [g for g in plan if g.exhaustive]
    err_console.print(f"plan: {len(plan)} groups, {sum(len(g.configs) for g in plan)} configs; over the whole "
                      f"valid space: {len(sweeps)} groups, {sum(len(g.configs) for g in sweeps)} configs; recorded "
                      f"as gpu={gpu}")


@main.command()
@click.option("--kernel", "kernels_", default="all", show_default=True,
              help="families, comma-separated, or all; helion:<name> for a Helion kernel")
@click.option("--groups", default=50, show_default=True, help="groups (family, problem, dtype) to measure")
@click.option("--configs-per-group", default=100, show_default=True)
@click.option("--exhaustive-share", default=0.1, show_default=True,
              help="share of groups measured over the whole valid space, rounded down (0.1 of 1-9 groups: none)")
@click.option("--dtype", "dtypes", default=None, help="dtypes, comma-separated (default: each family's)")
@click.option("--out", default="data", show_default=True, type=click.Path())
@click.option("--seed", default=0, show_default=True)
@click.option("--resume/--remeasure", default=True, show_default=True,
              help="skip (group, config) pairs already in --out; --remeasure measures them again (readers keep each "
                   "pair's first measurement)")
@click.option("--where", "bounds", multiple=True, metavar="DIM<=VALUE",
              help="only problems within this bound (repeatable; <, <=, ==, !=, >=, >, also on a remainder), e.g. --where 'M<=128' --where 'K%16!=0'")
@click.option("--timeout", default=30.0, show_default=True, help="seconds a config may take before its worker is killed")
@click.option("--time-budget", default=None, type=float, help="seconds: start no group that, at the pace of the groups measured so far, would end after them")
@click.option("--eager/--no-eager", default=True, show_default=True, help="also time each config's eager per-call "
              "time (tune's default objective; no model trains on it); --no-eager records GPU time only, faster")
@click.option("--gpus", default=None, metavar="all|N",
              help="one worker process per GPU, all visible or the first N (N CPU workers under TRITON_INTERPRET=1)")
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="run each group as a task on the Dask scheduler at ADDRESS (workers started with --resources "
                   "GPU=1, one GPU each); --out may then be a pyarrow filesystem URI (s3://bucket/data)")
@click.option("--active", default=None, type=int, metavar="N",
              help="probe --groups shapes with the model's top 8, 8 random configs and the default, then measure "
                   "the N the model got most wrong over their whole valid space (0: probe only)")
@click.option("--model", "model_ref", default=None, help="with --active: the model that ranks (default: the shipped one)")
@click.option("--complete", is_flag=True,
              help="instead of new groups, the whole-space groups --out holds (within --where, --dtype), each "
                   "measured over today's whole valid space: only what it lacks, e.g. the values of a new knob; "
                   "with --remeasure every config again, so that the group has one run's times")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def collect(kernels_, groups, configs_per_group, exhaustive_share, dtypes, out, seed, resume, bounds, timeout,
            time_budget, eager, gpus, dask_address, active, model_ref, complete, as_json):
    """Benchmark sampled configs of many problems on this GPU (or all of them, or a Dask cluster's) into the
    Parquet dataset."""
    from collect.plan import DimBound, check_bounds, make_plan
    from collect.runner import run_plan
    from costmodel.dataset import new_run_id
    from costmodel import hardware
    from costmodel.benchmark import IsolatedBenchmarker, interpreting
    from costmodel.helion import families as helion_families
    from costmodel.kernels import family_names, get_family

    names = family_names() if kernels_ == "all" else [k.strip() for k in kernels_.split(",")]
    for n in names:
        helion_families.get(n) if helion_families.is_helion(n) else get_family(n)
    helion_names = [n for n in names if helion_families.is_helion(n)]
    if helion_names and (active is not None or gpus or dask_address):
        raise CostModelError(f"{helion_names[0]}: Helion kernels collect on one GPU (no --active, --gpus, --dask yet)")
    if groups < 1 or configs_per_group < 1:
        raise CostModelError("--groups and --configs-per-group must be positive")
    if gpus and dask_address:
        raise CostModelError("--gpus and --dask are alternatives: pass one")
    where = tuple(DimBound.parse(b) for b in bounds)
    check_bounds(names, where)  # bad input, before anything asks for a GPU
    if "://" in out and not dask_address:
        raise CostModelError(f"--out {out}: a filesystem URI needs --dask (locally, pass a path)")
    if active is not None and (active < 0 or "://" in out):
        raise CostModelError("--active N: N >= 0 groups to sweep (0: probe only), and --out a local path (the probe "
                             "is read back)")
    if model_ref and active is None:
        raise CostModelError("--model ranks the probe of --active: pass --active N")
    if complete and (active is not None or helion_names or dask_address or "://" in out):
        raise CostModelError("--complete measures the whole-space groups in a local --out: not with --active, "
                             "--dask or Helion kernels")

    stopped_by: list[int] = []
    run_ids: list[str] = []  # this command's runs (two with --active), whose manifests a stopped command reports

    def stop(signum, frame):  # a kill (SIGTERM) flushes buffered rows and the manifest, as Ctrl-C does
        stopped_by.append(signum)
        raise KeyboardInterrupt

    def next_run_id() -> str:
        run_ids.append(new_run_id())
        return run_ids[-1]

    signal.signal(signal.SIGTERM, stop)
    try:
        device = "cpu" if interpreting() else "cuda"
        dtype_list = dtypes.split(",") if dtypes else None
        if dask_address:
            from collect import cluster
            from costmodel.model import dask_client as connect

            with connect(dask_address) as dask_client:
                hw = cluster.cluster_hardware(dask_client, device == "cpu")
                plan = make_plan(names, groups, configs_per_group, dtype_list, seed, hw, exhaustive_share, where=where)
                _check_where_left_problems(plan, names, bounds)
                summary = _run_plans(plan, hw, out, active, model_ref, seed, time_budget,
                                     lambda p, budget: cluster.run_dask(
                                         p, out, hw, dask_client, run_id=next_run_id(), resume=resume, seed=seed,
                                         console=err_console, timeout_s=timeout, time_budget_s=budget, eager=eager))
        else:
            workers = None
            if gpus:
                from collect.parallel import resolve_gpus

                workers = resolve_gpus(gpus, device == "cpu")
            hw = hardware.INTERPRETER if device == "cpu" else hardware.current(hint="collect measures on a GPU: run "
                                                                                "it on a GPU host")
            if complete:
                from collect.plan import complete_plan

                plan = complete_plan(out, names, dtype_list, hw, where)
                if not plan:
                    raise CostModelError(f"--complete: {out} holds no whole-space group of {', '.join(names)} within "
                                         "the bounds")
            else:
                plan = make_plan(names, groups, configs_per_group, dtype_list, seed, hw, exhaustive_share, where=where,
                                 device=device)
                _check_where_left_problems(plan, names, bounds)
            if workers:
                from collect.parallel import run_parallel

                summary = _run_plans(plan, hw, out, active, model_ref, seed, time_budget,
                                     lambda p, budget: run_parallel(
                                         p, out, hw, workers, run_id=next_run_id(), resume=resume, seed=seed,
                                         console=err_console, timeout_s=timeout, time_budget_s=budget, eager=eager))
            else:
                with IsolatedBenchmarker(hw, device=device, timeout_s=timeout, seed=seed, eager=eager) as bench:
                    summary = _run_plans(plan, hw, out, active, model_ref, seed, time_budget,
                                         lambda p, budget: run_plan(
                                             p, out, bench, hw, run_id=next_run_id(), resume=resume, seed=seed,
                                             console=err_console, time_budget_s=budget))
    except KeyboardInterrupt:
        # stopped (Ctrl-C, or a kill such as `timeout`'s): the run wrote its manifest; --json still prints it, so a
        # caller reading stdout learns what was published (session 17: a device call's timeout left it empty)
        _emit_stopped(out, run_ids, as_json)
        sys.exit(128 + (stopped_by[0] if stopped_by else signal.SIGINT))
    summary.pop("plan", None)  # the probe run of --active 0 had it taken already
    if summary.get("skipped_already_measured"):
        err_console.print(f"skipped {summary['skipped_already_measured']} pairs already in {out} (--remeasure "
                          "measures them again)")
    table = Table("run", "groups", "measured", "ok", "failed", "ok/s", "wall s")
    table.add_row(summary["run_id"], str(summary["groups"]), str(summary["measured"]), str(summary["counts"]["ok"]),
                  str(summary["measured"] - summary["counts"]["ok"]), str(summary["ok_per_s"]), str(summary["wall_s"]))
    _emit(summary, as_json, table)


def _emit_stopped(out: str, run_ids: list[str], as_json: bool) -> None:
    """What a stopped collect published: its last run's manifest (state "interrupted"), as a finished one prints."""
    from pathlib import Path

    manifest = Path(out) / "_manifests" / f"{run_ids[-1]}.json" if run_ids and "://" not in out else None
    if manifest is None or not manifest.exists():
        err_console.print("collect stopped before a run began: nothing was published")
        _emit({"run_id": None, "state": "interrupted", "groups_measured": 0, "measured": 0}, as_json)
        return
    summary = json.loads(manifest.read_text())
    summary.pop("plan", None)
    err_console.print(f"collect stopped: run {summary['run_id']} published {summary.get('groups_measured', 0)} "
                      f"groups ({manifest})")
    _emit(summary, as_json)


def _run_plans(plan: list, hw, out: str, active: int | None, model_ref: str | None, seed: int,
               budget: float | None, run) -> dict:
    """Measure ``plan`` with ``run(plan, time_budget)``; with ``active``, probe its groups first and then sweep
    the ``active`` of them the model got most wrong (``collect.active``), within one time budget."""
    if active is None:
        _describe_plan(plan, hw.gpu)
        return run(plan, budget)
    import time

    import pyarrow.dataset as ds

    from collect import active as picking
    from costmodel import dataset, model

    t0 = time.perf_counter()
    cm = model.load(model_ref, gpu=None) if model_ref else model.load_shipped(hw.gpu)
    probes = picking.probe_plan(plan, cm, hw, seed=seed)
    _describe_plan(probes, hw.gpu)
    probed = run(probes, budget)
    probed.pop("plan", None)
    table = dataset.read(out, ["kernel", "problem_json", "dtype", "config_json", "status", "latency_ms"],
                         ds.field("gpu") == hw.gpu)
    ranked = picking.regrets(probes, table)
    sweeps = picking.sweep_plan(probes, ranked, active, hw)
    for r in picking.by_regret(ranked)[:len(sweeps)]:  # the swept ones
        err_console.print(f"sweep {r['family']} {json.dumps(r['problem'])} {r['dtype']}: the probe's best is "
                          f"{r['regret']:.3f} of the model's top {picking.PROBE_K}'s")
    if sweeps:
        _describe_plan(sweeps, hw.gpu)
        left = None if budget is None else max(0.0, budget - (time.perf_counter() - t0))
        summary = run(sweeps, left)
    else:  # --active 0: the probes are the data (they stay in training; most swept shapes are held out)
        summary = probed
    summary["active"] = {"probe_run_id": probed["run_id"], "probe_state": probed["state"], "probed_groups": len(probes),
                         "probe_counts": probed["counts"], "swept_groups": len(sweeps),
                         "regrets": picking.by_regret(ranked)}
    return summary


def _check_where_left_problems(plan: list, names: list[str], bounds: tuple[str, ...]) -> None:
    """A ``--where`` that leaves a family no problem is a mistake to report, not an empty run."""
    if bounds and (empty := [n for n in names if not any(g.family == n for g in plan)]):
        raise CostModelError(f"--where {' '.join(bounds)} leaves no problem of {', '.join(empty)} to measure")


def _rows_table(header: list[str], rows: list[list[str]], title: str) -> Table:
    from rich import box

    table = Table(*header, title=title, box=box.SIMPLE, collapse_padding=True, pad_edge=False)
    for row in rows:
        table.add_row(*row)
    return table


def _kind_splits(meta: dict) -> dict:
    """The kind splits ``train`` ran beside the model (each kind of shape held out whole, a fresh model trained on
    the rest of the same data), by kind, each with that data's hash; empty for a model trained without them."""
    return {k.removeprefix("kind_"): {**v, "data_hash": meta.get("data", {}).get("hash")}
            for k, v in meta.get("extra_splits", {}).items() if k.startswith("kind_")}


def _report(summary: dict, title: str, result: dict, as_json: bool) -> None:
    """``result`` as JSON, or the report tables: the headline figures per kernel family, model vs baselines at
    each k, and what their columns mean (full width below the tables, not a caption squeezed to theirs)."""
    from costmodel import evaluation as e

    if as_json:
        return _emit(result, as_json)
    per_kernel = _rows_table(e.KERNEL_HEADER, e.kernel_rows(summary), f"{title}, per kernel")
    overall = _rows_table(e.COMPARISON_HEADER, e.comparison_rows(summary), f"{title}: model vs baselines")
    figures = (f"default config {e.fmt(summary.get('default_score'))} of best, NDCG@8 "
               f"{e.fmt(summary.get('ndcg_at_8'))}, Kendall tau {e.fmt(summary.get('kendall_tau'))}; "
               f"groups whose shape has a group in training: {e.fmt(summary.get('twin_groups'))}\n"
               f"over groups {e.truth_line(summary)}")
    for kind, r in summary.get("kind_splits", {}).items():
        figures += (f"\n{kind} shapes held out whole (a fresh model trained on the rest, at training): top8 "
                    f"{e.fmt(r.get('top8_exhaustive'))} over {r.get('exhaustive_groups')} whole-space groups, "
                    f"{e.fmt(r.get('top8_score'))} over all {r.get('groups')}")
    for part in (per_kernel, overall, figures, Text(f"{e.COMPARISON_LEGEND}\n{e.KERNEL_LEGEND}", style="dim")):
        err_console.print(part)


@main.command()
@click.option("--data", default="data", show_default=True, type=click.Path(), help="dataset root")
@click.option("--gpu", default=None, help="GPU slug to train for (default: the only GPU in --data)")
@click.option("--out", default=None, type=click.Path(), help="model directory (default: out/models/<gpu>)")
@click.option("--ship", is_flag=True,
              help="replace the shipped model costmodel/models/<gpu> (what tune and evaluate use by default); "
                   "registers it when tracking")
@click.option("--track/--no-track", default=True, show_default=True,
              help="log the run in MLflow (MLFLOW_TRACKING_URI, else MLflow's default store)")
@click.option("--register", is_flag=True, help="also register the model as a new version of costmodel-<gpu> "
                                               "(a candidate for champion); --ship implies it")
@click.option("--extra-splits/--no-extra-splits", default=True, show_default=True,
              help="also evaluate fresh models on the dissimilar, leave-one-family-out and kind splits (model card)")
@click.option("--trees", default=None, type=int, help="at most this many trees (default 400; early stopping cuts)")
@click.option("--seed", default=0, show_default=True, help="seed of the held-out split and of training")
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="boost with xgboost.dask on the Dask scheduler at ADDRESS (groups kept whole per partition)")
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
@handle_errors
def train(data, gpu, out, ship, track, register, extra_splits, trees, seed, dask_address, as_json):
    """Train the ranking model for one GPU; write model.ubj, meta.json and MODEL_CARD.md."""
    import contextlib
    import dataclasses
    import time
    from importlib.util import find_spec
    from pathlib import Path

    from costmodel import evaluation, model

    if ship and out:
        raise CostModelError("--ship writes the shipped model's directory: drop --out")
    if register and not track:
        raise CostModelError("--register registers the model in MLflow: drop --no-track")
    register = (register or ship) and track
    if track and find_spec("mlflow") is None:
        raise CostModelError("mlflow is not installed: pip install 'costmodel[track]', or pass --no-track")
    t0 = time.perf_counter()
    table, gpu = model.training_table(data, gpu)
    params = model.TrainParams(seed=seed, dask=dask_address)
    if trees is not None:
        params = dataclasses.replace(params, n_estimators=trees)
    extra = dataclasses.replace(model.FAST, seed=seed, dask=dask_address) if extra_splits else None
    out_dir = model.MODELS_DIR / gpu if ship else Path(out or Path("out", "models", gpu))

    def progress(stage: str) -> None:  # a line per stage: a pipe shows no spinner, and training takes a while
        click.echo(f"[{time.perf_counter() - t0:5.1f} s] {stage}", err=True)

    if track:
        from costmodel import tracking
    with tracking.training_run(gpu) if track else contextlib.nullcontext():
        progress(f"training on {table.num_rows} measurements of {gpu}")
        booster, meta, evals = evaluation.train_model(table, gpu, params, seed, extra, progress=progress)
        out_dir = model.save(out_dir, booster, meta, evaluation.model_card(meta, evals))
        result = {"gpu": gpu, "out": str(out_dir), "shipped": ship, "data_hash": meta["data"]["hash"],
                  "rows": meta["data"]["rows"], "groups": meta["data"]["groups"], "trees": meta["trees"],
                  "heldout": meta["metrics"], **meta["extra_splits"]}
        if track:
            progress("logging the run" + (" and registering the model" if register else "") + " in MLflow")
            result["tracking"] = tracking.log_training(Path(out_dir), booster, meta, evals, table, Path(data), register)
    result["wall_s"] = round(time.perf_counter() - t0, 2)
    progress(f"model written to {out_dir} ({meta['trees']} trees, data {meta['data']['hash']})")
    _report(meta["metrics"], f"held-out groups ({gpu})", result, as_json)


@main.command()
@click.option("--data", default="data", show_default=True, type=click.Path(), help="dataset root")
@click.option("--model", "model_ref", default=None,
              help="GPU slug of a shipped model or a model directory (default: the shipped model of the only GPU "
                   "in --data)")
@click.option("--split", "how", default="heldout", show_default=True,
              type=click.Choice(["heldout", "dissimilar", "family", "kind"]),
              help="heldout: the model's own held-out groups; dissimilar/family/kind: fresh models trained on the "
                   "complement")
@click.option("--kind", default=None, type=click.Choice(["unaligned", "skinny"]),
              help="with --split kind, the kind of shape held out: unaligned (default; a matmul dim not a multiple "
                   "of 16), skinny (matmul M <= 64)")
@click.option("--plots", default=None, type=click.Path(), help="write PNG plots into this directory")
@click.option("--seed", default=0, show_default=True, help="seed for the dissimilar/family/kind models")
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
@handle_errors
def evaluate(data, model_ref, how, kind, plots, seed, as_json):
    """Measure a model on groups it never saw, beside random-k, default-config and nearest-shape baselines."""
    import dataclasses
    from pathlib import Path

    from costmodel import evaluation, model

    if kind and how != "kind":
        raise CostModelError(f"--kind {kind} goes with --split kind, not --split {how}")
    if model_ref is None:
        table, gpu = model.training_table(data)
        cm = model.load_shipped(gpu) if how == "heldout" else None
    else:
        cm = model.load(model_ref, gpu=None if Path(model_ref).is_dir() else model_ref)
        table, gpu = model.training_table(data, cm.gpu)
    if how == "heldout":
        held = set(cm.meta.get("heldout", {}).get("groups", []))
        ids = set(table["group_id"].to_pylist())
        if not held & ids:
            raise CostModelError(f"none of the model's {len(held)} held-out groups are in {data}")
        test, train = model.select_groups(table, held & ids), model.select_groups(table, ids - held)
        ev = evaluation.evaluate(cm, test, train, how)
    else:
        ev = evaluation.evaluate_split(table, how, gpu, dataclasses.replace(model.FAST, seed=seed), seed,
                                       lambda line: click.echo(line, err=True), kind or "unaligned")
    summary = {"gpu": gpu, "model": None if cm is None or how != "heldout" else str(cm.path), **ev.summary()}
    if how == "heldout":  # beside them, how the model's recipe did on kinds of shape it never saw (fresh models)
        summary["kind_splits"] = _kind_splits(cm.meta)
    if plots:
        from costmodel.plots import write_plots

        summary["plots"] = write_plots(ev, plots)
    _report(summary, f"{summary['split']} split, {summary['groups']} groups", summary, as_json)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
@handle_errors
def models(as_json):
    """Shipped models (costmodel/models/) and models registered in MLflow (when a tracking store is set or
    MLflow's default store exists here)."""
    import os
    from importlib.util import find_spec
    from pathlib import Path

    from costmodel import model

    shipped, helion = model.shipped(), model.shipped(f"*/helion/{model.META_FILE}")
    registry: dict = {"registered": [], "note": None}
    if find_spec("mlflow") is None:
        registry["note"] = "mlflow is not installed"
    elif not os.environ.get("MLFLOW_TRACKING_URI") and not Path("mlflow.db").exists():
        registry["note"] = "no tracking store (set MLFLOW_TRACKING_URI, or run train with --track here)"
    else:
        from costmodel import tracking

        registry["registered"] = tracking.registered_models()
    table = Table("kind", "name / gpu", Column("detail", overflow="fold"), title="models")
    for kind, models in (("shipped", shipped), ("shipped, Helion", helion)):
        for m in models:
            top8 = "-" if m.get("top8_score") is None else f"{m['top8_score']:.3f}"
            split = f" ({m['split']} split)" if m.get("split") else ""
            detail = m.get("error") or (f"{m['path']}  top8 {top8}{split}  data {m['data_hash']}"
                                        + (f"  Helion {', '.join(m['helion_versions'])}" if "helion_versions" in m
                                           else ""))
            table.add_row(kind, str(m["gpu"]), detail + ("" if m.get("compatible", True) else "  (retrain: features)"))
    for r in registry["registered"]:
        table.add_row("registered", r["name"], f"versions {r['versions']}  aliases {r['aliases']}")
    if registry["note"]:
        table.caption = registry["note"]
    _emit({"shipped": shipped, "shipped_helion": helion, **registry}, as_json, table)


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux, 10 ms resolution: /proc's clock ticks); None elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 2)


def _tune_hardware(gpu: str | None, predict_only: bool, cost_model_ref: str | None):
    """The hardware to tune for: the visible GPU, or with --predict-only the model's GPU (no GPU needed)."""
    from costmodel import hardware, model

    if not predict_only:
        hw = hardware.current(hint="tune measures on a GPU; --predict-only ranks without one")
        if gpu and gpu != hw.gpu:
            raise CostModelError(f"--gpu {gpu} but the visible GPU is {hw.gpu}")
        return hw, model.load(cost_model_ref or hw.gpu, gpu=hw.gpu)
    shipped = [m["gpu"] for m in model.shipped() if "error" not in m]
    gpu = gpu or (shipped[0] if len(shipped) == 1 and not cost_model_ref else None)
    cm = model.load(cost_model_ref or gpu, gpu=gpu) if (cost_model_ref or gpu) else None
    if cm is None:
        raise CostModelError(f"--predict-only needs --gpu (shipped models: {', '.join(shipped) or 'none'})")
    return cm.hardware, cm


@main.command()
@click.option("--kernel", "family", required=True, help="kernel family (see `costmodel kernels`)")
@click.option("--shape", required=True, help="problem dims, e.g. M=4096,N=4096,K=4096")
@click.option("--dtype", default="float16", show_default=True)
@click.option("-k", "k", default=None, type=int, help="configs to benchmark first: the model's top k (less "
              "--explore) [default: 12, tuner.tune.K]")
@click.option("--explore", default=None, type=int, help="of the k, how many go to the best-ranked config of other "
              "structures (tiles, schedule) than the rest have [default: 4, at most k // 2]")
@click.option("--exhaustive", is_flag=True, help="also time the whole valid space, for comparison")
@click.option("--budget-s", default=10.0, show_default=True, type=float,
              help="wall budget of the command, from its process's start: a second round (k more configs, "
                   "re-ranked with the top k's measurements when they disagree with the model) runs only within it")
@click.option("--objective", default="eager", show_default=True,
              help="judge configs by their per-call time in eager PyTorch (launch included) or by GPU time "
                   "(launch hidden, as in a CUDA graph)")
@click.option("--steps", default=0, show_default=True, type=int,
              help="then up to this many steps: the fastest config's untimed neighbours (one knob away, or its tile "
                   "reshaped), 6 in the model's order, again from a faster one a step finds (outside --budget-s)")
@click.option("--predict-only", is_flag=True, help="rank without a GPU; nothing is measured")
@click.option("--record", is_flag=True, help="append the measurements to the dataset at --data")
@click.option("--data", default="data", show_default=True, type=click.Path())
@click.option("--gpu", default=None, help="GPU slug (with --predict-only: whose model ranks)")
@click.option("--model", "model_ref", default=None, help="model directory or GPU slug (default: the shipped one)")
@click.option("--no-cache", is_flag=True, help="neither read nor write the result cache")
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
@handle_errors
def tune(family, shape, dtype, k, explore, exhaustive, budget_s, objective, steps, predict_only, record, data, gpu,
         model_ref, no_cache, as_json):
    """Tune one problem: rank every valid config with the GPU's model, benchmark only the top k. A Helion kernel
    (helion:<name>) is tuned by its first call with costmodel's autotuner_fn, answered by Helion's cache next time."""
    from costmodel.helion.families import is_helion
    from costmodel.kernels import get_family

    if is_helion(family):
        return _tune_helion(family, shape, dtype, k, objective, predict_only, gpu, model_ref, no_cache, as_json)
    fam = get_family(family)
    problem, dtype = fam.check_problem(parse_shape(shape)), fam.check_dtype(dtype)
    if k is None:
        from tuner.tune import K

        k = K
    if k < 1:
        raise CostModelError("-k must be at least 1")
    if explore is not None and not 0 <= explore < k:
        raise CostModelError(f"--explore {explore}: from 0 to k - 1 ({k - 1})")
    if not budget_s >= 0:
        raise CostModelError("--budget-s must be a number of seconds >= 0")
    if objective not in ("eager", "graph"):
        raise CostModelError(f"--objective {objective}: eager or graph")
    if steps < 0:
        raise CostModelError(f"--steps {steps}: a count of steps, 0 or more")
    if predict_only and (exhaustive or record):
        raise CostModelError("--predict-only measures nothing: it cannot be combined with --exhaustive or --record")
    since_start = {"entered": _process_age_s()}  # the whole command's time line (its exit: the caller's wall less this)
    if not predict_only:
        from costmodel.benchmark import start_process_server

        start_process_server()
    hw, cm = _tune_hardware(gpu, predict_only, model_ref)
    since_start["hardware_and_model"] = _process_age_s()
    if predict_only:
        from tuner.tune import predict

        out = predict(family, problem, dtype, hw, cm, k)
        table = Table("rank", Column("config", overflow="fold"),
                      title=f"{family} {dtype} {json.dumps(problem)}: predicted top {k} of {out['candidates']} "
                            f"({out['wall_s'] * 1e3:.0f} ms, nothing measured)")
        for row in out["top"]:
            table.add_row(str(row["rank"]), json.dumps(row["config"]))
        return _emit(out, as_json, table)

    from costmodel import dataset
    from costmodel.benchmark import IsolatedBenchmarker
    from tuner.cache import ResultCache
    from tuner.tune import record as record_result
    from tuner.tune import tune as tune_problem

    with IsolatedBenchmarker(hw, compile_workers=min(k + 1, 16)) as bench:
        since_start["benchmarker_up"] = _process_age_s()
        # the budget is the command's: what start-up took (imports, the model: 1.7-2.9 s in session 15's race) is spent
        age = _process_age_s() or 0.0
        result = tune_problem(family, problem, dtype, bench, k=k, cost_model=cm, hw=hw, exhaustive=exhaustive,
                              cache=None if no_cache else ResultCache(), budget_s=max(budget_s - age, 0.0),
                              objective=objective, steps=steps,
                              **({} if explore is None else {"explore": explore}))
        since_start["tuned"] = _process_age_s()
    since_start["benchmarker_down"] = _process_age_s()
    out = {**result.as_dict(), "since_start_s": since_start}
    if record and not result.cached:
        out["recorded_rows"] = record_result(result, data, hw, dataset.new_run_id())
    default = result.default_latency_ms
    table = Table("rank", Column("config", overflow="fold"), f"{objective} ms", "x default",
                  title=f"{family} {dtype} {json.dumps(problem)} on {hw.gpu}: top {k} of {result.candidates} in "
                        f"{result.wall_s:.1f} s" + (" (cached)" if result.cached else ""))
    for row in result.predicted_rank:
        ms = row["latency_ms"]
        table.add_row(str(row["rank"]), json.dumps(row["config"]), f"{ms:.4f}" if ms else row["status"],
                      f"{default / ms:.2f}" if ms and default else "")
    best = result.best
    table.caption = ((f"best {best['latency_ms']:.4f} ms {json.dumps(best['config'])}" if best["config"] is not None
                      else f"none of the top {k} ran correctly") + "; default "
                     f"{default if default is None else f'{default:.4f}'} ms"
                     + (f"; exhaustive best {result.exhaustive_best_ms:.4f} ms" if result.exhaustive_best_ms else "")
                     + _second_round_note(result.second_round))
    _emit(out, as_json, table)


# options of the Triton families' tuner (tuner/tune.py) that a Helion kernel's has no counterpart of
_TRITON_TUNE_ONLY = ("explore", "exhaustive", "budget_s", "steps", "record", "data")


def _tune_helion(family, shape, dtype, k, objective, predict_only, gpu, model_ref, no_cache, as_json) -> None:
    """``tune`` for a costmodel Helion kernel (tuner/helion_problem.py)."""
    from importlib.util import find_spec

    from click.core import ParameterSource

    from costmodel.helion import families

    fam = families.get(family)
    problem, dtype = fam.check_problem(parse_shape(shape)), fam.check_dtype(dtype)
    ctx = click.get_current_context()
    if given := [n for n in _TRITON_TUNE_ONLY if ctx.get_parameter_source(n) is not ParameterSource.DEFAULT]:
        raise CostModelError(f"--{given[0].replace('_', '-')} is an option of the Triton families' tune, not of "
                             f"{fam.kernel}'s")
    if k is not None and k < 1:
        raise CostModelError("-k must be at least 1")
    if objective not in ("eager", "graph"):
        raise CostModelError(f"--objective {objective}: eager or graph")
    if find_spec("helion") is None:
        raise CostModelError(f"{fam.kernel} needs Helion: pip install 'costmodel[helion]'")
    from tuner import helion_problem
    from tuner.helion import K, CostModelAutotuner

    k = K if k is None else k
    if predict_only:
        out = helion_problem.predict(fam.kernel, problem, dtype, gpu=gpu, model_ref=model_ref, k=k)
        if out["note"]:
            err_console.print(f"note: {out['note']}; the candidates are this Helion's")
        table = Table("rank", Column("knobs other than Helion's default config", overflow="fold"),
                      title=f"{fam.kernel} {dtype} {json.dumps(problem)}: predicted top {k} of {out['candidates']} "
                            f"for {out['gpu']} ({out['wall_s']:.1f} s, nothing measured)")
        for row in out["top"]:
            table.add_row(str(row["rank"]), Text(_unlike(row["config"], out["default_config"])))
        table.caption = Text(f"default: {json.dumps(out['default_config'])}")
        return _emit(out, as_json, table)
    from costmodel import hardware

    hw = hardware.current(hint="tune measures on a GPU; --predict-only ranks without one")
    if gpu and gpu != hw.gpu:
        raise CostModelError(f"--gpu {gpu} but the visible GPU is {hw.gpu}")
    if no_cache:
        os.environ["HELION_SKIP_CACHE"] = "1"  # Helion's own switch: its cache neither read nor written
    with stdout_on_stderr():
        out = helion_problem.tune(fam.kernel, problem, dtype, CostModelAutotuner(model_ref, k=k, objective=objective))
    table = Table("", Column("", overflow="fold"),
                  title=f"{fam.kernel} {dtype} {json.dumps(problem)} on {out['gpu']}: {out['path']}, "
                        f"{out['wall_s']:.1f} s")
    best, default = out["best"]["latency_ms"], out["default_latency_ms"]
    table.add_row("config", Text(out["helion_config"]))
    table.add_row(f"{objective} ms", "-" if best is None else f"{best:.4f}"
                  + ("" if default is None else f" (default {default:.4f}, timed {out['benchmarked']} configs)"))
    if out["fallback"]:
        table.add_row("fallback", out["fallback"])
    _emit(out, as_json, table)


def _unlike(config: dict, default: dict) -> str:
    """``config``'s knobs whose values differ from ``default``'s, as JSON ("(the default)" where none do)."""
    return json.dumps({k: v for k, v in config.items() if default.get(k) != v}) if config != default else "(the default)"


def _second_round_note(second: dict) -> str:
    if not second:  # a cached result from before second rounds
        return ""
    if not second["ran"]:
        return f"; no second round ({second['reason']})"
    best = second["best_ms"]
    return (f"; second round of {second['configs']} ({second['reason']}): best "
            f"{'none ran' if best is None else f'{best:.4f} ms'}")


if __name__ == "__main__":
    main()
