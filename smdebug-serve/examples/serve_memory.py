#!/usr/bin/env python3
"""Memory of `smdebug serve` on a whole run while a person clicks through it (issue 25 item 3).

    python3 smdebug-serve/examples/serve_memory.py SMDEBUG_BINARY RUN [TENSOR ...]

Starts `SMDEBUG_BINARY serve RUN --port 0 --read-only`, waits until the run is read to its end
(the end marker seen, no index file pending, and the step, sample and span counts unchanged over
two seconds), then does what a person does with the page, in order, reading the server's
resident memory (VmRSS) and its peak (the kernel's VmHWM) after each action:

- downloads the profiling report, twice;
- opens each TENSOR (default: the three tensors with the longest names that are not scalars,
  i.e. weights and gradients in the demo) in the distribution view (200 steps) and the 2-D view
  at its last step and its first step;
- zooms the system, step and scalar charts into ten windows each.

Standard library only; prints one JSON object. The bound the issue sets is 300 MB of server
memory whatever the user clicks.
"""

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request


def get(url, timeout=600):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body = r.read()
    return body


def get_json(url):
    return json.loads(get(url))


def memory_mb(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    kb = lambda k: int(fields.get(k, "0 kB").split()[0]) / 1024
    return round(kb("VmRSS"), 1), round(kb("VmHWM"), 1)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, run, chosen = sys.argv[1], sys.argv[2], sys.argv[3:]
    started = time.monotonic()
    proc = subprocess.Popen([binary, "serve", run, "--port", "0", "--read-only"],
                            stdout=subprocess.PIPE, text=True)
    out = {"run": run, "actions": []}
    try:
        base = proc.stdout.readline().strip().rstrip("/")
        api = base + "/api/runs/0"
        last, stable_since = None, None
        while True:
            r = get_json(base + "/api/runs")["runs"][0]
            now = (r["steps"], r["samples"], r["spans"], r.get("scalar_values"))
            if r["complete"] and r.get("index_pending", 0) == 0 and now == last:
                if time.monotonic() - stable_since >= 2.0:
                    break
            else:
                last, stable_since = now, time.monotonic()
            time.sleep(0.25)
        out["loaded_s"] = round(time.monotonic() - started, 2)
        out["steps"], out["samples"], out["spans"], out["scalar_values"] = last
        rss, hwm = memory_mb(proc.pid)
        out["loaded"] = {"rss_mb": rss, "peak_mb": hwm}

        def action(name, url):
            t = time.monotonic()
            try:
                size = len(get(url))
                status = 200
            except urllib.error.HTTPError as e:
                size, status = len(e.read()), e.code
            rss, hwm = memory_mb(proc.pid)
            out["actions"].append({"action": name, "status": status, "bytes": size,
                                   "seconds": round(time.monotonic() - t, 2),
                                   "rss_mb": rss, "peak_mb": hwm})

        action("report", api + "/report")
        action("report again", api + "/report")
        scalars = get_json(api + "/scalars?limit=256")
        scalar_names = {s["name"] for s in scalars["scalars"]}
        if not chosen:
            others = [t for t in scalars["tensors"] if t not in scalar_names]
            chosen = sorted(others, key=len, reverse=True)[:3]
        for name in chosen:
            q = urllib.parse.quote(name)
            action(f"distribution {name}", f"{api}/tensor?name={q}&steps=200")
            action(f"2-D last step {name}", f"{api}/tensor2d?name={q}")
            view = get_json(f"{api}/tensor2d?name={q}")
            steps = view.get("steps") or []
            if steps:
                action(f"2-D first step {name}", f"{api}/tensor2d?name={q}&step={steps[0]}")
        system = get_json(api + "/system")
        times = [t for s in system["series"] for t in s["data"]["t"][:1] + s["data"]["t"][-1:]]
        if times:
            t0, t1 = min(times), max(times)
            for i in range(10):
                a = t0 + (t1 - t0) * i / 10
                action(f"zoom system {i}", f"{api}/system?from={a}&to={a + (t1 - t0) / 20}")
                action(f"zoom steps {i}", f"{api}/steps?from={a}&to={a + (t1 - t0) / 20}")
        n = out["steps"]
        for i in range(10):
            a = n * i // 10
            action(f"zoom scalars {i}", f"{api}/scalars?from={a}&to={a + max(n // 20, 1)}")
        out["peak_mb"] = max(a["peak_mb"] for a in out["actions"])
        out["rss_end_mb"] = out["actions"][-1]["rss_mb"]
    finally:
        proc.terminate()
        proc.wait()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
