#!/usr/bin/env bash
# A Dask cluster for `costmodel collect --dask` and `train --dask`: one scheduler, and on each GPU host one worker
# process per GPU that sees only its GPU (CUDA_VISIBLE_DEVICES) and offers one GPU resource (--resources GPU=1).
#   scripts/dask_cluster.sh scheduler [PORT]            start the scheduler here (default port 8786)
#   scripts/dask_cluster.sh workers ADDRESS [GPU,...]   start workers here for these GPUs (default: every GPU)
#   scripts/dask_cluster.sh local [GPU,...]             both on this host; prints the scheduler's address
#   scripts/dask_cluster.sh stop                        stop what this script started on this host
# Everything runs in the background; logs and pid files go to ${DASK_CLUSTER_DIR:-/tmp/costmodel-dask}. Run it
# from a checkout (it puts the checkout on PYTHONPATH) or where costmodel is installed, with dask[distributed].
# Each worker has a nanny, which restarts it if it dies; its tasks go to the other workers meanwhile.
set -euo pipefail
dir=${DASK_CLUSTER_DIR:-/tmp/costmodel-dask}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$root
py=${PYTHON:-python3}
mkdir -p "$dir"

gpus_here() { nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -; }

start_scheduler() {
  local port=${1:-8786}
  nohup "$py" -m distributed.cli.dask_scheduler --port "$port" --dashboard-address :0 \
    > "$dir/scheduler.log" 2>&1 &
  echo $! > "$dir/scheduler.pid"
  for _ in $(seq 100); do grep -q "Scheduler at:" "$dir/scheduler.log" && break; sleep 0.2; done
  grep -o "tcp://[^ ]*" "$dir/scheduler.log" | head -1
}

start_workers() {
  local address=$1 gpus=${2:-$(gpus_here)} n cores threads
  IFS=, read -ra ids <<< "$gpus"
  n=${#ids[@]}
  cores=$(nproc)
  threads=$(( cores / n > 0 ? cores / n : 1 ))  # xgboost.dask boosts with each worker's threads (train --dask)
  for g in "${ids[@]}"; do
    # --memory-limit 0: collection holds little host memory, and some hosts' MemTotal starts low and grows
    CUDA_VISIBLE_DEVICES=$g nohup "$py" -m distributed.cli.dask_worker "$address" --nworkers 1 --nthreads "$threads" \
      --resources GPU=1 --memory-limit 0 --name "$(hostname)-gpu$g" --local-directory "$dir/gpu$g" \
      > "$dir/worker-gpu$g.log" 2>&1 &
    echo $! > "$dir/worker-gpu$g.pid"
  done
  "$py" - "$address" "$n" <<'PY'
import sys
from distributed import Client
with Client(sys.argv[1], timeout=60) as c:
    c.wait_for_workers(int(sys.argv[2]), timeout=120)
PY
}

case ${1:-} in
  scheduler) start_scheduler "${2:-}" ;;
  workers) [ $# -ge 2 ] || { echo "usage: $0 workers ADDRESS [GPU,...]" >&2; exit 2; }
           start_workers "$2" "${3:-}" ;;
  local) address=$(start_scheduler) && start_workers "$address" "${2:-}" && echo "$address" ;;
  stop) for f in "$dir"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; rm -f "$f"; done; true ;;
  *) sed -n '2,10p' "$0" >&2; exit 2 ;;
esac
