#!/usr/bin/env bash
# The Helion tests on this CPU under Helion 1.4.0, the H200's (1.4.0 imports beside torch 2.11, not the CPU
# environment's 2.13), so that a change meets 1.4.0's ConfigSpec before it meets the GPU. It builds once
# .venv-helion140: torch 2.11 from the package index (with its CUDA libraries: about 5 GB), triton 3.6, Helion 1.4.0
# (.whl/ where ../shared/device/wheels.sh put it, else the index), the project's runtime deps. Helion's
# device checks are answered as the H200 answers them (tests/helion_scripts/h200_answers.py): on a CPU, 1.4.0
# offers block_ptr indexing instead, and refuses the recorded configs that use tensor descriptors.
#   bash scripts/helion140_check.sh [pytest args]        (default: tests/test_helion_tune.py)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=.venv-helion140
if [ ! -x $venv/bin/python ]; then
  python3 -m venv $venv
  helion=$(ls .whl/helion-1.4.0-*.whl 2>/dev/null || echo helion==1.4.0)
  $venv/bin/python -m pip install -q torch==2.11.0 triton==3.6.0 "$helion" filecheck==1.0.6 packaging "numpy<2.4" \
    pyarrow xgboost-cpu==3.2.0 click rich pandas scipy psutil pytest
fi
$venv/bin/python -c 'import importlib.metadata as m; print("helion", m.version("helion"), "torch", m.version("torch"))'
PYTHONPATH=.:tests/helion_scripts exec $venv/bin/python -m pytest -p h200_answers -p no:cacheprovider -q "${@:-tests/test_helion_tune.py}"
