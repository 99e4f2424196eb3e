#!/usr/bin/env python3
"""Side by side in one Python process: Python smdebug 1.0.34 and smdebug_rs on the same run.

    python smdebug-py/bench/bench_vs_smdebug.py RUN [--repeat N]

Needs a venv with both installed (smdebug==1.0.34, numpy<2, protobuf==3.20.3, and smdebug-rs
built in release: ``pip install ./smdebug-py``). Times, for each reader, the same two phases as
benches/python_trial_bench.py:

- open + list: create_trial(RUN), steps(), tensor_names();
- read every value: tensor(name).value(step) for every tensor and step, summed with numpy
  (so the numpy conversion is included); for smdebug_rs also Tensor.values() per tensor.

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


def open_and_list(create_trial, run):
    t0 = time.perf_counter()
    trial = create_trial(run)
    steps = trial.steps()
    names = trial.tensor_names()
    return time.perf_counter() - t0, trial, len(steps), names


def read_every_value(trial, names):
    t0 = time.perf_counter()
    values, checksum = 0, 0.0
    for name in names:
        t = trial.tensor(name)
        for step in t.steps():
            checksum += float(t.value(step).sum())
            values += 1
    return time.perf_counter() - t0, values, checksum


def read_values_per_tensor(trial, names):
    t0 = time.perf_counter()
    values, checksum = 0, 0.0
    for name in names:
        for v in trial.tensor(name).values().values():
            checksum += float(v.sum())
            values += 1
    return time.perf_counter() - t0, values, checksum


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
            row = best.setdefault(label, {"open": t_open, "read": t_read})
            row["open"] = min(row["open"], t_open)
            row["read"] = min(row["read"], t_read)
            row.update(steps=n_steps, tensors=len(names), values=n_values, sum=total)
            if label == "smdebug_rs":
                t_values, n2, total2 = read_values_per_tensor(trial, names)
                assert n2 == n_values and total2 == total, (n2, n_values, total2, total)
                row["values()"] = min(row.get("values()", t_values), t_values)
    sm, rs = best["smdebug 1.0.34"], best["smdebug_rs"]
    assert (sm["steps"], sm["tensors"], sm["values"]) == (rs["steps"], rs["tensors"], rs["values"])
    assert sm["sum"] == rs["sum"], (sm["sum"], rs["sum"])
    print(f"{rs['steps']} steps, {rs['tensors']} tensors, {rs['values']} values (sums agree: {rs['sum']:.6e})")
    print("| phase | smdebug 1.0.34 | smdebug_rs | speed-up |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| open + list | {sm['open']:.3f} s | {rs['open'] * 1e3:.1f} ms | {sm['open'] / rs['open']:.0f}x |")
    print(f"| read every value, value(step) | {sm['read']:.3f} s | {rs['read'] * 1e3:.1f} ms | {sm['read'] / rs['read']:.0f}x |")
    print(f"| read every value, values() | (same loop) | {rs['values()'] * 1e3:.1f} ms | {sm['read'] / rs['values()']:.0f}x |")


if __name__ == "__main__":
    main()
