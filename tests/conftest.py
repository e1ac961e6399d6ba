import os

# Kernels run on CPU tensors through Triton's interpreter in CI; must be set before kernels are decorated.
if not os.environ.get("COSTMODEL_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest


def has_cuda() -> bool:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return False
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run with COSTMODEL_TEST_GPU=1 on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
