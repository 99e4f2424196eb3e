"""What Python smdebug 1.0.34 makes of hook-config files (`debughookconfig.json`).

    hook_config.py STEPS FILE...

For each FILE, runs smdebug's own `json_config.py` readers the way `create_hook_from_json_config`
does (`get_json_config_as_dict`, `collect_hook_config_params`, the hook's save config from
`SaveConfig.from_dict`, `get_include_collections`, the `default` collection's include_regex as
`BaseHook.__init__` adds it, then `add_collections_to_manager` on a plain `CollectionManager`),
without a framework, and prints one JSON object on the last line of stdout:

    {FILE: {"out_dir", "save_all", "include_workers", "export_tensorboard", "tensorboard_dir",
            "include_collections": [names] | null,
            "hook": {"save": {MODE: [steps saved among STEPS]}, "reductions": R},
            "collections": {NAME: {"save": {MODE: [...]}, "reductions": R,
                                   "include_regex": [...], "save_histogram": bool}}}
     | {"error": message}}

STEPS is a comma-separated list of mode steps. R is null (the whole tensor) or
{"save_raw_tensor", "save_shape", "reductions": sorted names as in tensor names: "mean",
"abs_mean", "l2", "abs_l1"}. A collection's "save" is its own schedule, or the hook's when it
has none. Exit status 0 on success, 2 on usage errors.
"""

import json
import sys


def reductions(rc):
    if rc is None:
        return None
    names = list(rc.reductions) + list(rc.norms)
    names += ["abs_" + r for r in rc.abs_reductions] + ["abs_" + n for n in rc.abs_norms]
    return {
        "save_raw_tensor": rc.save_raw_tensor,
        "save_shape": rc.save_shape,
        "reductions": sorted(names),
    }


def schedule(save_config, steps):
    from smdebug.core.modes import ModeKeys

    return {
        mode.name: [s for s in steps if save_config.should_save_step(mode, s)] for mode in ModeKeys
    }


def read(path, steps):
    from smdebug import SaveConfig
    from smdebug.core.collection_manager import CollectionManager
    from smdebug.core.json_config import (
        add_collections_to_manager,
        collect_hook_config_params,
        get_include_collections,
        get_json_config_as_dict,
    )

    params_dict = get_json_config_as_dict(json_config_path=path)
    hook_params = collect_hook_config_params(params_dict)
    hook_save = SaveConfig.from_dict(hook_params.get("save_config_modes"), None)
    manager = CollectionManager()
    if hook_params.get("include_regex") is not None:
        manager.get("default").include(hook_params["include_regex"])
    add_collections_to_manager(manager, params_dict, hook_params)
    include = get_include_collections(params_dict)
    collections = {}
    for name, coll in manager.get_collections().items():
        collections[name] = {
            "save": schedule(coll.save_config or hook_save, steps),
            "reductions": reductions(coll.reduction_config),
            "include_regex": list(coll.include_regex),
            "save_histogram": coll.save_histogram,
        }
    return {
        "out_dir": hook_params["out_dir"],
        "save_all": hook_params.get("save_all", False),
        "include_workers": hook_params.get("include_workers", "one"),
        "export_tensorboard": hook_params["export_tensorboard"],
        "tensorboard_dir": hook_params["tensorboard_dir"],
        "include_collections": include,
        "hook": {
            "save": schedule(hook_save, steps),
            "reductions": reductions(hook_params.get("reduction_config")),
        },
        "collections": collections,
    }


def main(argv):
    if len(argv) < 3:
        print(USAGE, file=sys.stderr)
        return 2
    steps = [int(s) for s in argv[1].split(",")]
    out = {}
    for path in argv[2:]:
        try:
            out[path] = read(path, steps)
        except Exception as e:  # smdebug raises several kinds; report them per file
            out[path] = {"error": f"{type(e).__name__}: {e}"}
    print()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
