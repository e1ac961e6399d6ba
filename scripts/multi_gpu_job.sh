#!/usr/bin/env bash
# One call on a GPU host (issue 13; two GPUs or more for the scaling runs): one collection plan run several ways, each into a fresh
# dataset root with a cold Triton cache, then scripts/check_collect_runs.py over them. Results go under $OUT:
# check.json (figures and integrity checks), runs.tar (manifests, logs, and the Parquet of every run), kills.jsonl.
#   bash scripts/multi_gpu_job.sh "gpus1 gpus2 gpuskill dask daskkill train"
# Steps: single (plain collect, no --gpus), gpus1 / gpus2 (collect --gpus N), gpuskill (--gpus all, the worker of the
# last GPU SIGKILLed after KILL_AFTER s), dask / daskkill (the same plan on a local Dask cluster from
# scripts/dask_cluster.sh, one worker per GPU; daskkill kills the last GPU's worker), dask1 (a cluster of one worker,
# on the first GPU: the Dask run's one-GPU baseline), train
# (scripts/compare_dask_training.py on the dask step's cluster). Needs xgboost, dask and distributed as wheels in .whl/.
set -uo pipefail
export PYTHONUNBUFFERED=1
steps=$1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || exit 1
BUDGET=${BUDGET:-120}
KILL_BUDGET=${KILL_BUDGET:-80}  # the fault runs' --time-budget
KILL_AFTER=${KILL_AFTER:-40}
PLAN=${PLAN:---kernel all --groups 600 --configs-per-group 100 --exhaustive-share 0 --seed 13}
runs=/tmp/runs; mkdir -p $runs
status=0
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu,power.draw --format=csv | tee $runs/gpus.txt
echo "cores $(nproc)"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
last=${gpus##*,}

fresh() {  # NAME: an empty dataset root and a cold Triton cache for one run
  rm -rf $runs/$1 /tmp/triton-$1; export TRITON_CACHE_DIR=/tmp/triton-$1
}
collect() {  # NAME [collect args]
  local name=$1; shift
  # SIGINT past the budget and a grace: the collector publishes what it measured and writes its manifest
  timeout -k 30 -s INT $(( BUDGET + 150 )) python3 -m costmodel collect --out $runs/$name $PLAN --time-budget $BUDGET \
    --json "$@" > $runs/$name.json 2> $runs/$name.err
  local rc=$?; echo "$name rc $rc"; tail -c 300 $runs/$name.err | tr '\r' '\n' | tail -2; return $rc
}
cluster() {  # NAME [GPUS]: start a local Dask cluster over every GPU (TRITON_CACHE_DIR as set now); prints its address
  DASK_CLUSTER_DIR=/tmp/dask-$1 bash scripts/dask_cluster.sh local ${2:-$gpus}
}
stop_cluster() { DASK_CLUSTER_DIR=/tmp/dask-$1 bash scripts/dask_cluster.sh stop; sleep 2; }

for step in $steps; do
  echo "=== $step $(date +%T)"
  case $step in
    single) fresh single; collect single || status=1 ;;
    gpus1) fresh gpus1; collect gpus1 --gpus 1 || status=1 ;;
    gpus2) fresh gpus2; collect gpus2 --gpus 2 || status=1 ;;
    gpuskill)
      fresh gpuskill
      BUDGET=$KILL_BUDGET collect gpuskill --gpus all & pid=$!
      sleep 1; parent=$(pgrep -f -n "costmodel collect --out $runs/gpuskill")
      python3 scripts/kill_worker.py --parent "$parent" --gpu $last --after $KILL_AFTER | tee -a $runs/kills.jsonl
      wait $pid || status=1 ;;
    dask|daskkill|dask1)
      fresh $step
      address=$(cluster $step $([ $step = dask1 ] && echo ${gpus%%,*})) || { echo "cluster failed"; status=1; continue; }
      echo "cluster $address"
      if [ $step = daskkill ]; then
        python3 scripts/kill_worker.py --parent "$(cat /tmp/dask-$step/worker-gpu$last.pid)" --gpu $last \
          --after $KILL_AFTER | tee -a $runs/kills.jsonl &
      fi
      if [ $step = daskkill ]; then BUDGET=$KILL_BUDGET collect $step --dask "$address" || status=1
      else collect $step --dask "$address" || status=1; fi
      wait
      if [ $step = dask ] && [[ " $steps " == *" train "* ]]; then
        python3 scripts/compare_dask_training.py --dask "$address" --out $runs/train.json 2>&1 | tail -30 || status=1
      fi
      stop_cluster $step ;;
    train) ;;  # runs on the cluster of the dask step
  esac
done
echo "=== check $(date +%T)"
names=(); for s in $steps; do [ -d $runs/$s ] && names+=("$s=$runs/$s"); done
python3 scripts/check_collect_runs.py "${names[@]}" ${BASELINE:+--baseline $BASELINE} --out $OUT/check.json || status=1
cp $runs/train.json $OUT/ 2>/dev/null
cp /tmp/dask-*/*.log $runs/ 2>/dev/null
(cd /tmp && tar cf $OUT/runs.tar runs)
echo "=== end $(date +%T) status $status"
exit $status
