"""One Helion kernel call on the GPU through ``costmodel_autotuner`` (a fresh process, as a user's is); prints one
JSON object: the config, Helion's default config, the wall time of the call that tuned, and what the search did
(``CostModelAutotuner.last``: the batch, the verification's finalists and their re-timed ms, the winner; empty when
Helion's cache answered). ``argv``: the Helion model directory, candidates to rank, ``tune`` or ``cached`` (refuse
any timing: the cache must answer), the kernel (default matmul; rms_norm is the race's case where the batch's
single timing misled) and the tuner's objective (default eager)."""

import json
import sys
import time

import torch

from costmodel.helion import configs, families
from costmodel.helion import model as helion_model
from tuner import helion as htune

PROBLEMS = {"matmul": ({"M": 2048, "N": 2048, "K": 2048}, "float16"),
            "rms_norm": ({"M": 4096, "N": 2048}, "bfloat16")}


class NoTimer:
    def measure(self, *a):
        raise AssertionError("timed where Helion's cache should have answered")

    retime = measure


model_dir, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
name = sys.argv[4] if len(sys.argv) > 4 else "matmul"
objective = sys.argv[5] if len(sys.argv) > 5 else "eager"
tuner = htune.CostModelAutotuner(model_dir, k=4, candidates=n, timer=NoTimer() if mode == "cached" else None,
                                 objective=objective)
fam = families.get(name)
problem, dtype = PROBLEMS[name]
args = fam.args(problem, fam.make_inputs(problem, dtype, "cuda"))
kernel = fam.with_settings(autotuner_fn=tuner)  # what @helion.kernel(autotuner_fn=...) gives
t0 = time.perf_counter()
out = kernel(*args)
torch.cuda.synchronize()
wall = time.perf_counter() - t0
ref = fam.reference(problem, args)
rel_err = float(torch.linalg.norm(out.float() - ref) / torch.linalg.norm(ref))
bound = kernel.bind(args)
spec = bound.config_spec
default = configs.normalise(spec.default_config(), families.op_counts(spec))
hw = helion_model.load(model_dir).hardware
twins = len(families.twin_candidates(bound, fam.kernel, problem, dtype, hw))  # ranked beside the n random ones
print(json.dumps({"wall_s": wall, "rel_err": rel_err, "tolerance": fam.tolerance[dtype], "default": default,
                  "twin_candidates": twins, "last": tuner.last}, default=str))
