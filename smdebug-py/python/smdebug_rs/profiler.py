"""Profiler data: system metrics, framework spans and Kineto (PyTorch profiler) trace
summaries. Tables come back as pandas DataFrames when pandas is installed, else as dicts of
columns (``{column: list or numpy array}``).

Column names follow smdebug's ``PandasFrame`` (``timestamp_us``, ``value``,
``system_metric``, ``dimension``, ``nodeID``, ``type``; ``start_time_us``, ``end_time_us``,
``framework_metric``, ``step``, ``process``, ``nodeID``); times are absolute, microseconds
since the epoch.
"""

from typing import Any, Dict, List, Optional, Sequence

from . import _native


def _table(columns: Dict[str, Any]):
    try:
        import pandas as pd
    except ImportError:
        return columns
    return pd.DataFrame(columns)


def system_metrics(path: str, start_us: Optional[int] = None, end_us: Optional[int] = None):
    """System samples (CPU, GPU, memory, I/O, network, process) of the run at ``path``, one row
    per sample, ordered by time; optionally only those between ``start_us`` and ``end_us``."""
    return _table(_native.system_metrics(path, start_us, end_us))


def framework_spans(path: str, start_us: Optional[int] = None, end_us: Optional[int] = None):
    """Framework spans (steps, data loading, forward, backward, optimizer, custom) of the run at
    ``path``, one row per span, ordered by start; ``step`` and ``worker`` are -1 where unknown."""
    return _table(_native.framework_spans(path, start_us, end_us))


def kineto_summary(paths: Sequence[str]) -> dict:
    """Summaries of PyTorch profiler traces (``*.pt.trace.json[.gz]``), one per rank:
    ``{"ranks": [{"rank", "span_us", "gpu_busy_us", "gpu_idle_us", "gpu_kernels",
    "cpu_operators", …}]}``."""
    return _native.kineto_summary([str(p) for p in paths])


def kineto_operators(paths: Sequence[str], table: str = "cpu_operators"):
    """One table of the Kineto summaries (``cpu_operators``, ``gpu_kernels``, ``gpu_memcpy``,
    ``gpu_memset``, ``user_annotations``) over all ranks, one row per (rank, name)."""
    rows: List[dict] = []
    for rank in kineto_summary(paths)["ranks"]:
        for op in rank[table]:
            rows.append({"rank": rank["rank"], **op})
    try:
        import pandas as pd
    except ImportError:
        return {k: [r[k] for r in rows] for k in (rows[0].keys() if rows else ["rank", "name"])}
    return pd.DataFrame(rows)
