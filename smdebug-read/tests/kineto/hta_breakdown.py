#!/usr/bin/env python3
"""Comparison baseline: Holistic Trace Analysis computing the GPU kernel breakdown.

    pip install HolisticTraceAnalysis
    /usr/bin/time -v python3 hta_breakdown.py TRACE_DIR

Loads every trace in TRACE_DIR with HTA's TraceAnalysis and prints the top kernels of
get_gpu_kernel_breakdown() (last profiler step included) plus the wall time of load and
breakdown.
"""

import sys
import time

from hta.trace_analysis import TraceAnalysis


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    t0 = time.perf_counter()
    # HTA drops the last ProfilerStep by default; keep it so that the figures cover the same
    # events as smdebug-profiler's summary.
    analyzer = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
    t1 = time.perf_counter()
    _, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
    t2 = time.perf_counter()
    top = kernels.sort_values("sum (us)", ascending=False).head(5)
    print(top[["sum (us)", "max (us)", "min (us)", "mean (us)", "rank", "name"]].to_string(max_colwidth=60))
    print(f"load {t1 - t0:.3f} s, breakdown {t2 - t1:.3f} s, total {t2 - t0:.3f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
