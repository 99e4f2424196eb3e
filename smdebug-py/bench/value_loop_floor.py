"""How fast smdebug_rs's ``value(step)`` loop can get: the loop of bench_vs_smdebug.py, timed as
it is and after one ``values()`` call has mapped every event file ahead of it.

    python smdebug-py/bench/value_loop_floor.py RUN [--premapped]

The difference is what read-ahead of the mappings could save; what is left with every file
mapped is the per-value cost (lookup, decode, a new writable numpy array, the call itself).
"""

import argparse
import time

from smdebug_rs.trials import create_trial


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--premapped", action="store_true", help="map every file first (untimed)")
    args = ap.parse_args()
    trial = create_trial(args.run)
    names = trial.tensor_names()
    if args.premapped:
        trial.tensor(names[0]).values()
    wall, cpu = time.perf_counter(), time.process_time()
    arrays = []
    for name in names:
        t = trial.tensor(name)
        for step in t.steps():
            arrays.append(t.value(step))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    label = "every file mapped first" if args.premapped else "as bench_vs_smdebug.py"
    print(f"value(step) loop, {len(arrays)} values, {label}: {wall:.3f} s (cpu {cpu:.3f} s)")


if __name__ == "__main__":
    main()
