"""What a CPU ranks and climbs for a race row's problem, Helion's device checks answered as the H200's or not.

  rank_as_h200.py ROWS INDEX h200|cpu     the INDEX-th row of the race rows file ROWS

Prints one JSON line: Helion's version, the kernel's default config and the compiler's seed heuristics that fired,
the tuner's candidates (how many, how many hold maxnreg) and dropped count, the first k ranked, the climb's record
and configs (canonical JSON), to set beside what the row's H200 tune recorded. In a process of its own: the
answers hold for the whole process, and Helion keeps a bound kernel's ConfigSpec."""

import json
import sys
import warnings

from costmodel.hardware import KNOWN
from costmodel.helion import configs, families, helion_version
from costmodel.helion import model as helion_model
from costmodel.helion.target import answer_as

if __name__ == "__main__":
    rows, index, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "h200":
        answer_as(KNOWN["nvidia-h200"])
    warnings.simplefilter("ignore")
    from tuner.helion import Call, CostModelAutotuner, climb

    row = json.loads(open(rows).read().splitlines()[index])
    cm = helion_model.load(row["gpu"])
    bound, args = families.get(row["kernel"].removeprefix("helion:")).bind(row["problem"], row["dtype"])
    tuner = CostModelAutotuner(gpu=cm.gpu)
    ranked, default = tuner.ranked(cm, bound, args)
    got, record = climb(tuner, cm, bound, Call.of(bound, args), ranked)
    print(json.dumps({"helion": helion_version(), "default": configs.config_json(default),
                      "heuristics": list(getattr(bound.env.config_spec, "autotuner_heuristics", None) or []),
                      "candidates": len(ranked), "with_maxnreg": sum("maxnreg" in c for c in ranked),
                      "dropped": tuner.dropped, "top": [configs.config_json(c) for c in ranked[: tuner.k]],
                      "climb": record, "climbed": [configs.config_json(c) for c in got]}))
