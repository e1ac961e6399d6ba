"""Helion kernels as costmodel families (issue 18): the CPU-side foundation.

How a Helion kernel becomes a family
- The kernel is a ``@helion.kernel`` in ``costmodel/helion/kernels.py`` (Helion reads its source, so it lives in a
  file), written after Helion's examples. ``families.HelionFamily`` says what the kernel is: its problems, inputs
  and float32 torch reference (the Triton twin's, where costmodel/kernels/ has one: one fact, one home), and which
  problem extent each block size of its ConfigSpec tiles and each reduction spans (checked against the spec's
  size hints in the tests). Dataset kernel name: ``helion:<name>``.
- Problems: realistic shapes (LLM, decode/skinny, odd sizes) from the twin's generator (SwiGLU: tokens x MLP
  intermediate sizes); none of the problems costmodel/benchmarks.py names (under the twin's name) is drawn.
- Candidates (``families.candidates``): bound on the device that will time them (the spec depends on it: on CPU
  tensors there is no tensor-descriptor indexing, no maxnreg), Helion's ``default_config()`` first, then seed
  configs (a caller's, then the compiler's own, as ``ConfigGeneration.random_population`` puts them), then its
  random population, drawn with a seeded global ``random`` (what Helion draws from) and deduplicated on the
  canonical JSON.
- Configs (``configs.normalise``): one canonical JSON whichever Helion wrote it. Keys a later Helion added
  (``reduction_fusion``, ``host_tensor_descriptors``, ``cross_loop_pipeline``) are dropped at the value meaning
  what 1.4.0 does without them; singular aliases become lists; one-for-all scalars become per-op lists; top-level
  ``None`` is dropped; keys sorted. So 1.4.0 on the H200 and 1.5.1 here write the same ``config_json`` for the
  same config, and 1.4.0 can read back every config that is not 1.5-only (``configs.later_keys``).

Rows in the existing Parquet schema
- ``kernel = "helion:<name>"`` (hive partition ``kernel=helion:<name>``), dims in the same flat ``dim_*`` columns
  as the twin (M, N, K, B, H, S, D, CAUSAL), ``problem_json`` as today, ``config_json`` the canonical config; the
  flat ``cfg_*`` columns stay null (Helion's knobs are lists of per-tile values, not the Triton knobs those
  columns name; features read ``config_json``, see ``features.py`` here).
- ``helion_version``: a nullable string column among the software columns (beside ``triton_version``) of
  dataset.SCHEMA, set by ``measurement_rows`` on Helion rows, null on Triton rows and on every shard written before it
  (the reader's explicit schema fills nulls, so no existing shard or reader breaks). Not in
  ``config_json``: that is the identity of a config within a group (``first_measurements``, resume, replay) and
  must read the same from either version. Not folded into ``triton_version``: it would stop being a version.
- The kernel hash of a Helion family (the group's ``source_hash``, ``HelionFamily.kernel_hash``) covers the
  kernel's source (its definition in kernels.py, decorator included) and the Helion version: the same config
  compiles to different Triton code under 1.4 and 1.5, so their timings are different groups, while features read
  both alike.

Collecting (``costmodel collect --kernel helion:<name>``)
- ``collect.plan.helion_plan``: problems from the family, configs from ``families.candidates`` of the kernel bound
  on the timing device; a ground-truth group takes a random population of ``HELION_SWEEP`` (1,000) configs.
- ``benchmark.IsolatedBenchmarker`` compiles each config ahead in its compile pool, as a Triton family's: the
  benchmarker's process binds the group's kernel on the device, as the timing worker does, and in a thread has
  Helion generate each config's code and captures its Triton launch (``launch.py``: Helion's ``_launcher``
  keyword; about 30 ms a config), which a pool process compiles on meta tensors into Triton's on-disk cache. The
  timing worker then binds the kernel once per group, compiles each config by Helion's ``compile_config`` (its
  first call loads the pool's binary), checks its output against the family's reference, then runs the same
  timing functions as a Triton family's; a config whose launch could not be captured compiles there, at its first
  call, as before. Under ``HELION_INTERPRET=1``
  (Helion's reference mode: eager torch on CPU tensors, the config ignored; not beside TRITON_INTERPRET=1) rows go
  to ``gpu=interpreter`` like Triton interpreter rows, and no model trains on them.

Importing this package does not import helion; ``kernels`` and ``families.candidates`` do (13 s on the 2-core
CPU machine). ``available()`` says whether it imports.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util


def available() -> bool:
    """Whether helion is installed (its import is slow: this only looks)."""
    return importlib.util.find_spec("helion") is not None


def helion_version() -> str | None:
    """The installed Helion's version (helion has no ``__version__``), or None."""
    try:
        return importlib.metadata.version("helion")
    except importlib.metadata.PackageNotFoundError:
        return None
