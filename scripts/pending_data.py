"""A kernel patch's rows, kept on main until the patch lands. Rows collected with a patch applied (a new knob value,
say) belong to a kernel that main does not have yet: in ``data/`` they would fail main's data tests, and a branch
holding them is lost when a session ends without merging it. They wait in ``data/_pending/<name>/``, in the dataset's
layout, which the reader skips (``costmodel.dataset.PENDING``):

    add NAME TAR      file the new shards and manifests of a device call's data.tar (scripts/device_job.sh collect)
    stage NAME DIR    copy them into a copy of the data root (DIR), times kept, so `collect --resume` there goes on
                      from them (device_job.sh does this where PENDING=NAME is set)
    land NAME         move them into data/ once the patch is on main; then `git add data`

    .venv/bin/python scripts/pending_data.py add next-tma-2-hint /tmp/out/data.tar
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from costmodel.dataset import PENDING  # noqa: E402


class Refused(Exception):
    """Bad input: one line on stderr, exit status 2, nothing written."""


def pending_dir(data: Path, name: str) -> Path:
    if not name or "/" in name or name.startswith((".", "_")):
        raise Refused(f"pending name {name!r}: one folder name, not starting with '.' or '_'")
    return data / PENDING / name


def files_under(root: Path) -> list[Path]:
    """Every file under ``root``, relative to it, sorted."""
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def tar_members(tar: tarfile.TarFile) -> dict[PurePosixPath, tarfile.TarInfo]:
    """The tarball's files by their path under ``data/`` (what device_job.sh's collect step writes)."""
    out = {}
    for m in tar.getmembers():
        if m.isdir():
            continue
        path = PurePosixPath(m.name)
        if not m.isfile() or path.is_absolute() or ".." in path.parts or path.parts[:1] != ("data",) \
                or len(path.parts) < 2 or path.parts[1] == PENDING:
            raise Refused(f"{m.name}: not a file under data/ (what device_job.sh's collect step puts in data.tar)")
        out[PurePosixPath(*path.parts[1:])] = m
    if not out:
        raise Refused("the tarball holds no files under data/")
    return out


def add(data: Path, name: str, tar_path: Path) -> dict:
    """File the tarball's files under ``data/_pending/<name>/``: all of them or, on a refusal, none. A file already
    pending with the same bytes is skipped (adding the same tarball twice changes nothing)."""
    dest = pending_dir(data, name)
    try:
        tar = tarfile.open(tar_path)
    except (OSError, tarfile.TarError) as e:
        raise Refused(f"cannot read {tar_path}: {e}") from None
    with tar:
        members = tar_members(tar)
        blobs = {rel: tar.extractfile(m).read() for rel, m in members.items()}
    new = {}
    for rel, blob in blobs.items():
        if (data / rel).exists():
            raise Refused(f"{rel} is already in {data}: this tarball is not only new rows")
        target = dest / rel
        if target.exists():
            if target.read_bytes() != blob:
                raise Refused(f"{target} is pending with other contents")
            continue
        new[target] = blob
    for target, blob in new.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, target)
    return {"pending": str(dest), "added": len(new), "already": len(blobs) - len(new), **counts(dest)}


def counts(dest: Path) -> dict:
    files = files_under(dest) if dest.exists() else []
    return {"shards": sum(p.suffix == ".parquet" for p in files),
            "manifests": sum(p.parts[0] == "_manifests" for p in files)}


def stage(data: Path, name: str, into: Path) -> dict:
    """Copy the pending files (none before a patch's first collect) into ``into`` (a copy of the data root), times
    kept, so that a collect writing there with ``--resume`` skips what they hold and a file newer than a mark made
    after this is what it wrote."""
    src = pending_dir(data, name)
    if not into.is_dir():
        raise Refused(f"no data root at {into}")
    copied = 0
    for rel in files_under(src) if src.is_dir() else []:  # none yet: a patch's first collect
        target = into / rel
        if target.exists():
            if target.read_bytes() != (src / rel).read_bytes():
                raise Refused(f"{target} exists with other contents")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)
        copied += 1
    return {"staged": copied, "into": str(into), **counts(src)}


def land(data: Path, name: str) -> dict:
    """Move the pending files into ``data`` (none where one would overwrite a file there) and drop the folder."""
    src = pending_dir(data, name)
    if not src.is_dir():
        raise Refused(f"nothing pending under {src}")
    files = files_under(src)
    clash = [str(rel) for rel in files if (data / rel).exists()]
    if clash:
        raise Refused(f"{len(clash)} pending files are already in {data}, e.g. {clash[0]}")
    for rel in files:
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(src / rel, data / rel)
    shutil.rmtree(src)
    if (data / PENDING).is_dir() and not any((data / PENDING).iterdir()):
        (data / PENDING).rmdir()
    return {"landed": len(files), "into": str(data)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verb", choices=("add", "stage", "land"))
    ap.add_argument("name", help="the patch's name, e.g. next-tma-2-hint")
    ap.add_argument("path", nargs="?", help="add: the data.tar; stage: the data root copy to stage into")
    ap.add_argument("--data", type=Path, default=Path("data"), help="the data root (default: data)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    a = ap.parse_args(argv)
    try:
        if not a.data.is_dir():
            raise Refused(f"no data root at {a.data}")
        if (a.verb in ("add", "stage")) != (a.path is not None):
            raise Refused(f"{a.verb} takes {'a path' if a.verb != 'land' else 'no path'}")
        out = (add(a.data, a.name, Path(a.path)) if a.verb == "add" else
               stage(a.data, a.name, Path(a.path)) if a.verb == "stage" else land(a.data, a.name))
    except Refused as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(out) if a.json else "  ".join(f"{k} {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
