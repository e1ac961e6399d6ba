"""Under another Helion (PYTHONPATH), for each kernel: the canonical JSON of its default config, and for each config
JSON given (canonical configs another Helion drew) whether this Helion's ConfigSpec accepts it and leaves its
canonical form unchanged. Prints one JSON object."""

import copy
import importlib.metadata
import json
import sys

from costmodel.helion import configs, families

PROBLEMS, GIVEN = json.loads(sys.argv[1]), json.loads(open(sys.argv[2]).read())
out = {"version": importlib.metadata.version("helion"), "kernels": {}}
for name, problem in PROBLEMS.items():
    bound, _ = families.get(name).bind(problem, "float16")
    spec = bound.config_spec
    counts = families.op_counts(spec)
    res = []
    for c in GIVEN[name]:
        d = copy.deepcopy(c)
        try:
            spec.normalize(d)
            res.append(configs.normalise(d, counts) == c)
        except Exception as e:  # noqa: BLE001 - reported, the test decides
            res.append(f"{type(e).__name__}: {e}")
    out["kernels"][name] = {"raw_default": dict(spec.default_config().config),
                            "default": configs.config_json(spec.default_config(), counts), "given": res}
print(json.dumps(out))
