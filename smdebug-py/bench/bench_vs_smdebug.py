#!/usr/bin/env python3
"""Side by side in one Python process: Python smdebug 1.0.34 and smdebug_rs on the same run.

    python smdebug-py/bench/bench_vs_smdebug.py RUN [--repeat N]

Needs a venv with both installed (smdebug==1.0.34, numpy<2, protobuf==3.20.3, and smdebug-rs
built in release: ``pip install ./smdebug-py``). Times, for each reader, the same two phases as
benches/python_trial_bench.py:

- open + list: create_trial(RUN), steps(), tensor_names();
- read every value: tensor(name).value(step) for every tensor and step, each a numpy array
  (the conversion is included); then, on a new trial, Tensor.values() per tensor, for both
  readers (smdebug's values() is its value(step) loop). The arrays are summed after the clock stops, and the sums
  of both readers must agree.

Every file of the run is read once first, so both readers start with a warm page cache. The
best of --repeat runs (default 3) is reported; the sums must agree, or the script fails.
"""

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")
os.environ.setdefault("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0")

from smdebug.trials import create_trial as sm_create_trial  # noqa: E402

from smdebug_rs.trials import create_trial as rs_create_trial  # noqa: E402


class Clock:
    """Wall time and this process's CPU time (the fairer figure on a loaded machine)."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self):
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def open_and_list(create_trial, run):
    clock = Clock()
    trial = create_trial(run)
    steps = trial.steps()
    names = trial.tensor_names()
    return clock.stop(), trial, len(steps), names


def read_every_value(trial, names):
    clock = Clock()
    arrays = []
    for name in names:
        t = trial.tensor(name)
        for step in t.steps():
            arrays.append(t.value(step))
    elapsed = clock.stop()
    return elapsed, len(arrays), sum(float(a.sum()) for a in arrays)


def read_values_per_tensor(trial, names):
    clock = Clock()
    arrays = []
    for name in names:
        arrays.extend(trial.tensor(name).values().values())
    elapsed = clock.stop()
    return elapsed, len(arrays), sum(float(a.sum()) for a in arrays)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    size = sum(len(f.read_bytes()) for f in Path(args.run).rglob("*") if f.is_file())
    print(f"run {args.run}: {size / 2**20:.0f} MiB (page cache warmed)")

    best = {}
    for _ in range(args.repeat):
        for label, create in (("smdebug 1.0.34", sm_create_trial), ("smdebug_rs", rs_create_trial)):
            t_open, trial, n_steps, names = open_and_list(create, args.run)
            t_read, n_values, total = read_every_value(trial, names)
            phases = {"open": t_open, "read": t_read}
            # Both readers' Tensor.values() too (smdebug's is its value(step) loop inside), on a
            # trial of its own: on the trial the loop above read, smdebug_rs's values() would
            # find what the loop left in memory.
            del trial
            _, trial, _, _ = open_and_list(create, args.run)
            t_values, n2, total2 = read_values_per_tensor(trial, names)
            assert n2 == n_values and total2 == total, (n2, n_values, total2, total)
            phases["values()"] = t_values
            row = best.setdefault(label, {})
            for phase, (wall, cpu) in phases.items():
                old = row.get(phase, (float("inf"), float("inf")))
                row[phase] = (min(old[0], wall), min(old[1], cpu))
            row.update(steps=n_steps, tensors=len(names), values=n_values, sum=total)
    sm, rs = best["smdebug 1.0.34"], best["smdebug_rs"]
    assert (sm["steps"], sm["tensors"], sm["values"]) == (rs["steps"], rs["tensors"], rs["values"])
    assert sm["sum"] == rs["sum"], (sm["sum"], rs["sum"])
    print(f"{rs['steps']} steps, {rs['tensors']} tensors, {rs['values']} values (sums agree: {rs['sum']:.6e})")
    print("| phase | smdebug 1.0.34 wall (CPU) | smdebug_rs wall (CPU) | speed-up wall (CPU) |")
    print("| --- | ---: | ---: | ---: |")
    rows = [("open + list", "open", "open"), ("read every value, value(step)", "read", "read"),
            ("read every value, values()", "values()", "values()")]
    for title, sm_phase, rs_phase in rows:
        (sw, sc), (rw, rc) = sm[sm_phase], rs[rs_phase]
        print(f"| {title} | {sw:.2f} s ({sc:.2f} s) | {rw:.3f} s ({rc:.3f} s) | {sw / rw:.0f}x ({sc / rc:.0f}x) |")


if __name__ == "__main__":
    main()
