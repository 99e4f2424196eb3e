#!/usr/bin/env python3
"""Builds a large Kineto trace by replicating a real one with shifted timestamps.

    python3 make_large_trace.py OUT.json N [SOURCE_TRACE]

Writes OUT.json (gzip-compressed if OUT ends with .gz): the source trace's top-level fields,
its metadata ("ph": "M") events once, and all its other events N times, copy k shifted by
k * (source span + 1000 us) so that copies follow one another in time. Correlation and
External ids are offset per copy so that CPU-GPU links stay unique. The output is written event
by event; only the (small) source trace is held in memory.

SOURCE_TRACE defaults to the sampled rank-0 trace in smdebug-read/tests/data/pytorch-profiler-traces
(~1.76 MB of JSON, so N=600 gives ~1.05 GB).
"""

import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SOURCE = os.path.join(
    HERE, "../../tests/data/pytorch-profiler-traces/trace_filter__sampled_rank-0.json.gz"
)
ID_STRIDE = 100_000_000


def load(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    out_path, copies = sys.argv[1], int(sys.argv[2])
    doc = load(sys.argv[3] if len(sys.argv) == 4 else DEFAULT_SOURCE)
    events = doc["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    period = (end - start) + 1000
    dumps = json.JSONEncoder(separators=(", ", ": ")).encode

    opener = gzip.open if out_path.endswith(".gz") else open
    with opener(out_path, "wt", encoding="utf-8") as out:
        out.write("{\n")
        for key, value in doc.items():
            if key != "traceEvents":
                out.write(f"  {json.dumps(key)}: {json.dumps(value)},\n")
        out.write('  "traceEvents": [\n')
        first = True
        for e in meta:
            out.write(("" if first else ",\n") + "    " + dumps(e))
            first = False
        for k in range(copies):
            shift = k * period
            for e in timed:
                e2 = dict(e)
                e2["ts"] = e["ts"] + shift
                if "id" in e2 and isinstance(e2["id"], int):
                    e2["id"] = e2["id"] + k * ID_STRIDE
                args = e.get("args")
                if isinstance(args, dict) and ("correlation" in args or "External id" in args):
                    args = dict(args)
                    for field in ("correlation", "External id"):
                        if isinstance(args.get(field), int):
                            args[field] += k * ID_STRIDE
                    e2["args"] = args
                out.write(("" if first else ",\n") + "    " + dumps(e2))
                first = False
        out.write("\n  ]\n}\n")


if __name__ == "__main__":
    main()
