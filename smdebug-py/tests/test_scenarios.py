"""The differential scenarios (smdebug-io/tests/interop/scenarios.py): runs written by Python
smdebug 1.0.34's own FileWriter and CollectionManager, some while the trial is open, read by
``smdebug.trials.create_trial`` and ``smdebug_rs.trials.create_trial`` side by side; every
answer (steps per mode, names per collection, workers, step states, values, exception classes)
must be equal, except where a scenario says why smdebug_rs differs on purpose.

Each scenario is also checked against its committed copy (smdebug-io/tests/data/scenarios/),
which the Rust tests replay through the Rust Trial: the files it writes are byte for byte the
committed stages, and smdebug's answers (and ours, where they differ) are the recorded ones.
"""

import filecmp
import json
import os
import sys

import pytest

from conftest import REPO, need

sys.path.insert(0, str(REPO / "smdebug-io" / "tests" / "interop"))
import scenarios  # noqa: E402

COMMITTED = REPO / "smdebug-io" / "tests" / "data" / "scenarios"


def test_there_are_at_least_forty_scenarios_and_each_is_committed():
    names = [fn.__name__ for fn in scenarios.SCENARIOS]
    assert len(names) >= 40, len(names)
    assert len(set(names)) == len(names)
    committed = sorted(p.stem for p in COMMITTED.glob("*.json"))
    assert committed == sorted(names)


def _same_tree(a, b):
    """Files of `a` and `b` equal byte for byte (and no file only in one)."""
    cmp = filecmp.dircmp(a, b)
    problems = cmp.left_only + cmp.right_only + cmp.diff_files + cmp.funny_files
    for sub in cmp.common_dirs:
        problems += _same_tree(os.path.join(a, sub), os.path.join(b, sub))
    return problems


@pytest.mark.parametrize("fn", scenarios.SCENARIOS, ids=lambda fn: fn.__name__)
def test_scenario_reads_alike(fn, tmp_path):
    need("smdebug.trials")
    readers = [scenarios.python_reader(), scenarios.rs_reader()]
    script = scenarios.run_scenario(fn, readers, str(tmp_path / "runs"), str(tmp_path / "stages"))
    assert not script.mismatches, "\n".join(script.mismatches)
    recorded = json.loads((COMMITTED / f"{fn.__name__}.json").read_text())
    now = script.record((fn.__doc__ or "").strip())
    assert now == recorded, (
        f"{fn.__name__}: the answers differ from the committed ones; regenerate with "
        "`scenarios.py --write smdebug-io/tests/data/scenarios` if the scenario changed"
    )
    stages = tmp_path / "stages" / fn.__name__
    if stages.exists():
        assert not _same_tree(stages, COMMITTED / fn.__name__), fn.__name__
    else:
        assert not (COMMITTED / fn.__name__).exists()
