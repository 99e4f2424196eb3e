#!/usr/bin/env python3
"""Scale figures of `smdebug serve` (BENCHMARKS.md) on the synthetic 1-hour run, and TensorBoard's
time to first scalar on the same run's `tensorboard/` folder, side by side.

    python3 smdebug-serve/examples/scale_bench.py serve SMDEBUG_BINARY RUN [--paint FIRST_PAINT_BIN]
    python3 smdebug-serve/examples/scale_bench.py tensorboard TENSORBOARD_BINARY RUN

A run of other than 100,000 steps: SCALE_BENCH_STEPS=400000.

`serve` starts `SMDEBUG_BINARY serve RUN --port 0`, and from the moment it is started measures:
the time until the first `loss` value is served (time to first scalar), the time until every
step, every system sample and all 50 scalars over every step are served (time to all data
loaded; the last scalar in name order, `metric_49`, complete), the server's resident memory
(VmRSS, sampled every 0.2 s, and the kernel's peak VmHWM) while loading, then the first
meaningful paint in headless Chromium (the `first_paint` example) and the memory after the page
loaded. `tensorboard` starts `tensorboard --logdir RUN/tensorboard` and measures its time to
first scalar (`loss` in the TRAIN run), the time until its `loss` series reaches the last step,
and its memory and CPU time (with its data server's). Standard library only; prints one JSON object.
"""

import json
import re
import subprocess
import sys
import time
import os
import urllib.request

# The run's steps (SCALE_BENCH_STEPS; `synthetic_run DIR STEPS` wrote them): 100,000 by default.
STEPS = int(os.environ.get("SCALE_BENCH_STEPS", "100000"))
LAST_STEP = STEPS - 1
# The synthetic run's system records (36,000 samples of 55 records) and spans (5 a step).
SAMPLES = 36_000 * 55
SPANS = 5 * STEPS
# Give up waiting for all data after this many seconds (SCALE_BENCH_LIMIT_S).
LIMIT_S = float(os.environ.get("SCALE_BENCH_LIMIT_S", "900"))
# Seconds between two polls of either server (SCALE_BENCH_POLL_S): the figures' resolution.
POLL_S = float(os.environ.get("SCALE_BENCH_POLL_S", "0.2"))


def get(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def rss_mb(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    kb = lambda k: int(fields.get(k, "0 kB").split()[0]) / 1024
    return kb("VmRSS"), kb("VmHWM")


def tree(pid):
    """A process and all its descendants still running (TensorBoard's data server is a child)."""
    todo = [pid]
    while todo:
        p = todo.pop()
        yield p
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            pass


def gone_as_zero(measure, pid):
    try:
        return measure(pid)
    except FileNotFoundError:
        return 0.0


def tree_rss_mb(pid):
    """VmRSS of a process and of all its descendants."""
    return sum(gone_as_zero(lambda p: rss_mb(p)[0], p) for p in tree(pid))


def tree_cpu_s(pid):
    """User + system CPU seconds of a process and of all its descendants."""
    return sum(gone_as_zero(cpu_s, p) for p in tree(pid))


def cpu_s(pid):
    """User + system CPU seconds of a process (its threads included) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def serve(binary, run, paint):
    out = {"load_before": uptime()}
    started = time.monotonic()
    proc = subprocess.Popen([binary, "serve", run, "--port", "0", "--read-only"],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        out["url_printed_s"] = round(time.monotonic() - started, 3)
        base = url.rstrip("/")
        peak = 0.0
        first_scalar = None
        while True:
            now = time.monotonic() - started
            rss, _ = rss_mb(proc.pid)
            peak = max(peak, rss)
            runs = get(base + "/api/runs")["runs"][0]
            last = get(base + "/api/runs/0/scalars?regex=%5Emetric_49%24")["scalars"]
            loss = None
            if first_scalar is None:
                loss = get(base + "/api/runs/0/scalars?regex=%5Eloss%24")["scalars"]
                if loss and any(m["total"] > 0 for m in loss[0]["modes"]):
                    first_scalar = now
                    out["first_scalar_s"] = round(now, 3)
            total = sum(m["total"] for m in last[0]["modes"]) if last else 0
            if (runs["steps"] == STEPS and total == STEPS and runs["complete"]
                    and runs["samples"] == SAMPLES and runs["spans"] == SPANS):
                out["all_loaded_s"] = round(now, 3)
                out["cpu_s_loaded"] = round(cpu_s(proc.pid), 2)
                out["samples"] = runs["samples"]
                out["spans"] = runs["spans"]
                out["scalar_values"] = runs.get("scalar_values")
                break
            if now > LIMIT_S:
                out["all_loaded_s"] = None
                out["at_limit"] = {"seconds": round(now, 1), "steps": runs["steps"],
                                   "metric_49_values": total,
                                   "scalar_values": runs.get("scalar_values"),
                                   "samples": runs["samples"], "spans": runs["spans"]}
                break
            time.sleep(POLL_S)
        rss, hwm = rss_mb(proc.pid)
        out["rss_loaded_mb"] = round(rss, 1)
        out["rss_peak_sampled_mb"] = round(max(peak, rss), 1)
        out["vmhwm_loaded_mb"] = round(hwm, 1)
        if paint:
            loads = subprocess.run([paint, url, "3"], capture_output=True, text=True, check=True)
            out["paint"] = [json.loads(l) for l in loads.stdout.splitlines() if l.strip()]
            rss, hwm = rss_mb(proc.pid)
            out["rss_after_page_mb"] = round(rss, 1)
            out["vmhwm_after_page_mb"] = round(hwm, 1)
        # What one chart is sent: points per series of the whole-run views.
        sc = get(base + "/api/runs/0/scalars")
        out["max_points_scalars"] = max(len(m["steps"]) for s in sc["scalars"] for m in s["modes"])
        sy = get(base + "/api/runs/0/system")
        out["max_points_system"] = max(len(s["data"]["t"]) for s in sy["series"])
        st = get(base + "/api/runs/0/steps")
        out["max_points_steps"] = max(len(s["data"]["t"]) for s in st["series"])
        t0 = sy["series"][0]["data"]["t"][0]
        z = get(base + f"/api/runs/0/system?from={t0 + 600}&to={t0 + 660}")
        out["zoom_60s_points_system"] = max(len(s["data"]["t"]) for s in z["series"])
        zs = get(base + "/api/runs/0/scalars?regex=%5Eloss%24&from=50000&to=50999")
        out["zoom_1000_steps_points_loss"] = len(zs["scalars"][0]["modes"][0]["steps"])
        rss, hwm = rss_mb(proc.pid)
        out["rss_end_mb"] = round(rss, 1)
        out["vmhwm_end_mb"] = round(hwm, 1)
    finally:
        proc.terminate()
        proc.wait()
    out["load_after"] = uptime()
    return out


def tensorboard(binary, run):
    out = {"load_before": uptime()}
    started = time.monotonic()
    proc = subprocess.Popen([binary, "--logdir", run + "/tensorboard", "--port", "0",
                             "--host", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = None
        for line in proc.stdout:
            m = re.search(r"(http://[^ ]+?:\d+)/", line)
            if m:
                base = m.group(1)
                break
        out["url_printed_s"] = round(time.monotonic() - started, 3)
        peak = 0.0
        while True:
            now = time.monotonic() - started
            rss = tree_rss_mb(proc.pid)
            peak = max(peak, rss)
            try:
                data = get(base + "/data/plugin/scalars/scalars?tag=loss&run=TRAIN")
            except Exception:
                data = []
            if data and "first_scalar_s" not in out:
                out["first_scalar_s"] = round(now, 3)
            if data and data[-1][1] == LAST_STEP:
                out["last_step_s"] = round(now, 3)
                out["cpu_s_last_step"] = round(tree_cpu_s(proc.pid), 2)
                out["points_sent_for_loss"] = len(data)
                break
            if now > LIMIT_S:
                out["last_step_s"] = None
                break
            time.sleep(POLL_S)
        rss = tree_rss_mb(proc.pid)
        out["rss_with_data_server_loaded_mb"] = round(rss, 1)
        out["rss_with_data_server_peak_sampled_mb"] = round(max(peak, rss), 1)
    finally:
        proc.terminate()
        proc.wait()
    out["load_after"] = uptime()
    return out


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("serve", "tensorboard"):
        sys.exit(__doc__)
    if sys.argv[1] == "serve":
        paint = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--paint" else None
        print(json.dumps(serve(sys.argv[2], sys.argv[3], paint), indent=1))
    else:
        print(json.dumps(tensorboard(sys.argv[2], sys.argv[3]), indent=1))


if __name__ == "__main__":
    main()
