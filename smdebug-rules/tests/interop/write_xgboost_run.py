"""Writes a run shaped like Python smdebug's XGBoost hook output, with smdebug's own FileWriter.

Usage: write_xgboost_run.py OUT_DIR SPEC_JSON

SPEC_JSON: {"importances": [[...per feature...], ...one list per step],
            "depths": [4, 4, 3, ...one per step],
            "strings": false,
            "split_features": [["f0", "f3", ...], ...one list per step]}

Per step (TRAIN mode, mode step = global step), like ``smdebug.xgboost.Hook``:
  feature_importance/weight/f<i>  scalar, normalised importance of feature i (none when the
                                  step's importances are null)
  trees/Node                      int array, node ids of the tree built at that step (a full
                                  binary tree of the given depth: ids 0 .. 2**(depth+1) - 2)
  with "strings": the tree's string columns, as the hook writes them (numpy str arrays):
  trees/ID                        "<step>-<node id>"
  trees/Feature                   "Leaf" for leaves; for split nodes, the step's
                                  "split_features" in turn (default f0, f1, ...)
  trees/Yes, trees/No             the children's IDs ("" for leaves)
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
    strings = spec.get("strings", False)
    split_features = spec.get("split_features")
    assert len(importances) == len(depths)
    names = set()
    for step, (imp, depth) in enumerate(zip(importances, depths)):
        w = FileWriter(trial_dir=out, worker="worker_0", step=step)
        total = float(sum(imp or []))
        for i, v in enumerate(imp or []):
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
        if strings:
            n = len(nodes)
            inner = [i for i in range(n) if 2 * i + 2 < n]
            chosen = (split_features or [[]] * len(depths))[step]
            feature = {i: (chosen[k % len(chosen)] if chosen else f"f{k}") for k, i in enumerate(inner)}
            columns = {
                "trees/ID": [f"{step}-{i}" for i in range(n)],
                "trees/Feature": [feature.get(i, "Leaf") for i in range(n)],
                "trees/Yes": [f"{step}-{2 * i + 1}" if i in feature else "" for i in range(n)],
                "trees/No": [f"{step}-{2 * i + 2}" if i in feature else "" for i in range(n)],
            }
            for name, column in columns.items():
                w.write_tensor(
                    tdata=np.array(column), tname=name, mode=ModeKeys.TRAIN, mode_step=step
                )
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
