#!/usr/bin/env bash
# The test command: sets up .venv if needed, then runs the CPU test suite (GPU tests skip without CUDA).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
exec .venv/bin/python -m pytest -q "$@"
