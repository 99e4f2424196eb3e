#!/usr/bin/env python3
"""The cost curve of reading a long run (issue 36): time and peak memory of every consumer of a
run, on the synthetic run at several lengths, beside TensorBoard's.

    python3 benches/cost_curve.py [--runs DIR] [--steps 100000,200000,400000] [--only NAMES]
                                  [--python PY] [--demo-epochs 10,100]

For each length N it writes `DIR/sN` with `synthetic_run` when that run is missing (one node,
16 cores, 8 GPUs sampled for an hour; N steps with 5 spans each; 50 scalars a step, also in
`tensorboard/`), then runs, one after the other, each in a fresh process:

- `rules`: `smdebug rules RUN --rule LossNotDecreasing`;
- `report`: `smdebug report RUN -o TMP` (every default rule and ProfilerReport);
- `trial`: the `read_one_tensor` example (open the run with a `Trial`, every step's `loss`);
- `smdebug_rs`: `create_trial(RUN)` and `tensor('loss').values()` in Python, with `--python`
  (an interpreter with the `smdebug_rs` wheel installed; see BENCHMARKS.md);
- `serve`: `smdebug serve RUN --read-only` until every step, sample, span and scalar value is
  served (`smdebug-serve/examples/scale_bench.py serve`);
- `tensorboard`: TensorBoard on `RUN/tensorboard` until `loss` is served to the last step
  (`scale_bench.py tensorboard`);
- `demo` (with `--demo-epochs`): the demo training job itself (capture, in-process rules,
  profiling, report) for each number of epochs; its peak is the training process's.

Peak memory is the kernel's for the process (`ru_maxrss` of the child; the servers' sampled
VmRSS/VmHWM from scale_bench.py). Prints one JSON line per measurement, then a table. Binaries
are the workspace's release builds (`cargo build --release -p smdebug-cli -p smdebug-examples
-p smdebug-serve --examples` and `-p smdebug-read --example read_one_tensor`). Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, "target", "release")
SMDEBUG = os.path.join(RELEASE, "smdebug")
SYNTHETIC = os.path.join(RELEASE, "examples", "synthetic_run")
READ_ONE = os.path.join(RELEASE, "examples", "read_one_tensor")
DEMO = os.path.join(RELEASE, "demo")
SCALE_BENCH = os.path.join(ROOT, "smdebug-serve", "examples", "scale_bench.py")
TENSORBOARD = os.path.join(ROOT, "target", "interop-venv", "bin", "tensorboard")
CONSUMERS = ["rules", "report", "trial", "smdebug_rs", "serve", "tensorboard"]

SMDEBUG_RS_READ = """
import sys
from smdebug_rs.trials import create_trial
t = create_trial(sys.argv[1])
v = t.tensor('loss').values()
print(len(v))
"""


def measure(cmd, ok=(0,), env=None):
    """Runs `cmd` in a fresh Python child so that its RUSAGE_CHILDREN peak is this command's."""
    probe = (
        "import json,resource,subprocess,sys,time\n"
        "cmd=json.loads(sys.argv[1]); ok=json.loads(sys.argv[2])\n"
        "t=time.monotonic(); p=subprocess.run(cmd,capture_output=True)\n"
        "s=time.monotonic()-t\n"
        "peak=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss/1024\n"
        "print(json.dumps({'rc':p.returncode,'s':s,'peak_mb':peak,"
        "'err':p.stderr.decode(errors='replace')[-2000:]}))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe, json.dumps(cmd), json.dumps(list(ok))],
                         capture_output=True, text=True, env=env, check=True)
    r = json.loads(res.stdout)
    if r["rc"] not in ok:
        sys.exit(f"{cmd} exited {r['rc']}: {r['err']}")
    return round(r["s"], 2), round(r["peak_mb"], 1)


def ensure_run(runs, steps):
    run = os.path.join(runs, f"s{steps}")
    if not os.path.exists(os.path.join(run, "training_job_end.ts")):
        subprocess.run([SYNTHETIC, run, str(steps)], check=True, stdout=subprocess.DEVNULL)
    return run


def scale_bench(kind, binary, run, steps):
    env = dict(os.environ, SCALE_BENCH_STEPS=str(steps))
    out = subprocess.run([sys.executable, SCALE_BENCH, kind, binary, run],
                         capture_output=True, text=True, env=env, check=True)
    r = json.loads(out.stdout)
    if kind == "serve":
        return r.get("all_loaded_s"), max(r["rss_peak_sampled_mb"], r["vmhwm_loaded_mb"])
    return r.get("last_step_s"), r["rss_with_data_server_peak_sampled_mb"]


def run_consumer(name, run, steps, args):
    if name == "rules":
        # Exit 1 is "issues found": the synthetic loss is flat noise by design.
        return measure([SMDEBUG, "rules", run, "--rule", "LossNotDecreasing"], ok=(0, 1))
    if name == "report":
        with tempfile.TemporaryDirectory() as out:
            return measure([SMDEBUG, "report", run, "-o", out], ok=(0, 1))
    if name == "trial":
        return measure([READ_ONE, run])
    if name == "smdebug_rs":
        if not args.python:
            return None
        return measure([args.python, "-c", SMDEBUG_RS_READ, run])
    if name == "serve":
        return scale_bench("serve", SMDEBUG, run, steps)
    if name == "tensorboard":
        return scale_bench("tensorboard", args.tensorboard, run, steps)
    raise ValueError(name)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default=os.path.join(tempfile.gettempdir(), "smdebug-cost-curve"))
    p.add_argument("--steps", default="100000,200000,400000")
    p.add_argument("--only", default=",".join(CONSUMERS))
    p.add_argument("--python", help="a Python with the smdebug_rs wheel installed")
    p.add_argument("--tensorboard", default=TENSORBOARD)
    p.add_argument("--demo-epochs", default="", help="e.g. 10,100")
    args = p.parse_args()
    lengths = [int(s) for s in args.steps.split(",") if s]
    names = [n for n in args.only.split(",") if n]
    os.makedirs(args.runs, exist_ok=True)
    rows = {}
    for steps in lengths:
        run = ensure_run(args.runs, steps)
        for name in names:
            r = run_consumer(name, run, steps, args)
            if r is None:
                continue
            rows[(name, steps)] = r
            print(json.dumps({"consumer": name, "steps": steps, "seconds": r[0],
                              "peak_mb": r[1], "load": os.getloadavg()[0]}), flush=True)
    for epochs in [int(e) for e in args.demo_epochs.split(",") if e]:
        with tempfile.TemporaryDirectory() as out:
            r = measure([DEMO, "--out", os.path.join(out, "run"), "--epochs", str(epochs)],
                        ok=(0, 1))
        rows[("demo", epochs)] = r
        print(json.dumps({"consumer": "demo", "epochs": epochs, "seconds": r[0],
                          "peak_mb": r[1]}), flush=True)
    print()
    print("| consumer | " + " | ".join(f"{s // 1000}k steps" for s in lengths) + " |")
    print("| --- |" + " --- |" * len(lengths))
    for name in names:
        cells = []
        for s in lengths:
            r = rows.get((name, s))
            cells.append("–" if r is None else
                         f"{'–' if r[0] is None else f'{r[0]:.1f} s'}, {r[1]:.0f} MB")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
