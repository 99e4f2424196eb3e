"""What Python's `re` and Python smdebug make of collection and rule patterns.

    python_regex.py search          stdin: {"patterns": [...], "names": [...]}
        prints {"results": {pattern: [bool per name] | {"error": msg}}}: `re.search` per pair,
        which is how smdebug matches include_regex (core.utils.match_inc) and rule regexes.

    python_regex.py hook-run RUN FRAMEWORK NAME...
        writes RUN the way a Python smdebug hook of FRAMEWORK (pytorch, xgboost, mxnet)
        would: that hook's own CollectionManager (its default collections and their
        include_regex, loaded from smdebug's source without the framework installed) exported
        as worker_0's collections file, one TRAIN step 0 holding a 0-d float32 tensor per NAME,
        and the end marker. Then opens RUN with smdebug's Trial and prints
        {"collections": {name: sorted trial.tensor_names(collection=name)}}.

The JSON is the last line of stdout (smdebug logs there too). Exit status 0 on success, 2 on
usage errors.
"""

import importlib.util
import json
import os
import re
import sys

USAGE = __doc__


def search(spec):
    results = {}
    for pattern in spec["patterns"]:
        try:
            compiled = re.compile(pattern)
        except re.error as e:
            results[pattern] = {"error": str(e)}
            continue
        results[pattern] = [compiled.search(name) is not None for name in spec["names"]]
    return {"results": results}


def framework_collection_manager(framework):
    """The hook's CollectionManager class, from smdebug/<framework>/collection.py. Those modules
    import only smdebug.core; importing them by file skips the package __init__, which imports
    the framework itself."""
    import smdebug

    path = os.path.join(os.path.dirname(smdebug.__file__), framework, "collection.py")
    spec = importlib.util.spec_from_file_location(f"_smdebug_{framework}_collection", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CollectionManager


def hook_run(run, framework, names):
    import numpy as np
    from smdebug.core.access_layer.utils import training_has_ended
    from smdebug.core.modes import ModeKeys
    from smdebug.core.writer import FileWriter
    from smdebug.trials import create_trial

    manager = framework_collection_manager(framework)()
    manager.set_num_workers(1)
    manager.export(run, "worker_0_collections.json")
    writer = FileWriter(trial_dir=run, worker="worker_0", step=0)
    for name in names:
        writer.write_tensor(
            tdata=np.array(1.0, dtype=np.float32), tname=name, mode=ModeKeys.TRAIN, mode_step=0
        )
    writer.close()
    training_has_ended(run)

    trial = create_trial(run)
    return {
        "collections": {
            c: sorted(trial.tensor_names(collection=c)) for c in sorted(trial.collections())
        }
    }


def main(argv):
    if len(argv) == 2 and argv[1] == "search":
        out = search(json.load(sys.stdin))
    elif len(argv) >= 4 and argv[1] == "hook-run":
        out = hook_run(argv[2], argv[3], argv[4:])
    else:
        print(USAGE, file=sys.stderr)
        return 2
    # smdebug logs to stdout: the answer goes on a line of its own, last.
    print()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
