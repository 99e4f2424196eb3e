"""How fast smdebug_rs's ``value(step)`` loop can get: the loop of bench_vs_smdebug.py, timed as
it is, after one ``values()`` call has mapped every event file ahead of it, and with numpy's
part alone.

    python smdebug-py/bench/value_loop_floor.py RUN [--premapped | --numpy-only]

The difference between the first two is what read-ahead of the mappings could save; what is
left with every file mapped is the per-value cost (lookup, decode, a new writable numpy array,
the call itself). ``--numpy-only`` runs the same loop making each value's array with
``np.empty`` (its shape and dtype, kept like the values): no reading at all, the part of the
loop no reader can avoid while it returns arrays of their own.
"""

import argparse
import time

import numpy as np

from smdebug_rs.trials import create_trial


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--premapped", action="store_true", help="map every file first (untimed)")
    how.add_argument("--numpy-only", action="store_true", help="np.empty instead of value(step)")
    args = ap.parse_args()
    trial = create_trial(args.run)
    names = trial.tensor_names()
    if args.premapped:
        trial.tensor(names[0]).values()
    first = {}
    if args.numpy_only:
        for name in names:
            t = trial.tensor(name)
            v = t.value(t.steps()[0])
            first[name] = (v.shape, v.dtype)
    wall, cpu = time.perf_counter(), time.process_time()
    arrays = []
    for name in names:
        t = trial.tensor(name)
        if args.numpy_only:
            shape, dtype = first[name]
            for step in t.steps():
                arrays.append(np.empty(shape, dtype))
        else:
            for step in t.steps():
                arrays.append(t.value(step))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if args.premapped:
        label = "every file mapped first"
    elif args.numpy_only:
        label = "np.empty only, no reading"
    else:
        label = "as bench_vs_smdebug.py"
    print(f"value(step) loop, {len(arrays)} values, {label}: {wall:.3f} s (cpu {cpu:.3f} s)")


if __name__ == "__main__":
    main()
