"""One canonical JSON for a Helion config, whichever Helion (1.4 or 1.5) emitted it or will read it.

Measured differences (helion 1.4.0 and 1.5.1 wheels, both bound on this repo's kernels on CPU tensors):
- 1.5.1's ConfigSpec emits ``reduction_fusion: false`` for kernels with more than one reduction over one operand
  (softmax and layer_norm here, not rms_norm); 1.4.0 has no such key, and its ``Config(**d)`` (what
  ``Config.from_json`` calls) raises TypeError on it. 1.5.1 also knows ``host_tensor_descriptors`` (default False)
  and ``cross_loop_pipeline`` (default "barrier"), which 1.4.0 lacks. A key of these at its default means what
  1.4.0 does without it, so the canonical form leaves it out; at another value it is a 1.5-only config.
- 1.5.1 accepts ``load_eviction_policies`` as one value for every load (1.4.0 only a list) and any positive
  integer for ``maxnreg`` and ``num_sm_multiplier`` (1.4.0's literals: powers of two; both spaces search those).
  A scalar is expanded to the list both read, given the kernel's number of loads.
- Both accept singular aliases (``block_size``, ``reduction_loop``, ...) for one-entry lists; the canonical form
  has the plural list. A top-level ``None`` is Helion's own default in both (the key absent), so it is dropped.
Everything else they emit on the same kernel is identical (same keys, same list lengths): see
tests/test_helion.py.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from costmodel.dataset import canonical_json
from costmodel.errors import CostModelError

# keys added after Helion 1.4.0, with the value that means what 1.4.0 does without them
LATER_KEYS = {"reduction_fusion": False, "host_tensor_descriptors": False, "cross_loop_pipeline": "barrier"}
# singular forms both versions' ConfigSpec.normalize accept for a one-entry list
ALIASES = {name: f"{name}s" for name in (
    "block_size", "loop_order", "reduction_loop", "l2_grouping", "flatten_loop", "range_unroll_factor",
    "range_warp_specialize", "range_num_stage", "range_multi_buffer", "range_flatten", "static_range")}
# keys that may be one value for every memory op: expanded with the kernel's count of those ops
PER_OP = ("load_eviction_policies", "indexing")


def as_dict(config: Any) -> dict:
    """A plain dict (lists, not tuples) of a ``helion.Config``, a mapping or a JSON string."""
    if isinstance(config, str):
        config = json.loads(config)
    elif hasattr(config, "config") and isinstance(config.config, Mapping):  # helion.Config
        config = config.config
    if not isinstance(config, Mapping):
        raise CostModelError(f"not a Helion config: {config!r}")
    return json.loads(json.dumps(dict(config)))


def normalise(config: Any, op_counts: Mapping[str, int] | None = None) -> dict:
    """The canonical dict of ``config``: aliases made plural lists, ``None`` and later keys at their 1.4 meaning
    dropped, per-op scalars expanded to ``op_counts[key]`` entries. Idempotent."""
    d = as_dict(config)
    for alias, plural in ALIASES.items():
        if alias in d:
            if plural in d:
                raise CostModelError(f"Helion config has both {alias} and {plural}")
            d[plural] = [d.pop(alias)]
    for key in PER_OP:
        if key in d and not isinstance(d[key], list):
            if not op_counts or key not in op_counts:
                raise CostModelError(f"Helion config gives one {key} for all ops; the kernel's count is needed")
            d[key] = [d[key]] * int(op_counts[key])
    return {k: v for k, v in sorted(d.items()) if v is not None and not (k in LATER_KEYS and v == LATER_KEYS[k])}


def config_json(config: Any, op_counts: Mapping[str, int] | None = None) -> str:
    """What a dataset row's ``config_json`` holds for ``config``."""
    return canonical_json(normalise(config, op_counts))


def later_keys(config: Mapping) -> list[str]:
    """Keys of a canonical config that Helion 1.4.0 cannot read (a 1.5-only config)."""
    return sorted(k for k in config if k in LATER_KEYS)
