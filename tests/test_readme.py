"""The README's Python examples run as they are, on the CPU under Triton's interpreter (as a new user would try
them), and its relative links resolve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", README, re.S)


def test_readme_has_the_python_examples():
    assert len(EXAMPLES) == 2
    assert "tune(" in EXAMPLES[0] and "costmodel_autotune(" in EXAMPLES[1]


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_readme_example_runs_on_the_cpu(index, tmp_path):
    script = tmp_path / f"example{index}.py"  # a file: Triton reads a kernel's source, and the benchmarker re-runs it
    script.write_text(EXAMPLES[index])
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO), "COSTMODEL_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("best ") and not r.stdout.startswith("best None"), r.stdout


def test_readme_links_resolve():
    prose = re.sub(r"```.*?```", "", README, flags=re.S)
    links = re.findall(r"\]\(([^)#:]+)\)", prose)
    assert "docs/DESIGN.md" in links
    for link in links:
        assert (REPO / link).exists(), link
