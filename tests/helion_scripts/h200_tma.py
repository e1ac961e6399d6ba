"""A pytest plugin for scripts/helion140_check.sh: Helion's tensor-descriptor check answers as the H200's does (a
CPU says no, and Helion 1.4.0 then offers block_ptr indexing in place of tensor descriptors: not the H200's space)."""

import helion._compat

helion._compat._supports_tensor_descriptor = lambda: True  # Helion's hook: "call private func we can patch in testing"
