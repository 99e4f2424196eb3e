#!/usr/bin/env python3
"""Independent reference computation of the Kineto trace summary figures.

Reads each Chrome-trace file whole with the standard library (json + gzip), computes the figures
defined in smdebug-profiler's kineto module documentation, and writes one JSON file per trace
into an output directory, named after the trace with `.json.gz`/`.json` replaced by `.json`.

    python3 expected_figures.py OUT_DIR TRACE...

Definitions (microseconds):
  * only events with "ph" == "X" count; a missing/non-numeric "ts" skips the event; a missing
    "dur" is 0; a negative "dur" skips the event.
  * span_us = max(ts + dur) - min(ts) over counted events of any category.
  * tables per category: kernel, gpu_memcpy, gpu_memset, cpu_op, user_annotation; per name
    count, total, mean, min, max, share = total / category total; sorted by total descending,
    then name ascending.
  * GPU activity = kernel, gpu_memcpy, gpu_memset events; device = args.device, else pid.
    Per device: busy = length of the union of [ts, ts + dur] intervals (overlapping or touching
    intervals merge), idle = (last end - first start) - busy. Totals sum over devices in
    ascending device order.
  * rank = distributedInfo.rank, else N from "rank-N"/"rank_N" in the file name, else 0.
"""

import gzip
import json
import os
import re
import sys

TABLES = {
    "kernel": "gpu_kernels",
    "gpu_memcpy": "gpu_memcpy",
    "gpu_memset": "gpu_memset",
    "cpu_op": "cpu_operators",
    "user_annotation": "user_annotations",
}
TOTALS = {
    "kernel": "gpu_kernel_total_us",
    "gpu_memcpy": "gpu_memcpy_total_us",
    "gpu_memset": "gpu_memset_total_us",
    "cpu_op": "cpu_operator_total_us",
    "user_annotation": "user_annotation_total_us",
}
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def load(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def as_number(v):
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def as_int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def rank_of(doc, path):
    info = doc.get("distributedInfo") if isinstance(doc, dict) else None
    if isinstance(info, dict) and "rank" in info:
        r = info["rank"]
        if isinstance(r, str) and r.strip().isdigit():
            return int(r.strip())
        r = as_int(r)
        if r is not None and r >= 0:
            return r
    found = re.findall(r"rank[-_](\d+)", os.path.basename(path))
    return int(found[-1]) if found else 0


def table(durations_by_name, category_total):
    rows = []
    for name, durs in durations_by_name.items():
        total = 0.0
        for d in durs:
            total += d
        rows.append(
            {
                "name": name,
                "count": len(durs),
                "total_us": total,
                "mean_us": total / len(durs),
                "min_us": min(durs),
                "max_us": max(durs),
                "share": total / category_total if category_total > 0 else 0.0,
            }
        )
    rows.sort(key=lambda r: (-r["total_us"], r["name"]))
    return rows


def union_length(intervals):
    intervals = sorted(intervals)
    busy = 0.0
    merged = []
    for s, e in intervals:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    for s, e in merged:
        busy += e - s
    return busy, len(merged)


def summarize(path):
    doc = load(path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    by_cat = {c: {} for c in TABLES}
    cat_total = {c: 0.0 for c in TABLES}
    gpu = {}
    start, end = None, None
    complete = skipped = 0
    for ev in events:
        if ev.get("ph") != "X":
            continue
        ts = as_number(ev.get("ts"))
        dur = as_number(ev.get("dur")) if "dur" in ev and ev["dur"] is not None else 0.0
        if ts is None or dur is None or dur < 0:
            skipped += 1
            continue
        complete += 1
        start = ts if start is None else min(start, ts)
        end = ts + dur if end is None else max(end, ts + dur)
        cat = ev.get("cat")
        if cat in TABLES:
            name = ev.get("name") if isinstance(ev.get("name"), str) else ""
            by_cat[cat].setdefault(name, []).append(dur)
            cat_total[cat] += dur
        if cat in GPU_CATS:
            args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            device = as_int(args.get("device"))
            if device is None:
                device = as_int(ev.get("pid"))
            if device is None:
                device = -1
            gpu.setdefault(device, []).append((ts, ts + dur))
    devices = []
    for device in sorted(gpu):
        ivs = gpu[device]
        busy, n = union_length(ivs)
        span = max(e for _, e in ivs) - min(s for s, _ in ivs)
        devices.append(
            {
                "device": device,
                "span_us": span,
                "busy_us": busy,
                "idle_us": span - busy,
                "busy_intervals": n,
            }
        )
    out = {
        "rank": rank_of(doc, path),
        "span_us": (end - start) if start is not None else 0.0,
        "gpu_busy_us": sum(d["busy_us"] for d in devices),
        "gpu_idle_us": sum(d["idle_us"] for d in devices),
    }
    for cat, key in TABLES.items():
        out[key] = table(by_cat[cat], cat_total[cat])
    for cat, key in TOTALS.items():
        out[key] = cat_total[cat]
    out["gpu_devices"] = devices
    out["event_count"] = len(events)
    out["complete_event_count"] = complete
    out["skipped_event_count"] = skipped
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for path in sys.argv[2:]:
        base = os.path.basename(path)
        for suffix in (".json.gz", ".json"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
        with open(os.path.join(out_dir, base + ".json"), "w") as f:
            json.dump(summarize(path), f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
