"""Shared fixtures: the runs under test and the optional peers (Python smdebug, pandas).

Environment:
- SMDEBUG_RS_REQUIRE: comma-separated peers that must import (``smdebug``, ``pandas``,
  ``matplotlib``, ``numpy2``); a test needing a missing required peer fails instead of skipping,
  so a CI venv that lost a package cannot pass by skipping.
- SMDEBUG_RS_DEMO_RUN: a run written by the demo (``cargo run -p smdebug-examples --bin demo --
  --out DIR --python-compatible``), with tensors, system metrics and framework spans.
"""

import importlib
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_DATA = REPO / "smdebug-io" / "tests" / "data"
REQUIRED = {p.strip() for p in os.environ.get("SMDEBUG_RS_REQUIRE", "").split(",") if p.strip()}


def smdebug_runs():
    """Every run directory under smdebug-io/tests/data: the golden runs written by Python
    smdebug 1.0.34 and the corpus written by its real framework hooks. A run is a directory
    with an ``index/`` directory (TensorBoard-only directories have none). The differential
    scenarios' stages (``scenarios/``) are parts of runs, replayed by test_scenarios.py."""
    scenarios = RUN_DATA / "scenarios"
    runs = sorted(
        {
            p.parent
            for p in RUN_DATA.rglob("index")
            if p.is_dir() and scenarios not in p.parents
        }
    )
    assert runs, f"no runs under {RUN_DATA}"
    return runs


def need(peer: str):
    """Imports an optional peer, or skips (fails when the peer is in SMDEBUG_RS_REQUIRE)."""
    try:
        return importlib.import_module(peer)
    except Exception as e:  # smdebug 1.0.34 fails to import with numpy 2 / protobuf 5 in odd ways
        if peer in REQUIRED:
            pytest.fail(f"{peer} is required here (SMDEBUG_RS_REQUIRE) but does not import: {e!r}")
        pytest.skip(f"{peer} not importable: {e!r}")


@pytest.fixture(scope="session")
def demo_run():
    path = os.environ.get("SMDEBUG_RS_DEMO_RUN")
    if not path:
        if "demo" in REQUIRED:
            pytest.fail("SMDEBUG_RS_DEMO_RUN is required here but not set")
        pytest.skip("SMDEBUG_RS_DEMO_RUN not set")
    return Path(path)


@pytest.fixture(autouse=True)
def _quiet_smdebug(monkeypatch):
    # smdebug's Trial sleeps SMDEBUG_TRAINING_END_DELAY_REFRESH seconds (default 1) before its
    # final refresh of an ended run, and logs every refresh.
    monkeypatch.setenv("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0")
    monkeypatch.setenv("SMDEBUG_LOG_LEVEL", "error")
