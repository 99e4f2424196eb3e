"""Profiler data from Python: system metrics and framework spans of the demo run (as DataFrames
with pandas, as dicts of columns without), and Kineto trace summaries."""

import json
from pathlib import Path

import pytest

from conftest import REPO, need
from smdebug_rs import profiler

TRACES = REPO / "smdebug-read" / "tests" / "data" / "pytorch-profiler-traces"
EXPECTED = REPO / "smdebug-read" / "tests" / "kineto" / "expected"


def _system_lines(run: Path):
    return [json.loads(l) for f in sorted((run / "system").rglob("*.json")) for l in f.read_text().splitlines() if l.strip()]


def _trace_events(run: Path):
    events = []
    for f in (run / "framework").rglob("*.json"):
        doc = json.loads(f.read_text())
        events += [e for e in (doc["traceEvents"] if isinstance(doc, dict) else doc) if e.get("ph") == "X"]
    return events


def test_system_metrics_as_columns(demo_run, monkeypatch):
    monkeypatch.setattr(profiler, "_table", lambda columns: columns)
    lines = _system_lines(demo_run)
    assert lines, "the demo run has no system metrics"
    cols = profiler.system_metrics(str(demo_run))
    assert len(cols["value"]) == len(lines)
    assert sorted(cols["value"].tolist()) == sorted(float(l["Value"]) for l in lines)
    assert set(cols["type"]) == {l["Type"] for l in lines}


def test_system_metrics_and_spans_as_dataframes(demo_run):
    need("pandas")
    df = profiler.system_metrics(str(demo_run))
    assert list(df.columns) == ["timestamp", "timestamp_us", "value", "system_metric", "dimension", "nodeID", "type"]
    assert df["timestamp_us"].is_monotonic_increasing
    spans = profiler.framework_spans(str(demo_run))
    events = _trace_events(demo_run)
    assert len(spans) == len(events) > 0
    assert sorted(spans["framework_metric"]) == sorted(e["name"] for e in events)
    assert (spans["end_time_us"] >= spans["start_time_us"]).all()
    steps = spans[spans["step"] >= 0]
    assert len(steps) > 0
    start, end = int(df["timestamp_us"].iloc[0]), int(df["timestamp_us"].iloc[-1])
    assert len(profiler.system_metrics(str(demo_run), start, start)) < len(df) or start == end


def test_kineto_summaries_match_the_recorded_figures():
    traces = sorted(TRACES.glob("*.gz"))
    if not traces:
        pytest.skip(f"no Kineto traces in {TRACES}")
    report = profiler.kineto_summary([str(t) for t in traces])
    by_file = {Path(r["file"]).name: r for r in report["ranks"]}
    compared = 0
    for trace in traces:
        want = json.loads((EXPECTED / trace.name[: -len(".gz")]).read_text())
        got = by_file[trace.name]
        for key in ("rank", "event_count", "complete_event_count", "gpu_busy_us", "gpu_idle_us"):
            assert got[key] == pytest.approx(want[key]), (trace.name, key)
        assert [op["name"] for op in got["cpu_operators"][:5]] == [op["name"] for op in want["cpu_operators"][:5]]
        compared += 1
    assert compared == len(traces)
    ops = profiler.kineto_operators([str(t) for t in traces])
    rows = len(ops["name"]) if isinstance(ops, dict) else len(ops)
    assert rows == sum(len(r["cpu_operators"]) for r in report["ranks"])
