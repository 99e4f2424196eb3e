# The cells of profiler-report.ipynb after its title and parameter cells, in the "percent"
# format: a line `# %%` starts a code cell, `# %% [markdown]` a markdown cell whose lines lose
# their leading `# `. This header is not part of the notebook (everything before the first
# marker is left out). smdebug-report's notebook.rs splits the file; the cells run in the
# order written and read only what the parameter cell names.

# %%
import json

import numpy as np
import pandas as pd
from IPython.display import display

from smdebug_rs import profiler, rules

try:
    import matplotlib.pyplot as plt
except ImportError:  # the tables below do without it
    plt = None

# One row per system sample and per framework span, as smdebug's PandasFrame names them.
system = profiler.system_metrics(RUN)
spans = profiler.framework_spans(RUN)
# The rules' statuses the HTML report was drawn from, each with its typed findings (details).
summary = rules.read_summary(RULE_SUMMARY)
# Every figure below, as numbers: the last cell prints them.
FIGURES = {}


def details(rule):
    """The typed findings of `rule` as it recorded them ({} when it did not run)."""
    for status in summary.rules:
        if status.rule == rule:
            return status.details or {}
    return {}


def rank_value(values, q):
    """The value at rank round(q * (n - 1)) of the sorted values: the percentile the HTML
    report names (its own within 0.99 %, from a quantile sketch; this one exact)."""
    ordered = np.sort(np.asarray(values, dtype=float))
    return float(ordered[int(np.floor(q * (len(ordered) - 1) + 0.5))])


print(f"{len(system)} system samples, {len(spans)} framework spans, {len(summary.rules)} rule results")

# %% [markdown]
# ## Training job summary
#
# The job runs from its first record (the process's start, recorded by the session as a
# `Process` span, else the first system sample or span) to its last. Initialization is the time
# before the first step as the MaxInitializationTime rule measured it.

# %%
steps = spans[spans.process.str.startswith("Step:")].copy()
steps["mode"] = steps["mode"].fillna("unknown mode")
starts, ends = [], []
if len(system):
    starts.append(int(system.timestamp_us.min()))
    ends.append(int(system.timestamp_us.max()))
if len(spans):
    starts.append(int(spans.start_time_us.min()))
    ends.append(int(spans.end_time_us.max()))
job = {}
if starts:
    job["job_start_us"], job["job_end_us"] = min(starts), max(ends)
    job["job_duration_s"] = (job["job_end_us"] - job["job_start_us"]) / 1e6
if len(steps):
    job["training_loop_s"] = (int(steps.end_time_us.max()) - int(steps.start_time_us.min())) / 1e6
    job["steps"] = {str(m): int(n) for m, n in steps.groupby("mode").size().items()}
initialization = details("MaxInitializationTime")
job["initialization_s"] = initialization.get("initialization_s")
job["initialization_from_us"] = initialization.get("job_start_us")
FIGURES["job"] = job
display(pd.Series({k: v for k, v in job.items() if k != "steps"}, name="value").to_frame())
if plt is not None and job.get("initialization_s") is not None and "training_loop_s" in job:
    loop = job["training_loop_s"]
    init = job["initialization_s"]
    rest = max(job["job_duration_s"] - loop - init, 0.0)
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.pie([init, loop, rest], labels=["Initialization", "Training loop", "Finalization"], autopct="%1.1f%%")
    ax.set_title("Where the job's time went")
    plt.show()

# %% [markdown]
# ## Rules summary
#
# Every rule's status as the report shows it. The findings are informational: the rules judge
# the recorded data against their thresholds; whether a finding matters for this job is yours
# to decide.

# %%
rule_table = pd.DataFrame(
    [
        {
            "rule": s.rule,
            "kind": s.kind,
            "status": s.status,
            "triggered": s.fired_count,
            "datapoints": s.datapoints,
            "finding": s.message,
        }
        for s in summary.rules
    ]
)
FIGURES["rules"] = [
    {"rule": s.rule, "status": s.status, "triggered": s.fired_count, "datapoints": s.datapoints}
    for s in summary.rules
]
display(rule_table)

# %% [markdown]
# ## Step durations
#
# The step spans per node and mode, computed here from the spans (exact; percentiles
# interpolated between ranks as the StepOutlier rule computes them), then the rule's own
# figures (which it records in seconds to 4 decimals) and outliers.

# %%
step_stats = []
for (node, mode), group in steps.groupby(["nodeID", "mode"]):
    d = group.duration_us.to_numpy(dtype=float) / 1000.0
    step_stats.append(
        {
            "node": node,
            "mode": mode,
            "steps": int(len(d)),
            "mean_ms": float(d.mean()),
            "min_ms": float(d.min()),
            # Interpolated between ranks (numpy's default), as StepOutlier computes them.
            "p50_ms": float(np.percentile(d, 50)),
            "p95_ms": float(np.percentile(d, 95)),
            "p99_ms": float(np.percentile(d, 99)),
            "max_ms": float(d.max()),
        }
    )
FIGURES["steps"] = step_stats
if step_stats:
    display(pd.DataFrame(step_stats))
else:
    print("No step spans were recorded.")
outliers = details("StepOutlier")
for node, modes in outliers.get("nodes", {}).items():
    for mode, s in modes.items():
        print(f"StepOutlier, {node} {mode}: {s['steps']} steps, limit {s['outlier_limit_s'] * 1e3:.3f} ms, {s['outliers']} outlier(s)")
if plt is not None and len(steps):
    fig, ax = plt.subplots(figsize=(8, 3))
    for (node, mode), group in steps.groupby(["nodeID", "mode"]):
        ax.hist(group.duration_us / 1000.0, bins=30, alpha=0.6, label=f"{node} {mode}")
    ax.set_xlabel("step duration (ms)")
    ax.set_ylabel("steps")
    ax.legend()
    plt.show()

# %% [markdown]
# ## System usage statistics
#
# Per node and metric over the whole job. Maxima, minima and counts are exact in both this
# notebook and the HTML report; the HTML report's percentiles come from a quantile sketch, within
# 0.99 % of the exact values computed here.

# %%
usage = []
if len(system):
    for (node, kind, name, dim), group in system.groupby(["nodeID", "type", "system_metric", "dimension"]):
        v = group.value.to_numpy(dtype=float)
        usage.append(
            {
                "node": node,
                "metric": f"{kind}: " + " ".join(p for p in (name, dim) if p),
                "max": float(v.max()),
                "p99": rank_value(v, 0.99),
                "p95": rank_value(v, 0.95),
                "p50": rank_value(v, 0.50),
                "min": float(v.min()),
                "samples": int(len(v)),
            }
        )
FIGURES["system"] = usage
if usage:
    display(pd.DataFrame(usage))
else:
    print("No system metrics were recorded.")
if plt is not None and len(system):
    cpu = system[(system.type == "cpu") & (system.system_metric == "total") & (system.dimension == "CPUUtilization")]
    for node, group in cpu.groupby("nodeID"):
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.plot((group.timestamp_us - group.timestamp_us.min()) / 1e6, group.value)
        ax.set_title(f"CPU utilization (all cores): {node}")
        ax.set_xlabel("seconds")
        ax.set_ylabel("%")
        plt.show()

# %% [markdown]
# ## Framework metrics: forward and backward
#
# The time of the Forward and Backward spans (the adapters' forward and backward passes).

# %%
# Backward rows are named as smdebug names them (`Backward(post-forward)`).
forward = float(spans[spans.process.str.startswith("Forward")].duration_us.sum()) / 1e6
backward = float(spans[spans.process.str.startswith("Backward")].duration_us.sum()) / 1e6
FIGURES["forward_backward"] = {"forward_s": forward, "backward_s": backward}
if forward > 0 and backward > 0:
    print(f"Forward passes took {forward:.3f} s and backward passes {backward:.3f} s: backward/forward = {backward / forward:.2f}.")
    if plt is not None:
        fig, ax = plt.subplots(figsize=(4, 4))
        ax.pie([forward, backward], labels=["Forward", "Backward"], autopct="%1.1f%%")
        ax.set_title("Forward vs backward")
        plt.show()
else:
    print("Forward versus backward needs both Forward and Backward spans; at least one kind was not recorded.")

# %% [markdown]
# ## GPU memory
#
# Each GPU's memory in use (percent of its capacity) as a box: p25 to p75 around the median,
# whiskers p5 to p95, and the lowest and highest samples. The GPUMemoryIncrease rule's findings
# follow.

# %%
memory = system[(system.type == "gpu") & (system.dimension == "GPUMemoryUtilization")] if len(system) else system
gpu_memory = []
for (node, gpu), group in memory.groupby(["nodeID", "system_metric"]) if len(memory) else []:
    v = group.value.to_numpy(dtype=float)
    gpu_memory.append(
        {
            "node": node,
            "gpu": gpu,
            "min": float(v.min()),
            "p5": rank_value(v, 0.05),
            "p25": rank_value(v, 0.25),
            "p50": rank_value(v, 0.50),
            "p75": rank_value(v, 0.75),
            "p95": rank_value(v, 0.95),
            "max": float(v.max()),
            "samples": int(len(v)),
        }
    )
FIGURES["gpu_memory"] = gpu_memory
if not gpu_memory:
    print("No GPU: no GPU memory was recorded. The job ran without a GPU, or NVML was not available to the sampler.")
else:
    display(pd.DataFrame(gpu_memory))
    if plt is not None:
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.bxp(
            [
                {"label": f"{g['node']} {g['gpu']}", "whislo": g["p5"], "q1": g["p25"], "med": g["p50"], "q3": g["p75"], "whishi": g["p95"], "fliers": [g["min"], g["max"]]}
                for g in gpu_memory
            ]
        )
        ax.set_ylabel("% used")
        ax.set_title("GPU memory per GPU")
        plt.show()
for node, gpus in details("GPUMemoryIncrease").get("nodes", {}).items():
    for gpu, g in gpus.items():
        print(f"GPUMemoryIncrease, {node} {gpu}: largest rise {g['largest_rise']:.1f} points, {len(g['increases'])} increase(s) flagged")

# %% [markdown]
# ## Data loading
#
# The Dataloader rule's count of loader workers against the cores, and whether the data loader
# pins its batches in memory (`pin_memory`, recorded on the data-loading spans where the loop
# says so).

# %%
loading = details("Dataloader")
rows = []
for node, n in loading.get("nodes", {}).items():
    rows.append(
        {
            "node": node,
            "loads": n["data_loading_spans"],
            "total_s": n["data_loading_total_s"],
            "workers": n["workers"],
            "cores": n["cores"],
            "verdict": n.get("verdict") or "-",
            "pin_memory": n.get("pin_memory"),
        }
    )
FIGURES["dataloader"] = rows
if rows:
    display(pd.DataFrame(rows))
    for r in rows:
        if r["pin_memory"] is False:
            print(f"{r['node']}: the data loader does not pin memory; with a GPU, pinned batches copy to it faster and asynchronously.")
else:
    print("The Dataloader rule has no findings for this run.")

# %% [markdown]
# ## The figures above, as numbers
#
# For checking this notebook against the HTML report (the tests of smdebug-report do).

# %%
print(json.dumps(FIGURES, default=lambda o: o.item() if hasattr(o, "item") else str(o)))
