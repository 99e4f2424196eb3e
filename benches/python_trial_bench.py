#!/usr/bin/env python3
"""The Python side of the Trial comparison: `python3 benches/python_trial_bench.py DIR`.

Times, with Python smdebug 1.0.34, opening the run and listing its steps and tensor names
(create_trial + steps() + tensor_names()), then reading every value of every tensor; wall
time and the process's CPU time (the fairer figure on a loaded machine), as trial_bench prints.
The Rust side is `cargo run --release -p smdebug-benches --bin trial_bench -- DIR`.
"""
import os
import sys
import time

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")
from smdebug.trials import create_trial  # noqa: E402

run = sys.argv[1]
c0 = time.process_time()
t0 = time.perf_counter()
trial = create_trial(run)
steps = trial.steps()
names = trial.tensor_names()
open_list = time.perf_counter() - t0
open_cpu = time.process_time() - c0

c1 = time.process_time()
t1 = time.perf_counter()
values = 0
checksum = 0.0
for name in names:
    t = trial.tensor(name)
    for step in t.steps():
        checksum += float(t.value(step).sum())
        values += 1
read_all = time.perf_counter() - t1
read_cpu = time.process_time() - c1
print(
    f"python smdebug: open+list {len(steps)} steps, {len(names)} tensors: {open_list:.3f} s "
    f"(cpu {open_cpu:.2f} s); read {values} values: {read_all:.3f} s (cpu {read_cpu:.2f} s, "
    f"sum {checksum:.6e})"
)
