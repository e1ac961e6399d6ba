"""One-off (session 9): where a WARP_SPECIALIZE=1 matmul config stalls on the H200: compile, launcher, launch."""
import sys, time, threading, faulthandler
faulthandler.dump_traceback_later(40, exit=True)
import torch
from costmodel import hardware
from costmodel.kernels import get_family
fam = get_family("matmul"); hw = hardware.current()
p = {"M": 3000, "N": 5000, "K": 1000}
cfg = dict(fam.default_config(p, "bfloat16", hw), TMA=1, PERSISTENT=1, num_warps=4, WARP_SPECIALIZE=1, num_stages=3)
a, b = fam.make_inputs(p, "bfloat16", "cuda"); c = fam.make_output(p, "bfloat16", "cuda")
t = time.time(); print("compile...", flush=True)
k = fam.launch(p, (a, b), c, cfg, hw, warmup=True)
print("compiled %.1fs warps %d shared %d" % (time.time() - t, k.metadata.num_warps, k.metadata.shared), flush=True)
t = time.time(); fam.launch(p, (a, b), c, cfg, hw); print("launched", flush=True)
torch.cuda.synchronize(); print("ran %.3fs" % (time.time() - t), flush=True)
ref = (a @ b).float(); print("rel err", float((c.float() - ref).norm() / ref.norm()), flush=True)
