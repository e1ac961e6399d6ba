#!/usr/bin/env bash
# The main job on a machine without a GPU: set up .venv if needed, train the H200 model on the shipped data into
# out/models/nvidia-h200 (the shipped model under costmodel/models/ stays as committed; MLflow logs the run in its
# default local store: ./mlflow.db, ./mlruns), evaluate it on its held-out groups (tables on stderr, plots under
# out/plots), and rank a 4096^3 matmul's configs with it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
mkdir -p out
.venv/bin/costmodel kernels
# train's figures go to out/train.json; its held-out table is the one evaluate prints next (printed once)
.venv/bin/costmodel train --data data --out out/models/nvidia-h200 --json > out/train.json
.venv/bin/costmodel evaluate --data data --model out/models/nvidia-h200 --plots out/plots
.venv/bin/costmodel tune --kernel matmul --shape M=4096,N=4096,K=4096 --predict-only --model out/models/nvidia-h200
