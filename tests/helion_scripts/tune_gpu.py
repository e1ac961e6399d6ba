"""One Helion matmul call on the GPU through ``costmodel_autotuner`` (a fresh process, as a user's is); prints one
JSON object: the config, the wall time of the call that tuned, and what the search did (``CostModelAutotuner.last``,
empty when Helion's cache answered). ``argv``: the Helion model directory, candidates to rank, and ``cached`` to
refuse any timing (the cache must answer)."""

import json
import sys
import time

import torch

from costmodel.helion import configs, families
from tuner import helion as htune


class NoTimer:
    def measure(self, *a):
        raise AssertionError("timed where Helion's cache should have answered")


model_dir, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tuner = htune.CostModelAutotuner(model_dir, k=4, candidates=n, timer=NoTimer() if mode == "cached" else None)
fam = families.get("matmul")
problem = {"M": 2048, "N": 2048, "K": 2048}
args = fam.args(problem, fam.make_inputs(problem, "float16", "cuda"))
kernel = fam.with_settings(autotuner_fn=tuner)  # what @helion.kernel(autotuner_fn=...) gives
t0 = time.perf_counter()
out = kernel(*args)
torch.cuda.synchronize()
wall = time.perf_counter() - t0
ref = fam.reference(problem, args)
rel_err = float(torch.linalg.norm(out.float() - ref) / torch.linalg.norm(ref))
print(json.dumps({"wall_s": wall, "rel_err": rel_err, "tolerance": fam.tolerance["float16"], "last": tuner.last},
                 default=str))
