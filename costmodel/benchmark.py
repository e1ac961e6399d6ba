"""Measuring configs: one ``Benchmarker`` protocol, two implementations.

* ``IsolatedBenchmarker`` compiles ahead in a pool of processes (compilation dominates; the pool only warms
  Triton's on-disk cache, so a crashed compiler never takes the run down) and times in one isolated worker
  process with a per-config timeout: a hang or an illegal memory access kills the worker, which is restarted, and
  the run goes on. Each config's output is checked against the torch reference (NaN-poisoned buffer, relative
  error) before its time counts; it runs and times the family's bound call (``KernelFamily.bind``: what a user
  calling the kernel again gets), flushing L2 before every repeat (GPU time, the median; the flush outlasts the
  launch), then back to back (``eager_ms``, the per-call time an eager loop sees, launch included). On a machine
  without a GPU it runs under ``TRITON_INTERPRET=1`` on CPU tensors: correct results, meaningless times.
* ``ReplayBenchmarker`` answers from recorded measurements: how tuners are evaluated offline and tested on CPUs.
"""

from __future__ import annotations

import functools
import json
import math
import multiprocessing as mp
import os
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from typing import Protocol

from costmodel import hardware
from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from costmodel.kernels import get_family
from costmodel.kernels.base import Config, KernelFamily, Problem

STATUSES = ("ok", "compile_error", "out_of_resources", "runtime_error", "timeout", "wrong_result")
# seconds a timing worker killed for a hang may take to exit. A process whose kernel never ends on the GPU waits in
# the driver until its context is torn down; on the H200 a warp-specialised matmul that deadlocked (session 9)
# stalled every step that met it for good, the waits for its worker included.
KILL_WAIT_S = 15.0
L2_FLUSH_BYTES = 256 * 2**20


class GpuStuck(CostModelError):
    """A timing worker killed for a hang did not exit within KILL_WAIT_S: its kernel likely still runs on the GPU,
    and any time measured beside it would be shared with it. ``measurements``: the configs measured so far, in
    order (None where not measured), the hanging one recorded as a timeout."""

    def __init__(self, message: str, measurements: list | None = None):
        super().__init__(message)
        self.measurements = measurements or []


@dataclass
class Measurement:
    config: Config
    status: str
    latency_ms: float | None = None  # median
    p20_ms: float | None = None
    p80_ms: float | None = None
    min_ms: float | None = None
    reps: int | None = None
    # median per-call time of back-to-back calls (launch cost included, L2 warm); latency_ms above is GPU time:
    # L2 flushed before each call and the flush outlasts the launch, so the launch is hidden
    eager_ms: float | None = None
    compile_s: float | None = None
    rel_err: float | None = None
    n_regs: int | None = None
    n_spills: int | None = None
    shared_bytes: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Benchmarker(Protocol):
    def measure(self, family: str, problem: Problem, dtype: str, configs: list[Config]) -> list[Measurement]:
        """One measurement per config, in order; failures are measurements with their status."""
        ...

    def prefetch(self, family: str, problem: Problem, dtype: str, configs: list[Config]) -> None:
        """Start whatever measuring these later needs (compilation), without waiting."""
        ...

    def ready(self, family: str, problem: Problem, dtype: str, configs: list[Config]) -> bool:
        """Whether measure() would start at once."""
        ...


def compile_ahead(bench: Benchmarker, family: str, problem: Problem, dtype: str, configs: list[Config],
                  poll_s: float = 0.005, deadline: float | None = None) -> float:
    """Queue the configs' compilation and wait until every one is done, or until ``deadline`` (a perf_counter
    time) passes; the seconds waited (so that a caller can tell compile time from timing)."""
    t0 = time.perf_counter()
    bench.prefetch(family, problem, dtype, configs)
    while not bench.ready(family, problem, dtype, configs) and (deadline is None or time.perf_counter() < deadline):
        time.sleep(poll_s)
    return time.perf_counter() - t0


def interpreting() -> bool:
    """Kernels run on CPU tensors: Triton's interpreter, or Helion's reference mode (eager torch, configs ignored)."""
    return os.environ.get("TRITON_INTERPRET") == "1" or os.environ.get("HELION_INTERPRET") == "1"


def classify(exc: BaseException) -> str:
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources, PTXASError

    if isinstance(exc, OutOfResources):
        return "out_of_resources"
    if isinstance(exc, (CompilationError, PTXASError)):
        return "compile_error"
    return "runtime_error"


# --- processes: forked from one server that has imported torch and the kernels --------------------------------

_PRELOAD = ["torch", "costmodel.kernels", "costmodel.forkserver_exit"]  # the last leaves without a teardown


def process_context():
    """Where the benchmarker's processes come from: multiprocessing's forkserver, which imports torch, Triton and
    the kernels once and then forks. A fresh interpreter spends about 5 s importing torch on the H200 host (and
    fifteen at once longer), which was most of a tune's wall time. The server never touches CUDA, so its children
    may. They inherit the server's environment, not their parent's: each adopts its parent's as it starts."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def start_process_server() -> None:
    """Start the forkserver now, without waiting for it: its imports then run while the caller does its own
    start-up (torch, the CUDA context, the model), and the benchmarker's first processes fork at once."""
    from multiprocessing import forkserver

    process_context()
    forkserver.ensure_running()


def _adopt_environment(env: dict[str, str]) -> None:
    """A benchmarker process's start: its parent's environment, and its stdout onto stderr. The command's stdout
    carries its one JSON object; Helion and Triton print there (a failed ptxas run's whole PTX, 37,000 lines in
    `collect --json` on the H200, session 12), and every process forked from the server shares that stdout."""
    os.environ.clear()
    os.environ.update(env)
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr


# --- compile pool (warm Triton's cache without touching the GPU) -------------------------------------------

def _compile_only_driver(hw: HardwareRecord):
    """Triton's CUDA driver with its device queries answered from the hardware record: compiling needs the target,
    not the GPU, so a compile process creates no CUDA context (a second each, and GPU memory)."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaDriver

    drv = CudaDriver()
    target = GPUTarget("cuda", hw.cc_major * 10 + hw.cc_minor, 32)
    drv.get_current_device = lambda: 0
    drv.get_current_stream = lambda device=None: 0
    drv.get_device_capability = lambda device=None: (hw.cc_major, hw.cc_minor)
    drv.get_current_target = lambda: target
    return drv


def target_only_driver(cc: int = 90):
    """Triton's CUDA driver answering device queries for an sm_``cc`` target without libcuda: compiling for the
    H200 on a machine with no GPU (scripts/compare_kernel_ptx.py, the Helion pool's CPU test). It builds no
    launcher (that loads libcuda): compile with ``warmup=True`` only."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaDriver

    class TargetOnly(CudaDriver):
        def __init__(self):  # CudaDriver's loads libcuda
            pass

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_current_target(self):
            return GPUTarget("cuda", cc, 32)

        def get_active_torch_device(self):
            import torch

            return torch.device("meta")

        def launcher_cls(self, src, metadata):
            return None

    return TargetOnly()


def _init_compile_process(env: dict[str, str], hw: dict) -> None:
    from triton.runtime import driver

    _adopt_environment(env)
    driver.set_active(_compile_only_driver(HardwareRecord(**hw)))
    if os.environ.get(POOL_STACKS_S):  # where a compile process spends its time, every so many seconds, on stderr
        import faulthandler

        faulthandler.dump_traceback_later(float(os.environ[POOL_STACKS_S]), repeat=True)


# seconds: a compile process prints its threads' stacks this often (finding where the Helion pool stalls on the H200)
POOL_STACKS_S = "COSTMODEL_POOL_STACKS_S"
# seconds a Helion config's Triton compile may take in the pool: the timing worker's own timeout (30 s), within
# which it compiled every config it recorded as ok (at most 12.3 s in session 11's helion:softmax group); Helion's
# own autotuner allows 60 s (its autotune_compile_timeout)
HELION_COMPILE_LIMIT_S = 30.0


@functools.cache
def _shapes_only():
    """A torch function mode in which ``torch.randn`` on the meta device is ``torch.empty``: the same shape and
    dtype, without the decompositions that meta randn imports (about 900 modules, 5 s in a fresh process on the H200
    host, where every compile process would pay it before its first compile)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class ShapesOnly(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.randn and str(kwargs.get("device")) == "meta":
                return torch.empty(*args, **{k: v for k, v in kwargs.items() if k != "generator"})
            return func(*args, **kwargs)

    return ShapesOnly


def meta_inputs(fam: KernelFamily, problem: Problem, dtype: str) -> tuple[tuple, object]:
    """The family's inputs and output as meta tensors (shapes, strides and dtypes: all a compile needs)."""
    with _shapes_only()():
        return fam.make_inputs(problem, dtype, "meta"), fam.make_output(problem, dtype, "meta")


@functools.cache
def _kernel_hash(family: str) -> str:
    return get_family(family).kernel_hash  # tokenising the kernels' source takes 30 ms: once per process


def compile_lock(family: str, key: tuple):
    """A lock file per (family, compile key) beside Triton's on-disk cache, held while one process compiles it.
    Every process that shares the cache (the compile pools of `collect --gpus` workers, Dask workers on one host)
    then compiles a binary once: a second process waits for the first and finds the binary in the cache. Without
    it, the pools of two GPU workers drawing configs from the same per-family pools compiled the same binaries
    side by side, and the CPU cores they share were the limit on scaling (issue 13)."""
    import hashlib

    import filelock
    import triton.knobs

    digest = hashlib.sha256(repr((family, _kernel_hash(family), key)).encode()).hexdigest()[:32]
    folder = os.path.join(triton.knobs.cache.dir, "costmodel-locks")
    os.makedirs(folder, exist_ok=True)
    return filelock.FileLock(os.path.join(folder, digest + ".lock"))


def _compile_one(family: str, problem: Problem, dtype: str, config: Config, hw: dict) -> dict:
    """Compile one config, kernel and launcher, into Triton's on-disk cache: meta tensors stand in for the inputs
    and the binary is not loaded (the timing worker loads what this built)."""
    fam = get_family(family)
    t0 = time.perf_counter()
    # compile_s: this process's work, not the wait
    with compile_lock(family, fam.compile_key(problem, dtype, config, HardwareRecord(**hw))):
        lock_wait_s = time.perf_counter() - t0
        return {**_compile_locked(fam, problem, dtype, config, hw), "lock_wait_s": lock_wait_s}


def _compile_locked(fam: KernelFamily, problem: Problem, dtype: str, config: Config, hw: dict) -> dict:
    return _compiled(lambda: fam.launch(problem, *meta_inputs(fam, problem, dtype), config, HardwareRecord(**hw),
                                        warmup=True), hw)


def _compile_helion(spec, hw: dict, limit_s: float = HELION_COMPILE_LIMIT_S) -> dict:
    """Compile one Helion config's Triton kernel, as ``_compile_one`` a Triton family's, from its captured launch
    (``costmodel.helion.launch``); the timing worker's ``compile_config`` and first call then load it. A compile
    still running after ``limit_s`` is stopped and is the config's outcome, a timeout."""
    from costmodel.helion import launch

    launch.load_modules()  # once per process, outside compile_s; the forked compile inherits them
    return _within(limit_s, lambda: _compiled(lambda: launch.compile_launch(spec), hw))


def _within(limit_s: float, work) -> dict:
    """``work()``'s outcome, computed in a child forked from this process, which is killed after ``limit_s``:
    Triton's compiler cannot be interrupted from Python (a long LLVM pass holds the thread), and killing this
    compile process itself would break the whole pool."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_send_outcome, args=(send, work), daemon=True)
    t0 = time.perf_counter()
    child.start()
    send.close()
    try:
        if recv.poll(limit_s):
            return recv.recv()
        return {"status": "timeout", "compile_s": time.perf_counter() - t0,
                "error": f"Triton's compile did not finish in {limit_s:g} s"}
    except EOFError:  # the child died without answering (the compiler crashed the process)
        child.join()
        return {"status": "compile_error", "compile_s": time.perf_counter() - t0,
                "error": f"the compile process died (exit code {child.exitcode})"}
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        recv.close()


def _send_outcome(send, work) -> None:
    send.send(work())
    send.close()


def _compiled(compile_kernel, hw: dict) -> dict:
    """Run ``compile_kernel`` (a Triton CompiledKernel, not loaded) and build its launcher: the outcome as a status
    and this process's seconds."""
    from triton.runtime import driver
    from triton.runtime.errors import OutOfResources

    t0 = time.perf_counter()
    try:
        kernel = compile_kernel()
        driver.active.launcher_cls(kernel.src, kernel.metadata)  # the launcher is C, built once per signature
        if kernel.metadata.shared > hw["smem_per_block"]:  # what loading the binary would refuse
            raise OutOfResources(kernel.metadata.shared, hw["smem_per_block"], "shared memory")
    except Exception as e:  # noqa: BLE001 - every failure is a recorded status
        return {"status": classify(e), "compile_s": time.perf_counter() - t0, "error": f"{type(e).__name__}: {e}"[:500]}
    return {"status": "ok", "compile_s": time.perf_counter() - t0}


class CompilePool:
    """Compiles each (family, compile_key) once, ahead of timing; futures are shared by every problem it serves.
    A Helion config compiles once per (problem, dtype, config): its kernel is specialised to the shapes."""

    def __init__(self, hw: HardwareRecord, workers: int, device: str = "cuda", seed: int = 0):
        self.hw, self.workers = hw, workers
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()  # the Helion capture thread starts the executor too
        self._futures: dict[tuple, Future] = {}
        self._helion = _HelionLaunches(device, seed)
        self.spent = {"compile_s": 0.0, "lock_wait_s": 0.0}  # summed over its compiles: working, and waiting on a peer

    @property
    def helion_limit_s(self) -> float:
        """Seconds a Helion config's compile may take before the pool answers that it timed out."""
        return self._helion.limit_s

    def _account(self, fut: Future) -> None:
        if not fut.cancelled() and fut.exception() is None and fut.result() is not None:
            for k in self.spent:
                self.spent[k] += fut.result().get(k) or 0.0

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(self.workers, mp_context=process_context(),
                                                 initializer=_init_compile_process,
                                                 initargs=(dict(os.environ), self.hw.as_dict()))
            return self._pool

    def submit(self, fam: KernelFamily, family: str, problem: Problem, dtype: str, config: Config) -> Future:
        return self._once((family, fam.compile_key(problem, dtype, config, self.hw)), lambda: self._executor().submit(
            _compile_one, family, problem, dtype, config, self.hw.as_dict()))

    def submit_helion(self, family: str, problem: Problem, dtype: str, config: Config) -> Future:
        """A Helion config's compile (``_HelionLaunches``); its result None where its launch could not be
        captured."""
        from costmodel.dataset import canonical_json

        return self._once((family, canonical_json(problem), dtype, canonical_json(config)),
                          lambda: self._helion.submit(family, problem, dtype, config, self._executor, self.hw))

    def _once(self, key: tuple, start) -> Future:
        fut = self._futures.get(key)
        if fut is None or (fut.done() and isinstance(fut.exception(), BrokenProcessPool)):
            try:
                fut = start()
            except BrokenProcessPool:
                self._pool = None
                fut = start()
            self._futures[key] = fut
            fut.add_done_callback(self._account)
        return fut

    def result(self, fut: Future, timeout: float | None = None) -> dict | None:
        """The compile outcome, or None when the pool could not say (it broke, the task failed outside the
        compiler, or it did not answer within ``timeout`` seconds): the timing worker then compiles the config
        itself, under its own timeout, and records what happens."""
        try:
            return fut.result(timeout)
        except TimeoutError:
            return None
        except BrokenProcessPool:
            self._pool = None
            return None
        except Exception:  # noqa: BLE001
            return None

    def close(self) -> None:
        """Stop the compile processes now. They only warm Triton's on-disk cache, whose files are written whole and
        renamed into place, so stopping one mid-compile loses nothing. Left to the executor's own shutdown, they
        outlived a `collect --gpus` worker on the H200 host: at its exit the worker waited on them for good
        (its 30 processes blocked on the pool's queue lock after shutdown), and so did the run."""
        if self._pool is not None:
            procs = list((getattr(self._pool, "_processes", None) or {}).values())  # the executor's own list
            self._pool.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                if p.is_alive():
                    p.terminate()
            self._pool = None
        self._helion.close()


class _HelionLaunches:
    """Helion configs' launches, captured in the benchmarker's process for its compile pool
    (``costmodel.helion.launch``): the group's kernel bound on ``device`` as the timing worker binds it
    (``_helion_bound``), each config generated by Helion and its launch captured, in one thread (code generation
    takes 25-30 ms a config, which the caller's prefetch of a whole plan must not wait for), then compiled in the
    pool. Configs come a group at a time, so one group's kernel and tensors are kept."""

    def __init__(self, device: str, seed: int, limit_s: float = HELION_COMPILE_LIMIT_S):
        self.device, self.seed, self.limit_s = device, seed, limit_s
        self._thread: ThreadPoolExecutor | None = None
        self._group: tuple | None = None  # ((family, problem, dtype), bound kernel, args)

    def submit(self, family: str, problem: Problem, dtype: str, config: Config, executor, hw: HardwareRecord) -> Future:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="helion-capture")
        out: Future = Future()
        self._thread.submit(self._compile, out, family, problem, dtype, config, executor, hw)
        return out

    def _compile(self, out: Future, family, problem, dtype, config, executor, hw) -> None:
        try:
            spec = self.capture(family, problem, dtype, config)
        except Exception:  # noqa: BLE001 - the timing worker compiles the config itself and records what happens
            out.set_result(None)
            return
        try:
            inner = executor().submit(_compile_helion, spec, hw.as_dict(), self.limit_s)
        except BaseException as e:  # noqa: BLE001 - a broken pool: the caller's to handle
            out.set_exception(e)
            return
        inner.add_done_callback(functools.partial(_relay, out, spec.codegen_s))

    def capture(self, family: str, problem: Problem, dtype: str, config: Config):
        from costmodel.helion import launch

        key = (family, tuple(problem.items()), dtype)
        if self._group is None or self._group[0] != key:
            self._group = None  # the last group's tensors go before the next group's are made
            _, _, args, bound = _helion_bound(family, problem, dtype, self.device, self.seed)
            self._group = (key, bound, args)
        return launch.capture(self._group[1], config, self._group[2])

    def close(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False, cancel_futures=True)
            self._thread = None
        self._group = None


def _relay(out: Future, codegen_s: float, inner: Future) -> None:
    """``inner``'s outcome as ``out``'s, with the seconds Helion's code generation took in the parent."""
    if inner.cancelled():
        out.cancel()
    elif inner.exception() is not None:
        out.set_exception(inner.exception())
    else:
        out.set_result({**inner.result(), "codegen_s": codegen_s})


# --- the isolated timing worker -----------------------------------------------------------------------

@functools.cache
def _flush_buffer(device: str):
    import torch

    return torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)


def time_callable(fn, device: str, budget_ms: float, min_reps: int, max_reps: int) -> tuple[list[float], int]:
    """Per-repeat times in ms, L2 flushed before each repeat."""
    if device == "cpu":  # interpreter: one run, the time means nothing
        t0 = time.perf_counter()
        fn()
        return [(time.perf_counter() - t0) * 1e3], 1
    import torch

    flush = _flush_buffer(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush.zero_()
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    reps = max(min_reps, min(max_reps, int(budget_ms / max(start.elapsed_time(end), 1e-3))))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        flush.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)], reps


# Helion configs compile in the pool unless this is "0". On the H200 (session 10, call 4; Helion 1.4.0) the pool
# answered none of them within its bound and a collect of six Helion kernels wrote no row in 165 s. Session 11 found
# why: its compile processes were in Triton's LLVM passes (their stacks every 15 s,
# scripts/results/helion_pool_stacks-h200-2026-12-01-s11a.txt), and Helion's random population holds configs that
# compile for minutes: 5 of one group's 40 hung the timing worker for its 30 s (helion:softmax M=128 N=6144), and
# one of them took 82 s to compile for sm_90 on the CPU machine (scripts/experiments/helion_compile_times.py).
# Each Helion compile in the pool is now bounded (HELION_COMPILE_LIMIT_S) and such a config recorded as a timeout
# without the worker trying it again. With that bound the pool's GPU test passed on the H200 (session 12, call 1:
# scripts/results/helion_pool-h200-2026-12-01-s12.txt), so the pool is the default; "0" leaves each Helion config
# to compile in the timing worker, as before.
HELION_POOL = "COSTMODEL_HELION_POOL"
# configs handed to the timing worker at once (each hand-over sets the group's inputs and reference up again, a few
# ms). A whole-space matmul group (1,300-2,200 configs) used to be timed only after its last compile: compile and
# timing ran in series (15 configs/s on the H200 in session 9, where its compiles alone allowed about 21).
STREAM_CHUNK = 64
EAGER_CALLS = (10, 200)  # back-to-back calls per round, at least and at most
EAGER_ROUNDS = 3
# graph replays (the Helion race's timing and the Helion tuner's graph objective): a replay of at least GRAPH_MS of
# calls, over at most MAX_SETS input sets, in at most MAX_CALLS calls (a softmax of 64x3072 fp16 reads 0.4 MB: 2 x
# the H200's 60 MB L2 is 300 sets of it)
GRAPH_MS, MAX_SETS, MAX_CALLS = 1.0, 512, 1024


def input_sets(args: tuple, l2_bytes: int) -> int:
    """How many input sets a graph replay rotates over: enough that their tensors fill twice the L2 (so each call
    reads its inputs from memory, as do_bench's flushed calls do), at most MAX_SETS."""
    import torch

    nbytes = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    return max(1, min(MAX_SETS, math.ceil(2 * l2_bytes / max(nbytes, 1))))


def graph_calls(call_ms: float, sets: int) -> int:
    """Calls in a replay of a kernel taking about ``call_ms`` a call: every input set once, and about GRAPH_MS."""
    return min(MAX_CALLS, max(sets, math.ceil(GRAPH_MS / max(call_ms, 1e-6))))


def graph_timer(calls: list, replays: int = 10):
    """A timer of ``calls`` captured once, in order, in one CUDA graph: each time it is called, the graph replayed
    ``replays`` times back to back, median ms per call. No launch waits on the host (session 23: do_bench's rounds
    of one softmax config that Helion's final timing read at 4.4 us ran 5.6-28 us; a launch waiting on Helion's host
    code is the likely cause, not profiled); calls over several input sets keep L2 from holding them all."""
    import statistics

    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in calls:
            fn()  # warm on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in calls:
            fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def time_it() -> float:
        per_call = []
        for _ in range(replays):
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            per_call.append(start.elapsed_time(end) / len(calls))
        return statistics.median(per_call)

    return time_it


def time_eager(fn, device: str, budget_ms: float) -> float | None:
    """The per-call time of ``fn`` called back to back, as a loop in eager PyTorch runs it (no flush between
    calls, so a launch that takes longer than the kernel shows): the median over rounds of elapsed / calls."""
    if device == "cpu":
        return None
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    calls = max(EAGER_CALLS[0], min(EAGER_CALLS[1], int(budget_ms / max(start.elapsed_time(end), 1e-3))))
    per_call = []
    for _ in range(EAGER_ROUNDS):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls)
    return _quantile(per_call, 0.5)


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _measure_one(fam, problem, dtype, config, hw, inputs, ref, out, device, timing) -> Measurement:
    import torch

    out.fill_(float("nan"))
    t0 = time.perf_counter()
    call = fam.bind(problem, inputs, out, config, hw)  # what is checked is what is timed: the bound call
    call()
    if device != "cpu":
        torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    kernel = call.kernel
    regs = dict(n_regs=getattr(kernel, "n_regs", None), n_spills=getattr(kernel, "n_spills", None),
                shared_bytes=getattr(getattr(kernel, "metadata", None), "shared", None))
    return _checked_then_timed(config, call, out, ref, fam.tolerance[dtype], first_s, device, timing, **regs)


def relative_error(result, ref) -> float:
    """||result - ref|| / ||ref||, ``ref`` in float32; of a kernel that returns several tensors (its reference a
    tuple of as many, in the same order) the largest, NaN where any is not finite."""
    if isinstance(ref, (tuple, list)):
        errs = [relative_error(r, f) for r, f in zip(result, ref, strict=True)]
        return max(errs) if all(math.isfinite(e) for e in errs) else math.nan
    return float(((result.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item())


def _checked_then_timed(config, call, result, ref, tolerance: float, first_s: float, device: str, timing: dict,
                        **regs) -> Measurement:
    """``call``'s first ``result`` against the float32 reference: a wrong result is recorded and never timed;
    a right one is timed both ways (GPU time, L2 flushed; eager per-call time)."""
    rel_err = relative_error(result, ref)
    if not math.isfinite(rel_err) or rel_err > tolerance:
        return Measurement(config, "wrong_result", rel_err=rel_err if math.isfinite(rel_err) else None,
                           compile_s=first_s, **regs)
    times, reps = time_callable(call, device, timing["budget_ms"], timing["min_reps"], timing["max_reps"])
    eager_ms = time_eager(call, device, timing["budget_ms"]) if timing.get("eager", True) else None
    return Measurement(config, "ok", latency_ms=_quantile(times, 0.5), p20_ms=_quantile(times, 0.2),
                       p80_ms=_quantile(times, 0.8), min_ms=min(times), reps=reps, rel_err=rel_err,
                       compile_s=first_s, eager_ms=eager_ms, **regs)


def _helion_call(fam, bound, config, args):
    """``config`` of the bound Helion kernel as a call: compiled by Helion's own path for it (``compile_config``,
    what Helion's autotuner times); in Helion's reference mode (HELION_INTERPRET=1), where no code is generated,
    the kernel with this one config, which runs it eagerly in torch (the config ignored)."""
    import helion
    from helion.runtime.ref_mode import RefMode

    cfg = helion.Config(**config)
    if bound.kernel.settings.ref_mode != RefMode.OFF:
        return functools.partial(fam.with_settings((cfg,)).bind(args), *args)
    return functools.partial(bound.compile_config(cfg), *args)


def _measure_helion(fam, dtype, config, bound, args, ref, device, timing) -> Measurement:
    """One Helion config, compiled (``_helion_call``) and checked against the reference before the same timing as
    a Triton family's; compile_s covers the compile and the first call (where the compile pool built the binary,
    the caller records the pool's instead). Helion allocates its output, so it is not NaN-poisoned."""
    import torch

    t0 = time.perf_counter()
    call = _helion_call(fam, bound, config, args)
    result = call()
    if device != "cpu":
        torch.cuda.synchronize()
    return _checked_then_timed(config, call, result, ref, fam.tolerance[dtype], time.perf_counter() - t0, device,
                               timing)


def _helion_bound(family: str, problem: Problem, dtype: str, device: str, seed: int):
    """The Helion family of a group, its inputs, the kernel's arguments and the kernel bound to them (traced once
    for the group, each config compiled from it): where the timing worker and the compile pool's capture both
    bind it, so both generate the same code."""
    from costmodel.helion import families as helion_families

    hfam = helion_families.get(family)
    inputs = hfam.make_inputs(problem, dtype, device, seed=seed)
    args = hfam.args(problem, inputs)
    return hfam, inputs, args, hfam.helion_kernel().bind(args)


def _group_measurer(family: str, problem: Problem, dtype: str, hw: HardwareRecord, device: str, timing: dict,
                    seed: int):
    """A function measuring one config of the group: its inputs and reference made once."""
    from costmodel.helion import families as helion_families

    if helion_families.is_helion(family):
        hfam, inputs, args, bound = _helion_bound(family, problem, dtype, device, seed)
        ref = hfam.reference(problem, inputs)
        return lambda config: _measure_helion(hfam, dtype, config, bound, args, ref, device, timing)
    fam = get_family(family)
    inputs = fam.make_inputs(problem, dtype, device, seed=seed)
    ref = fam.reference(problem, inputs)
    out = fam.make_output(problem, dtype, device)
    return lambda config: _measure_one(fam, problem, dtype, config, hw, inputs, ref, out, device, timing)


class _GroupSetup:
    """The timing worker's set-up of its last group (inputs, the torch reference, the output: ``_group_measurer``),
    kept for the next call on that group: a tune measures one group three times (first round, second round,
    finalists), and its ``prepare`` sets the group up while the configs compile. A new group drops the old one's
    tensors before making its own."""

    def __init__(self, device: str, timing: dict):
        self.device, self.timing, self.key, self.measure = device, timing, None, None

    def get(self, family: str, problem: Problem, dtype: str, hw_dict: dict, seed: int):
        import torch

        key = json.dumps([family, problem, dtype, hw_dict, seed], sort_keys=True)
        if key != self.key:
            self.key, self.measure = None, None
            if self.device != "cpu":
                torch.cuda.empty_cache()
            self.measure = _group_measurer(family, problem, dtype, HardwareRecord(**hw_dict), self.device,
                                           self.timing, seed)
            self.key = key
        return self.measure


def _worker_main(conn, device: str, timing: dict, env: dict[str, str]) -> None:
    """Serve groups until told to stop: ("group", family, problem, dtype, [(idx, config)], hw, seed); ("prepare",
    family, problem, dtype, hw, seed) sets a group up ahead and answers nothing (a failure there is left for the
    group's own message to meet and report)."""
    _adopt_environment(env)
    if device != "cpu":
        _flush_buffer(device)  # CUDA context and flush buffer now, while the first group's configs compile
    setup = _GroupSetup(device, timing)
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        if msg[0] == "prepare":
            try:
                setup.get(*msg[1:])
            except Exception:  # noqa: BLE001 - the group's own message sets it up again and reports the failure
                pass
            continue
        _, family, problem, dtype, items, hw_dict, seed = msg
        measure = setup.get(family, problem, dtype, hw_dict, seed)
        for idx, config in items:
            conn.send(("start", idx))
            try:
                m = measure(config)
            except Exception as e:  # noqa: BLE001
                m = Measurement(config, classify(e), error=f"{type(e).__name__}: {e}"[:500])
                if "CUDA" in str(e):  # a CUDA error poisons the context for every later launch: start afresh
                    conn.send(("result", idx, asdict(m)))
                    os._exit(3)
            conn.send(("result", idx, asdict(m)))
        del measure  # ``setup`` holds the group's tensors: the next group's set-up frees them before making its own
        conn.send(("done",))


@dataclass
class IsolatedBenchmarker:
    """Compile pool + isolated timing worker (see module docstring). Use as a context manager."""

    hw: HardwareRecord
    device: str = "cuda"
    compile_workers: int = 0  # 0: one per core but two; none when interpreting
    timeout_s: float = 30.0
    budget_ms: float = 5.0  # kernel time to spend per config: reps = budget / one run, within [min, max]
    min_reps: int = 3
    max_reps: int = 40
    # also time each config's eager per-call time (tune's default objective). Its 3 rounds of at least 10
    # back-to-back calls of the budget each are most of a small config's timing (session 10: about 15 of 26 ms);
    # a sweep judged by GPU time alone (bench_tune.py's truth and race) leaves it out
    eager: bool = True
    seed: int = 0
    restarts: int = field(default=0, init=False)
    # seconds measure() spent waiting on the compile pool, and handing configs to the timing worker (check and
    # timing): how a collector shows whether its compile processes keep the GPU busy
    waited_s: float = field(default=0.0, init=False)
    timed_s: float = field(default=0.0, init=False)
    # of timed_s, the seconds from handing a group to the worker to its first config: the worker's set-up of the
    # group (inputs, the torch reference), and its own start when it was not up yet. A cold tune's first round
    # took about 170 ms a config against 11 ms in sweeps (session 16); this says how much of it is set-up
    setup_s: float = field(default=0.0, init=False)

    def __post_init__(self):
        workers = self.compile_workers or hardware.compile_workers(hardware.usable_cores())
        compiled_ahead = not (interpreting() or self.device == "cpu")
        self.pool = CompilePool(self.hw, workers, self.device, self.seed) if compiled_ahead else None
        if compiled_ahead:
            from triton import knobs

            # Helion's compile_config points TRITON_CACHE_DIR at a folder of its own where it is unset (1.4.0, 1.5.1),
            # in whichever process compiles first (the timing worker, this one capturing): a worker would then look
            # for a binary where the pool did not put it. Pinned here, all of them share Triton's own.
            os.environ.setdefault("TRITON_CACHE_DIR", knobs.cache.dir)
        self._proc = self._conn = None

    @property
    def compile_spent(self) -> dict[str, float]:
        """Its compile processes' seconds: compiling (compile_s) and waiting for a peer sharing Triton's cache to
        finish the same binary (lock_wait_s)."""
        return {k: round(v, 2) for k, v in self.pool.spent.items()} if self.pool else {"compile_s": 0.0, "lock_wait_s": 0.0}

    # -- worker lifecycle
    def _start(self) -> None:
        ctx = process_context()
        self._conn, child = ctx.Pipe()
        timing = dict(budget_ms=self.budget_ms, min_reps=self.min_reps, max_reps=self.max_reps, eager=self.eager)
        self._proc = ctx.Process(target=_worker_main, args=(child, self.device, timing, dict(os.environ)), daemon=True)
        self._proc.start()
        child.close()

    def _kill(self) -> bool:
        """Kill the timing worker; whether it exited within KILL_WAIT_S (the next one starts afresh either way)."""
        if self._proc is None:
            return True
        self._proc.kill()
        self._proc.join(KILL_WAIT_S)
        exited = not self._proc.is_alive()
        self._proc = self._conn = None
        self.restarts += 1
        return exited

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(("stop",))
                self._proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        self._proc = self._conn = None
        if self.pool:
            self.pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- measuring
    def prefetch(self, family: str, problem: Problem, dtype: str, configs: list[Config]) -> None:
        """Queue compilation of configs that will be measured later (keeps the CPUs busy while the GPU times),
        and start the timing worker so that its CUDA set-up overlaps the compiles."""
        if self._proc is None or not self._proc.is_alive():
            self._start()
        submit = self._submitter(family, problem, dtype)
        for c in configs if submit else ():
            submit(c)

    def prepare(self, family: str, problem: Problem, dtype: str) -> None:
        """Have the timing worker set the group up now (inputs, the torch reference), while its configs compile:
        its next measure then starts timing at once (``setup_s`` says what the set-up took where it did not)."""
        if self._proc is None or not self._proc.is_alive():
            self._start()
        self._conn.send(("prepare", family, problem, dtype, self.hw.as_dict(), self.seed))

    def ready(self, family: str, problem: Problem, dtype: str, configs: list[Config]) -> bool:
        """Whether every config is compiled (or failed to), so measuring it would not wait on the pool."""
        submit = self._submitter(family, problem, dtype)
        return submit is None or all(submit(c).done() for c in configs)

    def _submitter(self, family: str, problem: Problem, dtype: str):
        """config -> the future of its compile in the pool, or None where nothing compiles in the pool (the
        interpreter: each config compiles at its first call, in the timing worker). A Helion config's pool
        compile is of the Triton code Helion generates for it; the worker still runs Helion's own
        ``compile_config``, whose first call then loads the binary."""
        from costmodel.helion.families import is_helion

        if self.pool is None:
            return None
        if is_helion(family):
            if os.environ.get(HELION_POOL) == "0":
                return None
            return lambda c: self.pool.submit_helion(family, problem, dtype, c)
        fam = get_family(family)
        return lambda c: self.pool.submit(fam, family, problem, dtype, c)

    def measure(self, family: str, problem: Problem, dtype: str, configs: list[Config]) -> list[Measurement]:
        """Every config's measurement, in order. The configs go to the timing worker a chunk at a time, each as soon
        as its compiles are done, so the GPU times the first chunk while the pool compiles the rest."""
        submit = self._submitter(family, problem, dtype)
        self.prefetch(family, problem, dtype, configs)  # every compile queued before the first is awaited
        results: list[Measurement | None] = [None] * len(configs)
        try:
            for lo in range(0, len(configs), STREAM_CHUNK):
                self._measure_chunk(submit, family, problem, dtype, configs,
                                    range(lo, min(lo + STREAM_CHUNK, len(configs))), results)
        except BaseException as e:  # a hung GPU, or a stop (Ctrl-C, a kill): what was measured goes with it
            e.measurements = results
            raise
        return results  # type: ignore[return-value]

    def _measure_chunk(self, submit, family: str, problem: Problem, dtype: str, configs: list[Config], chunk: range,
                       results: list) -> None:
        from costmodel.helion.families import is_helion

        compile_s: dict[int, float] = {}
        todo = []
        t0 = time.perf_counter()
        # waited on in turn, each for at most the worker's timeout: compiles run in the order they were queued, so
        # one that is still not done that long after the one before hangs or crawls; the worker's own timeout then
        # records it as it did before the pool compiled it. A Helion compile answers within its own limit (a
        # timeout, HELION_COMPILE_LIMIT_S), so it is waited on for that limit more.
        wait_s = self.timeout_s + (self.pool.helion_limit_s if submit and is_helion(family) else 0.0)
        for i in chunk:
            c = configs[i]
            info = self.pool.result(submit(c), wait_s) if submit else None
            if info is not None:  # a Helion config's compile began with Helion's code generation, in this process
                info = {**info, "compile_s": info["compile_s"] + info.get("codegen_s", 0.0)}
            if info is not None and info["status"] != "ok":
                results[i] = Measurement(c, info["status"], compile_s=info["compile_s"], error=info.get("error"))
            else:
                if info is not None:
                    compile_s[i] = info["compile_s"]
                todo.append(i)
        t1 = time.perf_counter()
        self.waited_s += t1 - t0
        while todo:
            if self._proc is None or not self._proc.is_alive():
                self._start()
            self._conn.send(("group", family, problem, dtype, [(i, configs[i]) for i in todo], self.hw.as_dict(),
                             self.seed))
            todo = self._collect(todo, results, configs, time.perf_counter())
        self.timed_s += time.perf_counter() - t1
        for i, c in compile_s.items():  # the pool's compile time; the worker's first launch only loaded it
            results[i].compile_s = c

    def _collect(self, todo: list[int], results: list, configs: list[Config], sent: float) -> list[int]:
        """Read the worker's answers for one group, handed to it at ``sent`` (``time.perf_counter()``); on a hang or
        death record the config in flight, restart, and return what is left."""
        in_flight, started = None, False
        deadline = time.monotonic() + self.timeout_s * 4  # group set-up (inputs, reference) before the first config
        while True:
            left = deadline - time.monotonic()
            try:
                ready = self._conn.poll(max(0.0, left))
                msg = self._conn.recv() if ready else None
            except (EOFError, OSError):
                msg, ready = None, True  # worker died
            if msg is None:
                status = "timeout" if not ready else "runtime_error"
                exited = self._kill()
                if not started:  # died before any config: the group itself cannot run
                    for i in todo:
                        if results[i] is None:
                            results[i] = Measurement(configs[i], status, error="worker failed setting up the group")
                    return []
                if in_flight is not None:  # else it died between configs (after reporting a CUDA error)
                    results[in_flight] = Measurement(configs[in_flight], status,
                                                     error=f"worker {'hung' if status == 'timeout' else 'died'}")
                if not exited:
                    raise GpuStuck(f"a config hung the GPU and its killed worker was still there {KILL_WAIT_S:.0f} s "
                                   f"later: {configs[in_flight] if in_flight is not None else 'group set-up'}; "
                                   "stopped, as later times would share the GPU with it (what was measured is kept)")
                return [i for i in todo if results[i] is None]
            if msg[0] == "start":
                if not started:
                    self.setup_s += time.perf_counter() - sent
                in_flight, started = msg[1], True
                deadline = time.monotonic() + self.timeout_s
            elif msg[0] == "result":
                results[msg[1]] = Measurement(**msg[2])
                in_flight = None
            elif msg[0] == "done":
                return []


class ReplayBenchmarker:
    """Answers with recorded measurements from a dataset table (configs never recorded raise KeyError)."""

    def __init__(self, table):
        names = ["kernel", "problem_json", "dtype", "config_json", "status", "latency_ms", "eager_ms"]
        cols = table.select([n for n in names if n in table.column_names]).to_pylist()
        self._rows = {(r["kernel"], r["problem_json"], r["dtype"], r["config_json"]): r for r in cols}
        self.calls = 0

    def key(self, family: str, problem: Problem, dtype: str, config: Config) -> tuple:
        from costmodel.dataset import canonical_json

        return (family, canonical_json(problem), dtype, canonical_json(config))

    def recorded_configs(self, family: str, problem: Problem, dtype: str,
                         hw: HardwareRecord | None = None) -> list[Config]:
        """The configs this replay can answer for (a tuner's candidates when replaying); with ``hw``, only those
        valid today on it, as a live tune ranks them (a config that left the space after it ran is no candidate)."""
        import json

        from costmodel.dataset import canonical_json

        pj = canonical_json(problem)
        configs = [json.loads(k[3]) for k in self._rows if k[:3] == (family, pj, dtype)]
        if hw is None:
            return configs
        fam = get_family(family)
        return [c for c in configs if fam.is_valid(problem, dtype, c, hw)]

    def measure(self, family: str, problem: Problem, dtype: str, configs: list[Config]) -> list[Measurement]:
        self.calls += 1
        out = []
        for c in configs:
            r = self._rows[self.key(family, problem, dtype, c)]
            out.append(Measurement(c, r["status"], latency_ms=r["latency_ms"], eager_ms=r.get("eager_ms")))
        return out

    def prefetch(self, *args) -> None:
        pass

    def ready(self, *args) -> bool:
        return True

    def close(self) -> None:
        pass
