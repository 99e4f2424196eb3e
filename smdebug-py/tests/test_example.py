"""The notebook-style example runs on a run our writer made (the demo's) and draws its plot."""

import subprocess
import sys

from conftest import need

from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plot_demo_run.py"


def test_plot_demo_run_example(demo_run, tmp_path):
    need("matplotlib")
    out = tmp_path / "demo.png"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(demo_run), str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000
    assert "loss values" in done.stdout and "norms of" in done.stdout
