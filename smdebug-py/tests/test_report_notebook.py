"""The profiling report's notebook (profiler-report.ipynb, written beside the HTML page by the
session's ProfilerReport) executed with nbclient on the demo's run: it runs to the end, and the
figures it prints (read from the run with smdebug_rs) are the ones the HTML page shows."""

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import need


class _Tables(HTMLParser):
    """Every <table class="…"> of the page as rows of cell texts, by class."""

    def __init__(self):
        super().__init__()
        self.tables = {}
        self._table = None
        self._row = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs).get("class", ""), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag == "tr" and self._row is not None:
            self._table.append(self._row)
            self._row = None
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _table(html, cls):
    parser = _Tables()
    parser.feed(html)
    rows = parser.tables[cls]
    head, body = rows[0], rows[1:]
    return [dict(zip(head, r)) for r in body]


def _executed(notebook: Path, tmp_path: Path):
    nbformat = need("nbformat")
    nbclient = need("nbclient")
    nb = nbformat.read(str(notebook), as_version=4)
    nbformat.validate(nb)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    return nb


def _figures(nb):
    last = nb.cells[-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")
    return json.loads(text)


def _close(shown: str, exact: float, relative: float, rounded_to: float = 0.0):
    """A figure the page prints with a few decimals against the exact value: within the
    page's rounding (or `rounded_to`, the rounding of the figure it prints), plus `relative`
    of it (the sketch's bound for a percentile)."""
    value = float(shown)
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    slack = max(0.5 * 10 ** -decimals, rounded_to / 2)
    return abs(value - exact) <= slack + relative * abs(exact) + 1e-12


def test_the_notebook_beside_the_report_reruns_the_analysis_to_the_pages_figures(demo_run, tmp_path):
    need("pandas")
    report = demo_run / "report"
    page = (report / "profiler-report.html").read_text()
    notebook = report / "profiler-report.ipynb"
    assert notebook.exists(), "the report writes its notebook beside the page"
    nb = _executed(notebook, tmp_path)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    figures = _figures(nb)

    # Rules: every rule of the page's summary with the same status and counts.
    shown = {r["rule"]: r for r in _table(page, "rules")}
    printed = {r["rule"]: r for r in figures["rules"]}
    assert set(shown) == set(printed) and len(shown) >= 10
    for name, r in shown.items():
        assert r["status"] == printed[name]["status"], name
        assert int(r["triggered"]) == printed[name]["triggered"], name
        assert int(r["datapoints"]) == printed[name]["datapoints"], name

    # Steps: the StepOutlier table's counts, means, minima and maxima are the notebook's,
    # computed from the spans, and so are its percentiles (interpolated between ranks, as the
    # rule computes them). The table shows the rule's figures, which it records in seconds to
    # 4 decimals (0.1 ms).
    steps = {(r["node"], r["mode"]): r for r in _table(page, "step-stats")}
    computed = {(s["node"], s["mode"]): s for s in figures["steps"]}
    assert set(steps) == set(computed) and steps
    for key, r in steps.items():
        s = computed[key]
        assert int(r["steps"]) == s["steps"], key
        for col, fig in [("mean ms", "mean_ms"), ("min ms", "min_ms"), ("max ms", "max_ms")]:
            assert _close(r[col], s[fig], 0.0, rounded_to=0.1), (key, col, r[col], s[fig])
        for col, fig in [("p50 ms", "p50_ms"), ("p95 ms", "p95_ms"), ("p99 ms", "p99_ms")]:
            assert _close(r[col], s[fig], 0.0, rounded_to=0.1), (key, col, r[col], s[fig])

    # System usage: every series of the page's table, same sample count, extremes exact,
    # percentiles within the sketch's bound.
    usage = {(r["node"], r["metric"]): r for r in _table(page, "system-usage")}
    series = {(u["node"], u["metric"]): u for u in figures["system"]}
    percent = {k: r for k, r in usage.items() if r["unit"] == "%"}
    assert percent, "the demo records CPU utilization"
    for key, r in percent.items():
        u = series[key]
        assert int(r["samples"]) == u["samples"], key
        for col in ("max", "min"):
            assert _close(r[col], u[col], 0.0), (key, col)
        for col in ("p99", "p95", "p50"):
            assert _close(r[col], u[col], 0.01), (key, col, r[col], u[col])

    # Forward against backward: the page's sentence (and its pie) and the notebook's totals.
    fb = figures["forward_backward"]
    m = re.search(r"Forward passes took ([0-9.]+) s and backward passes ([0-9.]+) s", page)
    assert m, "the page compares forward and backward"
    assert _close(m.group(1), fb["forward_s"], 0.0) and _close(m.group(2), fb["backward_s"], 0.0)
    assert "Forward vs backward" in page

    # Initialization from the process's start, as MaxInitializationTime measured it.
    init = figures["job"]["initialization_s"]
    assert init is not None and init > 0
    assert figures["job"]["initialization_from_us"] == figures["job"]["job_start_us"]

    # The demo ran without a GPU: both say so.
    assert figures["gpu_memory"] == [] and "No GPU:" in page
    # The demo's loader says it does not pin memory: the Dataloader rule recorded it.
    assert [r["pin_memory"] for r in figures["dataloader"]] == [False]
    assert "does not pin its batches" in page


def test_read_summary_reads_a_run_or_a_summary_file_and_names_what_is_missing(demo_run, tmp_path):
    from smdebug_rs import rules

    beside = rules.read_summary(str(demo_run / "report" / "profiler-report.rules.json"))
    in_run = rules.read_summary(str(demo_run))
    assert {r.rule for r in beside.rules} == {r.rule for r in in_run.rules}
    assert beside.rule("Dataloader").details["kind"] == "dataloader"
    with pytest.raises(FileNotFoundError, match="no rules summary"):
        rules.read_summary(str(tmp_path))
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="not a rules summary"):
        rules.read_summary(str(bad))
    assert not math.isnan(beside.updated_at)
