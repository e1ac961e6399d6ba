"""On-disk tuning results, keyed by (GPU, kernel hash, problem, dtype, triton version). The kernel hash is what
compiles (``KernelFamily.kernel_hash``), so a docstring or comment edit in a kernel module keeps the entries.

One small JSON file per key, published by atomic rename: any number of processes may read and write at once;
a reader sees a whole entry or none, and concurrent writers of one key leave one of their whole entries."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from costmodel.dataset import canonical_json


def default_dir() -> Path:
    return Path(os.environ.get("COSTMODEL_CACHE_DIR") or Path.home() / ".cache" / "costmodel" / "tune")


class ResultCache:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else default_dir()

    @staticmethod
    def key(gpu: str, kernel_hash: str, family: str, problem: dict, dtype: str, triton_version: str,
            objective: str = "eager") -> str:
        text = canonical_json({"gpu": gpu, "source": kernel_hash, "family": family, "problem": problem,
                               "dtype": dtype, "triton": triton_version, "objective": objective})
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def get(self, key: str) -> dict | None:
        try:
            return json.loads((self.root / f"{key}.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, entry: dict) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f)
        os.replace(tmp, self.root / f"{key}.json")
