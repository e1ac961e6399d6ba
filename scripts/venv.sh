#!/usr/bin/env bash
# Create (once) and update (when pyproject.toml changes) the project's .venv; sourced by run.sh and test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
stamp=.venv/.costmodel-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[track,test]'
  touch "$stamp"
fi
