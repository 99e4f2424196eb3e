"""Reads a run directory with Python smdebug's profiler readers and prints what they see as JSON.

Usage: smdebug_readers.py read RUN_DIR
       smdebug_readers.py count RUN_DIR   (how many system records, framework spans and tensor
                                           records - raw values and saved reductions, every
                                           worker - smdebug's readers return)
       smdebug_readers.py write RUN_DIR   (writes a pythontimeline file with smdebug's own writer)
"""
import json
import logging
import os
import sys
import time
import types

logging.disable(logging.CRITICAL)

from smdebug.core.tfevent.timeline_file_writer import TimelineFileWriter  # noqa: E402
from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader  # noqa: E402
from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader  # noqa: E402


def read(run):
    end_us = int(time.time() * 1e6) + 3600 * 1_000_000
    system = LocalSystemMetricsReader(run).get_events(0, end_us)
    framework = LocalAlgorithmMetricsReader(run).get_events(0, end_us)
    print(json.dumps({
        "system": [[e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp] for e in system],
        "framework": [
            [e.event_phase, e.event_name, int(e.start_time), int(e.end_time), e.node_id,
             (e.event_args or {}).get("step_num")]
            for e in framework
        ],
    }))


def count(run):
    from smdebug.exceptions import TensorUnavailableForStep
    from smdebug.trials import create_trial

    end_us = int(time.time() * 1e6) + 3600 * 1_000_000
    system = LocalSystemMetricsReader(run).get_events(0, end_us)
    framework = LocalAlgorithmMetricsReader(run).get_events(0, end_us)
    trial = create_trial(run)
    tensors = 0
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        for step in tensor.steps():
            for worker in tensor.workers(step):
                try:
                    tensor.value(step, worker=worker)
                    tensors += 1
                except TensorUnavailableForStep:
                    pass  # saved as reductions only
                tensors += len(tensor.reduction_values(step, worker=worker))
    print(json.dumps({"system": len(system), "framework": len(framework), "tensors": tensors}))


def write(run):
    # The writer wants a profiler-config parser; these are the only fields it reads.
    rotation = types.SimpleNamespace(file_close_interval=60, file_max_size=10 * 1024 * 1024)
    trace_file = types.SimpleNamespace(rotation_policy=rotation, file_open_fail_threshold=50)
    parser = types.SimpleNamespace(
        profiling_enabled=True,
        config=types.SimpleNamespace(local_path=run, trace_file=trace_file),
    )
    writer = TimelineFileWriter(profiler_config_parser=parser)
    start = time.time()
    expected = []
    for step in range(4):
        for phase, offset, duration in (("Step:ModeKeys.TRAIN", 0.0, 0.008), ("Forward", 0.001, 0.003)):
            ts = start + step * 0.01 + offset
            writer.write_trace_events(
                timestamp=ts, training_phase=phase, op_name=phase.lower(), duration=duration,
                pid=os.getpid(), step_num=str(step),
            )
            start_us = int(ts * 1e6)
            expected.append([phase, phase.lower(), start_us, start_us + int(duration * 1e6), step])
    writer.flush()
    writer.close()
    print(json.dumps(expected))


if __name__ == "__main__":
    {"read": read, "count": count, "write": write}[sys.argv[1]](sys.argv[2])
