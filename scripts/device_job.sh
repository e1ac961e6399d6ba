#!/usr/bin/env bash
# One call on the GPU host (no package index): install carried wheels, then run the named steps, writing
# results under $OUT. Steps: tests helion_pool bench launch collect repeat eager smoke startup tune helion_race
# helion_retime helion_bg bg_probe gap ncu ws cluster stride loads split sweep. What collect writes goes to $OUT/data.tar:
# collect starts from a copy of data/ with --resume, so no committed (group, config) pair is measured again; untar it
# and `cp -rn data/. <checkout>/data/` to add only the new shards and manifests (a kernel patch's rows:
# PENDING=NAME, and `scripts/pending_data.py add NAME data.tar` files them under data/_pending/NAME instead).
# COLLECT_PLAN=FILE runs several collects in turn, one a line (SECONDS ARGS...), e.g. one per family; their JSON
# objects follow each other in $OUT/collect.json.
#   DEADLINE=580 bash scripts/device_job.sh "tests bench collect" [collect args...]
#   TUNE_ARGS="--only 4,6,9 --helion" bash scripts/device_job.sh tune   (rows in $OUT/bench_tune.jsonl)
#   HRACE_ARGS="--only 3,7 --full 1" bash scripts/device_job.sh helion_race   (rows in $OUT/bench_helion.jsonl)
#   HRETIME_ARGS="--retime scripts/results/ROWS.jsonl [--full 2]" bash scripts/device_job.sh helion_retime   (raced rows'
#   picks timed again, no tunes but --full's; rows in $OUT/bench_helion_retimed.jsonl; HRETIME_PLAN=FILE: one such run
#   a line, SECONDS ARGS..., rows in $OUT/bench_helion_retimed.<line>.jsonl)
#   HBG_ARGS="--retime ROWS.jsonl --only 3 --full 1 --timeout 1500" bash scripts/device_job.sh helion_bg   (the same,
#   left running across calls of a warm machine: call again until its rows are in $OUT/bench_helion_bg.jsonl)
#   cat scripts/results/bench_matmul_gap-h200-2026-12-01-s{9,10,11,13}.jsonl > /tmp/gap.jsonl; \
#   GAP_ARGS="--no-sweep --previous /tmp/gap.jsonl --tune-k 8" bash scripts/device_job.sh gap   (issue 17's shapes in
#   one call: each one's latest whole-space best against torch.matmul, a cold tune raced against it)
# (DEADLINE: seconds after start by which everything, the data tarball included, must be written)
# tune runs bench_tune.py until the deadline, or TUNE_TIMEOUT seconds; gap bench_matmul_gap.py (GAP_ARGS,
# GAP_TIMEOUT); ncu, after gap, ncu_matmul.py on its rows (NCU_ARGS, NCU_TIMEOUT).
# tests runs the whole GPU suite (`-m gpu` over tests/; TEST_ARGS adds pytest arguments, TEST_K a -k expression with
# spaces, e.g. TEST_K="autotuner_fn or latencies"; TESTS_TIMEOUT caps it, default 420 s), its full output in $OUT/gpu_tests.txt and $OUT/gpu_tests.xml (JUnit).
# Every step runs even when an earlier one failed; the job's exit status is the first failed step's (a pipeline's
# status is its first failing command's: pipefail), 0 when every step passed.
# The tune and helion_race steps need xgboost and Helion carried: bash ../shared/device/wheels.sh helion==1.4.0 filecheck==1.0.6
set -uo pipefail
export PYTHONUNBUFFERED=1
steps=$1; shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/gpu.txt

left() { echo $(( ${DEADLINE:-580} - SECONDS - ${1:-0} )); }  # seconds to the deadline, less a margin
at_most() { local l; l=$(left "$2"); echo $(( $1 < l ? $1 : l )); }
no_json() { grep -v '^{'; [ $? -le 1 ]; }  # drop JSON rows (grep finding no other line is no failure)

# pytest stopped by its time limit with SIGINT prints where it stood and the summary of what ran (killed with TERM it
# printed nothing: session 11, call 5); KILL follows 15 s later
step_tests() {
  COSTMODEL_TEST_GPU=1 timeout -s INT -k 15 $(at_most ${TESTS_TIMEOUT:-420} 30) python3 -m pytest -q -p no:cacheprovider \
    -m gpu --junitxml=$OUT/gpu_tests.xml ${TEST_ARGS:-} ${TEST_K:+-k "$TEST_K"} tests/ 2>&1 | tee $OUT/gpu_tests.txt | tail -40
}
step_helion_pool() {  # issue 18: the Helion compile pool's GPU test (HPOOL_TIMEOUT), its compile processes' stacks
  # every HPOOL_STACKS_S seconds, all in $OUT/helion_pool.txt
  COSTMODEL_TEST_GPU=1 COSTMODEL_POOL_STACKS_S=${HPOOL_STACKS_S:-60} \
    timeout -s INT -k 15 $(at_most ${HPOOL_TIMEOUT:-240} 30) python3 -m pytest -p no:cacheprovider -s --full-trace -m gpu \
    -k compiles_in_the_pool_on_the_gpu tests/test_helion_collect.py 2>&1 | tee $OUT/helion_pool.txt | tail -40
}
step_bench() {
  timeout $(at_most ${BENCH_TIMEOUT:-240} 15) python3 scripts/bench_kernels.py --out $OUT/bench_kernels.json 2>&1 \
    | tee $OUT/bench_kernels.out | tail -40
}
step_launch() { timeout $(at_most 300 15) python3 scripts/bench_launch.py --out $OUT/bench_launch.json 2>&1 | tail -40; }
collect_one() {  # collect_one SECONDS ARGS...: one collect on /tmp/data, its JSON object appended to $OUT/collect.json
  local t=$1 rc; shift
  echo "collect $* may take ${t}s"
  timeout $t python3 -m costmodel collect --out /tmp/data --resume --json --time-budget $(( t - (t < 180 ? t / 4 : 45) )) \
    "$@" < /dev/null >> $OUT/collect.json 2> /tmp/collect.err
  rc=$?
  echo "collect rc $rc"; tail -c 1500 /tmp/collect.err; tail -c 600 $OUT/collect.json
  return $rc
}
step_collect() {  # with COLLECT_PLAN (a file, one collect a line: SECONDS ARGS...) each line in turn; else "$@"
  local rc=0 secs args
  # times kept, so that only what this call writes goes into the tarball (data/ alone is near $OUT's 16 MiB a file)
  # PENDING=NAME: a patch's rows waiting under data/_pending/NAME join the copy first, so the collect goes on from them
  rm -rf /tmp/data && cp -rp data /tmp/data && rm -rf /tmp/data/_pending || return
  if [ -n "${PENDING:-}" ]; then python3 scripts/pending_data.py stage "$PENDING" /tmp/data || return; fi
  touch /tmp/data.mark || return
  if [ -n "${COLLECT_PLAN:-}" ]; then
    while read -r secs args; do
      [ -n "$secs" ] && [ "$(left 60)" -gt 0 ] || continue
      read -r -a args <<< "$args"
      collect_one $(at_most $secs 25) "${args[@]}" || rc=$?
    done < "$COLLECT_PLAN"
  else
    collect_one $(left 25) "$@" || rc=$?
  fi
  (cd /tmp && find data -type f -newer data.mark | tar cf $OUT/data.tar -T -) || return
  return $rc
}
step_smoke() {
  timeout 120 python3 -m costmodel tune --kernel rmsnorm --shape M=4096,N=4096 --no-cache --json > $OUT/smoke.json \
    || { echo "smoke tune failed"; return 1; }
  tail -c 400 $OUT/smoke.json
}
step_tune() {
  timeout $(at_most ${TUNE_TIMEOUT:-100000} 0) python3 scripts/bench_tune.py --out $OUT/bench_tune.jsonl ${TUNE_ARGS:-} 2>&1 | no_json | tail -60
}
step_helion_race() {  # issue 18: bench_helion.py (HRACE_ARGS, HRACE_TIMEOUT), rows in $OUT/bench_helion.jsonl, then their figures
  local rc
  timeout $(at_most ${HRACE_TIMEOUT:-100000} 15) python3 scripts/bench_helion.py --out $OUT/bench_helion.jsonl \
    ${HRACE_ARGS:-} 2>&1 | tail -80
  rc=$?
  python3 scripts/bench_helion.py --summarise $OUT/bench_helion.jsonl 2>&1 | tail -c 4000
  return $rc
}
step_helion_retime() {  # issue 18: bench_helion.py --retime (HRETIME_ARGS, HRETIME_TIMEOUT); with HRETIME_PLAN (a file,
  # one run a line: SECONDS ARGS..., e.g. one tuner recipe a line) each line in turn, its rows in
  # $OUT/bench_helion_retimed.<line>.jsonl, so several recipes race on the same problems in one call
  local rc=0 secs args n=0
  if [ -z "${HRETIME_PLAN:-}" ]; then
    retime_one $(at_most ${HRETIME_TIMEOUT:-100000} 15) $OUT/bench_helion_retimed.jsonl ${HRETIME_ARGS:-}
    return
  fi
  while read -r secs args; do
    [ -n "$secs" ] && [ "${secs:0:1}" != "#" ] || continue
    n=$((n + 1))
    [ "$(left 30)" -gt 0 ] || { echo "HRETIME_PLAN line $n: no time left"; continue; }
    read -r -a args <<< "$args"
    retime_one $(at_most $secs 15) $OUT/bench_helion_retimed.$n.jsonl "${args[@]}" || rc=$?
  done < "$HRETIME_PLAN"
  return $rc
}
retime_one() {  # SECONDS OUT ARGS...: one bench_helion.py run, then its rows' figures
  local secs=$1 out=$2 rc; shift 2
  echo "=== helion_retime $* (at most $secs s)"
  timeout $secs python3 scripts/bench_helion.py --out $out "$@" 2>&1 | tail -60
  rc=$?
  python3 scripts/bench_helion.py --summarise $out 2>&1 | tail -c 3000
  return $rc
}
step_helion_bg() {  # issue 18: bench_helion.py (HBG_ARGS, e.g. "--retime ROWS --only 3 --full 1 --timeout 1500") left
  # running in its own session, its rows and log under .bg/ (ignored by git, so a warm machine keeps it between
  # calls), for a search longer than a call (Helion full effort took 411 s on one problem and was still searching at
  # 520 and 530 s on two others: session 28). The first call starts it; this call and each later one wait for it up to
  # the deadline, then copy its rows and log to $OUT. Whether a warm machine keeps a process from one call to the next
  # was not known when this was written: a later call that finds it gone without a row says so.
  local dir=.bg pid
  if [ -e $dir/pid ] && [ "$(cat $dir/args)" != "${HBG_ARGS:-}" ]; then  # an earlier call's job of other arguments
    if kill -0 $(cat $dir/pid) 2>/dev/null; then
      echo "still running from an earlier call: $(cat $dir/args)"; return 1
    fi
    rm -rf $dir
  fi
  if [ ! -e $dir/pid ]; then
    rm -rf $dir && mkdir -p $dir || return
    [ ! -d /tmp/site ] || cp -r /tmp/site $dir/site || return  # its own copy: each call installs /tmp/site anew
    PYTHONPATH=$PWD/$dir/site:$PWD setsid nohup python3 scripts/bench_helion.py --out $dir/rows.jsonl ${HBG_ARGS:-} \
      > $dir/log.txt 2>&1 < /dev/null &
    echo $! > $dir/pid; echo "${HBG_ARGS:-}" > $dir/args
    echo "started: bench_helion.py --out $dir/rows.jsonl ${HBG_ARGS:-} (pid $(cat $dir/pid))"
  else
    echo "found from an earlier call: pid $(cat $dir/pid)," \
      "$(kill -0 $(cat $dir/pid) 2>/dev/null && echo running || echo ended)"
  fi
  pid=$(cat $dir/pid)
  while kill -0 $pid 2>/dev/null && [ "$(left 10)" -gt 0 ]; do sleep 5; done
  tail -c 1000000 $dir/log.txt > $OUT/bench_helion_bg.log 2>/dev/null
  [ ! -s $dir/rows.jsonl ] || cp $dir/rows.jsonl $OUT/bench_helion_bg.jsonl
  if kill -0 $pid 2>/dev/null; then
    echo "still running at the deadline: call this step again on the warm machine"; return 0
  fi
  [ -s $dir/rows.jsonl ] || { echo "ended without a row (its log: $OUT/bench_helion_bg.log)"; return 1; }
  python3 scripts/bench_helion.py --summarise $dir/rows.jsonl 2>&1 | tail -c 3000
}
step_bg_probe() {  # whether a warm machine keeps a process from one call to the next (helion_bg counts on it): the
  # first call leaves a sleeper running in its own session (pid in .bg-probe, git-ignored), a later call says whether
  # it still runs
  if [ -e .bg-probe ]; then
    if kill -0 "$(cat .bg-probe)" 2>/dev/null; then echo "bg probe: the earlier call's process still runs"
    else echo "bg probe: the earlier call's process is gone"; return 1; fi
  else
    setsid nohup sleep ${BG_PROBE_S:-1800} > /dev/null 2>&1 < /dev/null &
    echo $! > .bg-probe
    echo "bg probe: started pid $(cat .bg-probe); call bg_probe again on the warm machine"
  fi
}
step_gap() {
  timeout $(at_most ${GAP_TIMEOUT:-100000} 15) python3 scripts/bench_matmul_gap.py --out $OUT/bench_matmul_gap.jsonl \
    ${GAP_ARGS:-} 2>&1 | tail -40
}
step_ncu() {  # after gap: Nsight Compute on its best configs and on cuBLAS
  timeout $(at_most ${NCU_TIMEOUT:-100000} 15) python3 scripts/ncu_matmul.py --rows $OUT/bench_matmul_gap.jsonl \
    --out $OUT/ncu_matmul.json ${NCU_ARGS:-} 2>&1 | tail -30
}
step_ws() {  # issue 17: warp-specialised matmuls with device descriptors (a hang ends only this step); the family's
  # best of each shape from session 9's gap rows and from this call's (after a gap step), the later row winning
  cat scripts/results/bench_matmul_gap-h200-2026-12-01-s9.jsonl $OUT/bench_matmul_gap.jsonl 2>/dev/null > /tmp/previous.jsonl
  timeout $(at_most ${WS_TIMEOUT:-240} 15) python3 scripts/experiments/ws_probe.py --out $OUT/ws_probe.jsonl \
    --previous /tmp/previous.jsonl 2>&1 | tail -40
}
step_cluster() {  # issue 17: the family's best configs of the large shapes at 2-CTA clusters (num_ctas 2) against one
  # CTA and torch.matmul (CLUSTER_TIMEOUT); a hang ends only this step
  cat scripts/results/bench_matmul_gap-h200-2026-12-01-s{9,10,11,13}.jsonl > /tmp/gap_previous.jsonl
  timeout $(at_most ${CLUSTER_TIMEOUT:-240} 15) python3 scripts/experiments/cluster_probe.py \
    --previous /tmp/gap_previous.jsonl --out $OUT/cluster_probe.jsonl 2>&1 | tail -40
}
step_stride() {  # issue 17: the family's best configs with rows 128-byte aligned (padded views) against the natural
  # strides, torch.matmul and the copy a padding launcher would pay (STRIDE_TIMEOUT, STRIDE_ARGS)
  cat scripts/results/bench_matmul_gap-h200-2026-12-01-s{9,10,11,13}.jsonl > /tmp/gap_previous.jsonl
  timeout $(at_most ${STRIDE_TIMEOUT:-240} 15) python3 scripts/experiments/stride_probe.py \
    --previous /tmp/gap_previous.jsonl --out $OUT/stride_probe.jsonl ${STRIDE_ARGS:-} 2>&1 | tail -40
}
step_loads() {  # issue 17: the best TMA configs of misaligned shapes with A, B and C each through TMA, pointers or
  # pointers told how far apart rows start, against the family's kernel and torch.matmul (LOADS_TIMEOUT, LOADS_ARGS)
  cat scripts/results/bench_matmul_gap-h200-2026-12-01-s{9,10,11,13}.jsonl > /tmp/gap_previous.jsonl
  timeout $(at_most ${LOADS_TIMEOUT:-240} 15) python3 scripts/experiments/load_probe.py \
    --previous /tmp/gap_previous.jsonl --out $OUT/load_probe.jsonl ${LOADS_ARGS:-} 2>&1 | tail -40
}
step_startup() {  # issue 16: where a cold `costmodel tune` command's wall goes (since_start_s), a new process a shape
  local shape
  for shape in "matmul M=2000,N=3000,K=1500 float16" "rmsnorm M=8192,N=5120 bfloat16" "attention B=4,H=8,S=700,D=64,CAUSAL=1 float16"; do
    set -- $shape
    local t0=$EPOCHREALTIME
    timeout 120 python3 -m costmodel tune --kernel $1 --shape $2 --dtype $3 --no-cache --json > /tmp/startup.json \
      || echo "tune $shape failed"
    python3 -c "import json,sys; r=json.load(open('/tmp/startup.json')); print(json.dumps({'shape': sys.argv[1], \
'command_s': float(sys.argv[2]), 'wall_s': r.get('wall_s'), 'phases_s': r.get('phases_s'), \
'since_start_s': r.get('since_start_s')}))" "$shape" "$(python3 -c "print($EPOCHREALTIME - $t0)")" | tee -a $OUT/startup.jsonl
  done
}
step_sweep() { timeout ${SWEEP_TIMEOUT:-300} python3 scripts/sweep_problem.py --out $OUT/sweep.json 2>&1 | no_json | tail -20; }
step_split() {
  timeout 240 python3 scripts/experiments/bench_split_tail.py --out $OUT/split_tail.json 2>&1 | tail -c 3000
}
step_eager() { timeout $(at_most ${EAGER_TIMEOUT:-120} 15) python3 scripts/experiments/check_eager_budget.py --out $OUT/eager_budget.json ${EAGER_ARGS:-} 2>&1 | tail -3; }
step_repeat() { timeout 100 python3 scripts/bench_repeat.py --data /tmp/data --out $OUT/repeat.json 2>&1 | tail -3; }

status=0 failed=""
for step in $steps; do
  echo "=== $step $(date +%T)"
  if declare -F "step_$step" > /dev/null; then
    "step_$step" "$@"
    rc=$?
  else
    echo "unknown step $step"; rc=2
  fi
  if [ $rc -ne 0 ]; then
    echo "=== $step FAILED (exit $rc)"; failed="$failed $step"
    [ $status -ne 0 ] || status=$rc
  fi
done
if [ -n "$failed" ]; then echo "=== end $(date +%T), failed:$failed"; else echo "=== end $(date +%T), every step passed"; fi
exit $status
