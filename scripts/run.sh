#!/usr/bin/env bash
# The main job: sets up .venv if needed, then lists the kernel families.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
.venv/bin/costmodel kernels
