"""What Python smdebug 1.0.34's ProfilerConfigParser makes of profiler-config files.

    profiler_config.py FILE...     stdin: {"sweeps": [[[step, time], ...], ...], "names": [...]}

For each FILE and each sweep, points SMPROFILER_CONFIG_PATH at FILE, builds a fresh
`ProfilerConfigParser` (so windows without a start settle at the sweep's first point, as they
do at a job's first step), and asks `should_save_metrics(category, step, current_time=time)` at
every point of the sweep, in order, for the detailed, data-loader and Python profiling
categories. Prints one JSON object on the last line of stdout:

    {FILE: {"enabled": profiling_enabled,
            "configs": {CATEGORY: {"enabled": is_enabled(), "error": error_message}},
            "sweeps": [{CATEGORY: [bool per point]}],
            "metrics_names": {name: valid_metrics_name(name)},
            "local_path", "file_max_size", "file_close_interval", "file_open_fail_threshold"}}

The last five are null when profiling is disabled. Exit status 0, or 2 on usage errors.
"""

import json
import logging
import os
import sys

CATEGORIES = ("DETAILED_PROFILING", "DATALOADER_PROFILING", "PYTHON_PROFILING")
CONFIGS = {
    "DETAILED_PROFILING": "detailed_profiling_config",
    "DATALOADER_PROFILING": "dataloader_profiling_config",
    "PYTHON_PROFILING": "python_profiling_config",
}


def read(path, sweeps, names):
    from smdebug.profiler.profiler_config_parser import MetricsCategory, ProfilerConfigParser

    os.environ["SMPROFILER_CONFIG_PATH"] = path
    out = {"sweeps": []}
    for sweep in sweeps:
        parser = ProfilerConfigParser()
        answers = {}
        for category in CATEGORIES:
            cat = MetricsCategory[category]
            answers[category] = [
                parser.should_save_metrics(cat, step, current_time=time) for step, time in sweep
            ]
        out["sweeps"].append(answers)
    parser = ProfilerConfigParser()
    out["enabled"] = parser.profiling_enabled
    config = parser.config
    if config is None:
        out["configs"] = None
        out["metrics_names"] = None
        for key in ("local_path", "file_max_size", "file_close_interval", "file_open_fail_threshold"):
            out[key] = None
        return out
    out["configs"] = {
        category: {
            "enabled": getattr(config, attr).is_enabled(),
            "error": getattr(config, attr).error_message,
        }
        for category, attr in CONFIGS.items()
    }
    dataloader = config.dataloader_profiling_config
    out["metrics_names"] = {
        name: bool(dataloader.is_enabled() and dataloader.valid_metrics_name(name))
        for name in names
    }
    out["local_path"] = config.local_path
    out["file_max_size"] = config.trace_file.rotation_policy.file_max_size
    out["file_close_interval"] = config.trace_file.rotation_policy.file_close_interval
    out["file_open_fail_threshold"] = config.trace_file.file_open_fail_threshold
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    logging.disable(logging.CRITICAL)
    spec = json.load(sys.stdin)
    out = {}
    for path in argv[1:]:
        out[path] = read(path, spec["sweeps"], spec["names"])
    print()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
