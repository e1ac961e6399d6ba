#!/usr/bin/env bash
# The main job on a machine without a GPU: set up .venv if needed, train the H200 model on the shipped data
# (MLflow tracking in its default local store: ./mlflow.db, ./mlruns), evaluate it on its held-out groups
# (plots under out/plots), and rank a 4096^3 matmul's configs with it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
.venv/bin/costmodel kernels
.venv/bin/costmodel train --data data --out out/nvidia-h200
.venv/bin/costmodel evaluate --data data --model out/nvidia-h200 --plots out/plots
.venv/bin/costmodel tune --kernel matmul --shape M=4096,N=4096,K=4096 --predict-only --model out/nvidia-h200
