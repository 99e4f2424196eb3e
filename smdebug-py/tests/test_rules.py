"""Rules from Python: built-in rules by spec and custom Python rules on smdebug-rules' runner."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import RUN_DATA
from smdebug_rs import exceptions, rules
from smdebug_rs.trials import create_trial

MULTI = RUN_DATA / "golden" / "pysmdebug_multi"


@pytest.fixture()
def demo_copy(demo_run, tmp_path):
    """The demo run, copied: a runner writes its summary into the run."""
    dst = tmp_path / "run"
    shutil.copytree(demo_run, dst)
    return dst


def test_builtin_rules_return_statuses_with_evidence(demo_copy):
    summary = rules.run(
        str(demo_copy), ["VanishingGradient", "LossNotDecreasing:num_steps=20"], write_into_run=True
    )
    assert [r.rule for r in summary.rules] == ["VanishingGradient", "LossNotDecreasing"]
    assert summary.finished and summary.run_complete
    steps = create_trial(str(demo_copy)).steps()
    for status in summary.rules:
        assert status.status in ("NoIssuesFound", "IssuesFound")
        assert status.steps_evaluated == len(steps)
        assert status.datapoints > 0
        if status.issues_found:
            assert status.evidence and status.message
    assert summary.rule("LossNotDecreasing").parameters["num_steps"] == 20
    # The summary file the runner wrote says the same.
    on_disk = json.loads((demo_copy / "rules" / "rule_job_summary.json").read_text())
    assert [r["status"] for r in on_disk["rules"]] == [r.status for r in summary.rules]


def test_a_profiler_rules_steps_name_their_mode(demo_copy):
    # One data-loading worker on a machine of two cores or more: fewer than 100 % of the cores.
    status = rules.run(str(demo_copy), ["Dataloader:min_threshold=100"]).rule("Dataloader")
    assert status.issues_found, status
    # Step spans number each mode's steps from 0: the firing's step is a step of its mode.
    assert status.first_fired_mode in ("TRAIN", "EVAL"), status
    assert status.evidence and all(e.mode in ("TRAIN", "EVAL") for e in status.evidence), status
    # A debugging rule's steps are global steps, of no mode.
    loss = rules.run(str(demo_copy), ["LossNotDecreasing:num_steps=20"]).rule("LossNotDecreasing")
    assert loss.first_fired_mode is None and all(e.mode is None for e in loss.evidence)


def test_same_statuses_as_the_cli(demo_copy):
    cli = os.environ.get("SMDEBUG_RS_CLI")
    if not cli:
        pytest.skip("SMDEBUG_RS_CLI (the smdebug binary) not set")
    specs = ["VanishingGradient", "ExplodingTensor", "LossNotDecreasing:num_steps=5"]
    out = subprocess.run(
        [cli, "rules", str(demo_copy), "--json"] + [a for s in specs for a in ("--rule", s)],
        capture_output=True,
        text=True,
    )
    assert out.returncode in (0, 1), out.stderr
    theirs = json.loads(out.stdout)["rules"]
    ours = rules.run(str(demo_copy), specs).rules
    for a, b in zip(ours, theirs):
        assert (a.rule, a.status, a.fired_count, a.steps_evaluated, a.datapoints, a.message) == (
            b["rule"],
            b["status"],
            b["fired_count"],
            b["steps_evaluated"],
            b["datapoints"],
            b["message"],
        )
        assert [e.__dict__ for e in a.evidence] == [
            {
                **e,
                "limit": e.get("limit"),
                "mode": e.get("mode"),
                "value": float("nan") if e["value"] is None else float(e["value"]),
            }
            for e in b["evidence"]
        ] or any(np.isnan(e.value) for e in a.evidence)


class LossAbove:
    """Fires at every step whose loss exceeds a limit."""

    name = "LossAbove"

    def __init__(self, limit):
        self.limit = limit
        self.seen = []

    def invoke_at_step(self, trial, step):
        loss = float(trial.tensor("loss").value(step))  # raises when loss was not saved here
        self.seen.append(step)
        if loss > self.limit:
            return {
                "message": f"loss {loss} > {self.limit}",
                "evidence": [{"tensor": "loss", "step": step, "measure": "value", "value": loss, "limit": self.limit}],
            }
        return False


def test_custom_python_rule_runs_beside_builtin_rules(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(MULTI, run)
    trial = create_trial(str(run))
    losses = {s: float(trial.tensor("loss").value(s)) for s in trial.tensor("loss").steps()}
    limit = float(np.median(list(losses.values())))
    custom = LossAbove(limit)
    summary = rules.run(str(run), [custom, "LossNotDecreasing:num_steps=3"])
    status = summary.rule("LossAbove")
    above = sorted(s for s, v in losses.items() if v > limit)
    assert custom.seen == sorted(losses)  # every global step with a loss, in order
    assert status.fired_count == len(above) > 0
    assert status.status == "IssuesFound"
    assert status.first_fired_step == above[0] and status.last_fired_step == above[-1]
    assert status.evidence[0].tensor == "loss" and status.evidence[0].limit == limit
    assert summary.rule("LossNotDecreasing").steps_evaluated == len(trial.steps())


def test_custom_rule_that_raises_is_an_error_status(tmp_path):
    class Broken:
        def invoke_at_step(self, trial, step):
            raise ZeroDivisionError("boom")

    run = tmp_path / "run"
    shutil.copytree(MULTI, run)
    status = rules.run(str(run), [Broken()]).rule("Broken")
    assert status.status == "Error"
    assert "ZeroDivisionError: boom" in status.message


def test_rules_with_nothing_to_check_say_no_data_and_why(demo_copy):
    class NeverSaved:
        name = "NeverSaved"

        def invoke_at_step(self, trial, step):
            raise exceptions.TensorUnavailableForStep("attention", step)

    summary = rules.run(str(demo_copy), ["TreeDepth", "LowGPUUtilization", "VanishingGradient", NeverSaved()])
    tree, gpu, vanishing, never = (summary.rule(n) for n in ("TreeDepth", "LowGPUUtilization", "VanishingGradient", "NeverSaved"))
    assert tree.status == "NoData" and tree.no_data
    assert "no tensor of this run matched" in tree.message and "trees/Node" in tree.message
    assert gpu.status == "NoData" and "no GPU metrics" in gpu.message
    assert never.status == "NoData" and never.datapoints == 0
    # A rule that checked something is not NoData.
    assert vanishing.status in ("NoIssuesFound", "IssuesFound") and vanishing.datapoints > 0
    assert sorted(r.rule for r in summary.no_data()) == ["LowGPUUtilization", "NeverSaved", "TreeDepth"]
    assert not summary.issues_found() or vanishing.issues_found


def test_bad_specs_are_clear_errors():
    with pytest.raises(ValueError, match="NoSuchRule"):
        rules.run(str(MULTI), ["NoSuchRule"])
    with pytest.raises(TypeError):
        rules.run(str(MULTI), [42])
    names = {r["name"] for r in rules.builtin_rules()}
    assert {"VanishingGradient", "LossNotDecreasing", "CPUBottleneck"} <= names


def test_rule_exceptions_type_is_importable():
    assert issubclass(exceptions.RuleEvaluationConditionMet, exceptions.SMDebugError)
