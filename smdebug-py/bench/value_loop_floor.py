"""Where the time of smdebug_rs's ``value(step)`` loop goes: the loop of bench_vs_smdebug.py,
timed as it is, with every event file in memory first, and with numpy's part alone.

    python smdebug-py/bench/value_loop_floor.py RUN [--kept | --numpy-only] [--no-read-ahead] [--tensor-per-call] [--only NAME]

``--kept`` reads every value twice first (untimed; a file read a second time stays kept), so the
timed loop reads no file: what is left is the per-value cost (lookup, checks, decode, a new
writable numpy array, the call itself). ``--numpy-only`` runs the same loop making each value's
array with ``np.empty`` (its shape and dtype, kept like the values): no reading at all.
``--no-read-ahead`` opens the trial with ``read_ahead=False``. ``--only NAME`` reads one tensor
instead of every one (the loop of a notebook that plots one tensor). ``--tensor-per-call`` runs the
loop as issue 37 writes it, ``for n in names: for s in steps: trial.tensor(n).value(s)`` (the
``Tensor`` looked up for every value). Besides the wall and process CPU
time, the calling thread's own CPU time is printed: with read-ahead, the files are read on other
threads, whose CPU time counts in the process's but not in the caller's (a caller waiting for
values decoded ahead reads with the pool's threads, and that counts in the caller's). The
process's resident memory while it holds the arrays is printed too.
"""

import argparse
import os
import time

import numpy as np

from smdebug_rs.trials import create_trial


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--kept", action="store_true", help="every file in memory first (untimed)")
    how.add_argument("--numpy-only", action="store_true", help="np.empty instead of value(step)")
    ap.add_argument("--no-read-ahead", action="store_true", help="create_trial(read_ahead=False)")
    ap.add_argument("--tensor-per-call", action="store_true", help="trial.tensor(n).value(s) each time")
    ap.add_argument("--only", metavar="NAME", help="read this tensor only")
    args = ap.parse_args()
    trial = create_trial(args.run, read_ahead=not args.no_read_ahead)
    names = [args.only] if args.only else trial.tensor_names()
    if args.kept:
        for _ in range(2):
            for name in names:
                trial.tensor(name).values()
    first = {}
    if args.numpy_only:
        for name in names:
            t = trial.tensor(name)
            v = t.value(t.steps()[0])
            first[name] = (v.shape, v.dtype)
    wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
    arrays = []
    for name in names:
        t = trial.tensor(name)
        if args.numpy_only:
            shape, dtype = first[name]
            for step in t.steps():
                arrays.append(np.empty(shape, dtype))
        elif args.tensor_per_call:
            for step in t.steps():
                arrays.append(trial.tensor(name).value(step))
        else:
            for step in t.steps():
                arrays.append(t.value(step))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    own = time.thread_time() - own
    rss_mib = resident_mib()
    if args.kept:
        label = "every file in memory first"
    elif args.numpy_only:
        label = "np.empty only, no reading"
    else:
        label = "as bench_vs_smdebug.py"
    if args.tensor_per_call:
        label += ", trial.tensor(name) per value"
    if args.only:
        label += f", {args.only} only"
    if args.no_read_ahead:
        label += ", read_ahead=False"
    print(
        f"value(step) loop, {len(arrays)} values, {label}: {wall:.3f} s "
        f"(cpu {cpu:.3f} s, the calling thread's {own:.3f} s; resident {rss_mib} MiB holding them)"
    )


def resident_mib():
    """The process's resident memory (Linux), MiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20


if __name__ == "__main__":
    main()
