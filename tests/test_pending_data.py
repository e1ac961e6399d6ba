"""scripts/pending_data.py: a kernel patch's rows wait under data/_pending/<name>/, which the reader skips, until the
patch lands. Real H200 shards of the committed data, split between a data root and a device call's tarball."""

import importlib.util
import io
import shutil
import tarfile
from pathlib import Path

import pytest

from costmodel import dataset

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("pending_data", ROOT / "scripts" / "pending_data.py")
pending_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pending_data)

PART = Path("gpu=nvidia-h200") / "kernel=softmax"


@pytest.fixture
def split(data_root, tmp_path):
    """(data root holding the softmax shards of all runs but one, tarball of that run's shards as device_job.sh's
    collect step writes it: paths under data/)."""
    def run(p: Path) -> str:  # part-<date>-<id>-...: the run that wrote the shard
        return "-".join(p.name.split("-")[1:3])

    shards = sorted((data_root / PART).glob("part-*.parquet"))
    new_run = max(map(run, shards))
    root = tmp_path / "data"
    (root / PART).mkdir(parents=True)
    tar_path = tmp_path / "data.tar"
    with tarfile.open(tar_path, "w") as tar:
        for p in shards:
            if run(p) == new_run:
                tar.add(p, arcname=f"data/{PART.as_posix()}/{p.name}")
            else:
                shutil.copy2(p, root / PART / p.name)
    return root, tar_path


def rows(root: Path) -> int:
    return dataset.read(root, ["group_id"]).num_rows


def test_pending_rows_stay_unread_until_staged_or_landed(split, tmp_path):
    root, tar_path = split
    before = rows(root)
    assert pending_data.main(["add", "p1", str(tar_path), "--data", str(root)]) == 0
    assert list((root / "_pending" / "p1" / PART).glob("part-*.parquet"))
    assert rows(root) == before, "the reader read a pending shard"
    assert not any("_pending" in Path(f).relative_to(root).parts for f in dataset.dataset(root).files)

    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    shutil.rmtree(copy / "_pending")
    assert pending_data.main(["stage", "p0", str(copy), "--data", str(root)]) == 0  # a patch's first collect
    assert rows(copy) == before
    assert pending_data.main(["stage", "p1", str(copy), "--data", str(root)]) == 0
    staged = rows(copy)
    assert staged > before, "staging added no rows to the copy"
    assert pending_data.main(["stage", "p1", str(copy), "--data", str(root)]) == 0  # again: nothing more
    assert rows(copy) == staged

    assert pending_data.main(["land", "p1", "--data", str(root)]) == 0
    assert not (root / "_pending").exists()
    assert rows(root) == staged


def test_adding_the_same_tarball_twice_adds_nothing(split, capsys):
    root, tar_path = split
    assert pending_data.main(["add", "p1", str(tar_path), "--data", str(root), "--json"]) == 0
    first = capsys.readouterr().out
    assert pending_data.main(["add", "p1", str(tar_path), "--data", str(root), "--json"]) == 0
    again = capsys.readouterr().out
    assert '"added": 0' in again and '"added": 0' not in first


def _tar_with(tmp_path: Path, name: str, blob: bytes) -> Path:
    path = tmp_path / f"{abs(hash(name))}.tar"
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
    return path


@pytest.mark.parametrize("member", ["gpu=nvidia-h200/kernel=softmax/part-x.parquet", "data/../evil.parquet",
                                    "/data/gpu=x/part-x.parquet", "data/_pending/q/part-x.parquet"])
def test_a_tarball_with_a_file_outside_data_is_refused_whole(split, tmp_path, capsys, member):
    root, _ = split
    path = _tar_with(tmp_path, member, b"x")
    assert pending_data.main(["add", "p1", str(path), "--data", str(root)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert not (root / "_pending").exists()


def test_rows_already_in_data_are_refused_and_landing_never_overwrites(split, tmp_path, capsys):
    root, tar_path = split
    shard = next((root / PART).glob("part-*.parquet"))
    path = _tar_with(tmp_path, f"data/{PART.as_posix()}/{shard.name}", shard.read_bytes())
    assert pending_data.main(["add", "p1", str(path), "--data", str(root)]) == 2
    assert "already in" in capsys.readouterr().err

    assert pending_data.main(["add", "p2", str(tar_path), "--data", str(root)]) == 0
    pending = next((root / "_pending" / "p2" / PART).glob("part-*.parquet"))
    shutil.copy2(pending, root / PART / pending.name)  # as if landed by hand before
    assert pending_data.main(["land", "p2", "--data", str(root)]) == 2
    assert pending.exists(), "a refused landing moved files"


@pytest.mark.parametrize("name", ["", "_x", ".x", "a/b"])
def test_a_name_that_is_not_one_plain_folder_is_refused(split, name):
    root, tar_path = split
    assert pending_data.main(["add", name, str(tar_path), "--data", str(root)]) == 2
