"""Writes a run shaped like Python smdebug's XGBoost hook output, with smdebug's own FileWriter.

Usage: write_xgboost_run.py OUT_DIR SPEC_JSON

SPEC_JSON: {"importances": [[...per feature...], ...one list per step],
            "depths": [4, 4, 3, ...one per step]}

Per step (TRAIN mode, mode step = global step), like ``smdebug.xgboost.Hook``:
  feature_importance/weight/f<i>  scalar, normalised importance of feature i
  trees/Node                      int array, node ids of the tree built at that step (a full
                                  binary tree of the given depth: ids 0 .. 2**(depth+1) - 2)
then the collections file and the end marker. Prints "OK: <n> steps".
"""
import json
import os
import sys

import numpy as np
from smdebug.core.collection_manager import CollectionManager
from smdebug.core.modes import ModeKeys
from smdebug.core.writer import FileWriter


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    out, spec = sys.argv[1], json.loads(sys.argv[2])
    importances, depths = spec["importances"], spec["depths"]
    assert len(importances) == len(depths)
    names = set()
    for step, (imp, depth) in enumerate(zip(importances, depths)):
        w = FileWriter(trial_dir=out, worker="worker_0", step=step)
        total = float(sum(imp))
        for i, v in enumerate(imp):
            name = f"feature_importance/weight/f{i}"
            names.add(name)
            w.write_tensor(
                tdata=np.array(v / total, dtype=np.float64),
                tname=name,
                mode=ModeKeys.TRAIN,
                mode_step=step,
            )
        nodes = np.arange(0, 2 ** (depth + 1) - 1, dtype=np.int64)
        w.write_tensor(tdata=nodes, tname="trees/Node", mode=ModeKeys.TRAIN, mode_step=step)
        w.close()
    cm = CollectionManager(create_default=False)
    fi = cm.get("feature_importance")
    fi.include("^feature_importance")
    for n in sorted(names):
        fi.add_tensor_name(n)
    trees = cm.get("trees")
    trees.include("^trees")
    trees.add_tensor_name("trees/Node")
    cm.set_num_workers(1)
    cm.export(out, "worker_0_collections.json")
    open(os.path.join(out, "training_job_end.ts"), "w").close()
    print(f"OK: {len(depths)} steps")


if __name__ == "__main__":
    main()
