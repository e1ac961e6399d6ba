"""Problems an issue names as a benchmark's set. They stay out of training data in every dtype: collection plans
never draw them and training drops any row of them, so a benchmark measures shapes the model never saw (a shape in
the other dtype would be a twin). The scripts that run these benchmarks take their problems from here."""

from __future__ import annotations

from functools import cache

from costmodel.dataset import canonical_json

# issue 16: the tuner against the whole-space best, measured in the same device call (scripts/bench_tune.py)
TUNE_RACE = [
    ("matmul", {"M": 4100, "N": 4100, "K": 4100}, "float16"), ("matmul", {"M": 2500, "N": 7000, "K": 3000}, "bfloat16"),
    ("matmul", {"M": 511, "N": 2047, "K": 8191}, "float16"), ("matmul", {"M": 129, "N": 5000, "K": 3001}, "bfloat16"),
    ("matmul", {"M": 7777, "N": 1234, "K": 999}, "float16"), ("matmul", {"M": 40, "N": 11008, "K": 4096}, "bfloat16"),
    ("matmul", {"M": 1, "N": 14336, "K": 4096}, "float16"), ("matmul", {"M": 6144, "N": 1000, "K": 6144}, "bfloat16"),
    ("matmul", {"M": 333, "N": 333, "K": 333}, "float16"), ("matmul", {"M": 1536, "N": 1536, "K": 12288}, "bfloat16"),
    ("attention", {"B": 2, "H": 16, "S": 1000, "D": 128, "CAUSAL": 1}, "bfloat16"),
    ("attention", {"B": 8, "H": 8, "S": 333, "D": 64, "CAUSAL": 0}, "float16"),
    ("softmax", {"M": 4097, "N": 50257}, "float16"), ("layernorm", {"M": 1000, "N": 12288}, "bfloat16"),
    ("rmsnorm", {"M": 3, "N": 8192}, "float16"),
]
# issue 17: the matmul kernel's best config against cuBLAS (scripts/bench_kernels.py)
KERNEL_GAP = [
    ("matmul", {"M": 3000, "N": 5000, "K": 1000}, "bfloat16"), ("matmul", {"M": 6000, "N": 6000, "K": 6000}, "float16"),
    ("matmul", {"M": 4095, "N": 4095, "K": 4095}, "bfloat16"), ("matmul", {"M": 10000, "N": 2000, "K": 3000}, "float16"),
    ("matmul", {"M": 8192, "N": 3072, "K": 1000}, "bfloat16"), ("matmul", {"M": 24, "N": 14336, "K": 4096}, "bfloat16"),
    ("matmul", {"M": 8, "N": 8192, "K": 8192}, "float16"), ("matmul", {"M": 1, "N": 4096, "K": 11008}, "float16"),
    ("matmul", {"M": 64, "N": 2048, "K": 16384}, "bfloat16"),
]
# issue 18: the Helion race, three problems of each Helion kernel with a Triton twin (scripts/bench_helion.py), named
# under the twin's family: the twin's rows train the Helion model too, so a race shape stays out of both kernels' data
# (Helion kernels' plans skip what their twin's name names). The first three of each that the family drew with seed 18
# and neither kernel had rows of, as the race drew them (from the data) in sessions 19 and 20 (data f5d81052b4506aa7)
HELION_RACE = [
    ("matmul", {"M": 3468, "N": 4713, "K": 749}, "float16"), ("matmul", {"M": 4155, "N": 4096, "K": 4476}, "bfloat16"),
    ("matmul", {"M": 3404, "N": 5120, "K": 5079}, "float16"), ("softmax", {"M": 64, "N": 2560}, "float16"),
    ("softmax", {"M": 11365, "N": 6000}, "bfloat16"), ("softmax", {"M": 64, "N": 3072}, "float16"),
    ("layernorm", {"M": 11306, "N": 10912}, "float16"), ("layernorm", {"M": 4096, "N": 2048}, "bfloat16"),
    ("layernorm", {"M": 13911, "N": 12466}, "float16"), ("rmsnorm", {"M": 11306, "N": 10912}, "float16"),
    ("rmsnorm", {"M": 4096, "N": 2048}, "bfloat16"), ("rmsnorm", {"M": 13911, "N": 12466}, "float16"),
    ("attention", {"B": 4, "H": 16, "S": 2049, "D": 128, "CAUSAL": 0}, "float16"),
    ("attention", {"B": 1, "H": 32, "S": 8192, "D": 128, "CAUSAL": 1}, "bfloat16"),
    ("attention", {"B": 3, "H": 16, "S": 3681, "D": 128, "CAUSAL": 0}, "float16"),
]
NAMED = TUNE_RACE + KERNEL_GAP + HELION_RACE


@cache
def _keys() -> frozenset[tuple[str, str]]:
    return frozenset((family, canonical_json(problem)) for family, problem, _ in NAMED)


def is_named(family: str, problem: dict) -> bool:
    """Whether ``problem`` of ``family`` is a benchmark's, in any dtype."""
    return (family, canonical_json(problem)) in _keys()


def named_keys() -> frozenset[tuple[str, str]]:
    """(family, problem_json) of every named problem: what a dataset filter compares its rows with."""
    return _keys()
