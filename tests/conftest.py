import os

# Kernels run on CPU tensors through Triton's interpreter in CI; must be set before kernels are decorated.
if not os.environ.get("COSTMODEL_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest


def has_cuda() -> bool:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return False
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run with COSTMODEL_TEST_GPU=1 on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _shipped_for_this_gpu(helion: bool) -> str:
    from costmodel import hardware, model

    gpu = hardware.current().gpu
    pattern = f"*/helion/{model.META_FILE}" if helion else f"*/{model.META_FILE}"
    shipped = sorted({m["gpu"] for m in model.shipped(pattern)})
    if gpu not in shipped:
        pytest.skip(f"no {'Helion ' if helion else ''}model ships for {gpu} (only for {', '.join(shipped)})")
    return gpu


@pytest.fixture
def shipped_gpu():
    """The visible GPU's slug; skips where no Triton model ships for it (the tuner refuses there, as the CPU tests
    check): a GPU test of the model's path fails on such a card for a reason that is no bug (an H100, session 43)."""
    return _shipped_for_this_gpu(helion=False)


@pytest.fixture
def shipped_helion_gpu():
    """The visible GPU's slug; skips where no Helion model ships for it. There the tuner hands over to Helion's own
    search (the CPU tests check the hand-over), and a GPU test of the model's path would time that whole search: over
    300 s on an H100 (session 53)."""
    return _shipped_for_this_gpu(helion=True)


# --- fixtures of the model tests (test_model.py, test_tracking.py) ------------------------------------------

def invoke_cli(*args: str) -> tuple[int, str, str]:
    """Run the costmodel CLI in-process: (exit code, stdout, stderr)."""
    from click.testing import CliRunner

    from costmodel.cli import main

    r = CliRunner().invoke(main, list(args))
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="session")
def cli():
    return invoke_cli


# groups per family in the model tests' slice: enough to hold some out, few enough to train in seconds
MODEL_TEST_GROUPS = {"exhaustive": 4, "sampled": 12}


@pytest.fixture(scope="session")
def data_root():
    """The committed H200 data (or COSTMODEL_TEST_DATA's)."""
    from pathlib import Path

    return Path(os.environ.get("COSTMODEL_TEST_DATA", Path(__file__).resolve().parents[1] / "data"))


@pytest.fixture(scope="session")
def slice_root(tmp_path_factory, data_root):
    """A temporary dataset holding the real measurements of a few groups per family (MODEL_TEST_GROUPS, first by
    group id) from data/ (or COSTMODEL_TEST_DATA), with the collector's manifests. Skips while there are no
    measurements."""
    import itertools
    import shutil

    import pyarrow.compute as pc

    from costmodel import dataset, evaluation, model
    from costmodel.errors import CostModelError

    data = data_root
    try:
        table, _ = model.training_table(data)
    except CostModelError as e:
        pytest.skip(f"no measurements to train on under {data} yet ({e})")
    info = evaluation.group_info(table).select(["group_id", "kernel", "exhaustive"]).to_pylist()
    info.sort(key=lambda r: (r["kernel"], bool(r["exhaustive"]), r["group_id"]))
    picked = []
    for (_, exhaustive), rows in itertools.groupby(info, key=lambda r: (r["kernel"], bool(r["exhaustive"]))):
        picked += [r["group_id"] for r in list(rows)[:MODEL_TEST_GROUPS["exhaustive" if exhaustive else "sampled"]]]
    full = dataset.read(data, filter=pc.field("group_id").isin(picked))
    root = tmp_path_factory.mktemp("slice") / "data"
    for gpu, kernel in sorted(set(zip(full["gpu"].to_pylist(), full["kernel"].to_pylist()))):
        part = full.filter(pc.and_(pc.equal(full["gpu"], gpu), pc.equal(full["kernel"], kernel)))
        dataset.write_shard(root, gpu, kernel, "slice", part.drop_columns(list(dataset.PARTITIONS)).to_pylist())
    if (data / "_manifests").is_dir():
        shutil.copytree(data / "_manifests", root / "_manifests")
    return root
