#!/usr/bin/env bash
# One call on the GPU host (no package index): install carried wheels, then run the named steps, writing
# results under $OUT. Steps: tests bench collect repeat smoke tune split sweep. Data collected goes to $OUT/data.tar: collect
# starts from a copy of data/ with --resume, so no committed (group, config) pair is measured again; untar it
# and `cp -rn data/. <checkout>/data/` to add only the new shards and manifests.
#   DEADLINE=580 bash scripts/device_job.sh "tests bench collect" [collect args...]
#   TUNE_ARGS="--only 4,6,9 --helion" bash scripts/device_job.sh tune   (rows in $OUT/bench_tune.jsonl)
# (DEADLINE: seconds after start by which everything, the data tarball included, must be written)
# The tune step needs xgboost and Helion carried: bash ../shared/device/wheels.sh helion==1.4.0 filecheck==1.0.6
set -uo pipefail
export PYTHONUNBUFFERED=1
steps=$1; shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/gpu.txt
for step in $steps; do
  echo "=== $step $(date +%T)"
  case $step in
    tests) COSTMODEL_TEST_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu ${TEST_ARGS:-} tests/test_kernels_gpu.py 2>&1 | tail -25 ;;
    bench) timeout 240 python3 scripts/bench_kernels.py --out $OUT/bench_kernels.json 2>&1 | tail -40 ;;
    collect) left=$(( ${DEADLINE:-580} - SECONDS - 25 )); echo "collect may take ${left}s"
             rm -rf /tmp/data && cp -r data /tmp/data
             timeout $left python3 -m costmodel collect --out /tmp/data --resume --json --time-budget $(( left - 45 )) "$@" \
               > $OUT/collect.json 2> /tmp/collect.err;
             echo "collect rc $?"; tail -c 1500 /tmp/collect.err; tail -c 600 $OUT/collect.json
             (cd /tmp && tar cf $OUT/data.tar data) ;;
    smoke) timeout 120 python3 -m costmodel tune --kernel rmsnorm --shape M=4096,N=4096 --no-cache --json > $OUT/smoke.json \
             || { echo "smoke tune failed"; exit 1; }; tail -c 400 $OUT/smoke.json ;;
    tune) timeout $(( ${DEADLINE:-580} - SECONDS )) python3 scripts/bench_tune.py --out $OUT/bench_tune.jsonl ${TUNE_ARGS:-} 2>&1 \
            | grep -v '^{' | tail -60 ;;
    sweep) timeout ${SWEEP_TIMEOUT:-300} python3 scripts/sweep_problem.py --out $OUT/sweep.json 2>&1 | grep -v '^{' | tail -20 ;;
    split) timeout 240 python3 scripts/bench_split_tail.py --out $OUT/split_tail.json 2>&1 | tail -c 3000 ;;
    repeat) timeout 100 python3 scripts/bench_repeat.py --data /tmp/data --out $OUT/repeat.json 2>&1 | tail -3 ;;
  esac
done
echo "=== end $(date +%T)"
