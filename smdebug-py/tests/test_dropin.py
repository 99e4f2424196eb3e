"""smdebug_rs as a drop-in for analysis code and custom rules written for Python smdebug 1.0.34
(issue 37), asked of both implementations in one venv where smdebug is installed:

- identity: smdebug_rs's exceptions are caught by ``except smdebug.exceptions.X``, its
  ``ModeKeys``/``StepState`` are smdebug's, smdebug's import paths exist under ``smdebug_rs``;
  without smdebug (blocked in a fresh interpreter, or the numpy 2 venv) everything works alone;
- refresh: ``no_refresh`` (smdebug's and ours) and ``dynamic_refresh`` hide steps written after,
  on both trials alike;
- placeholder index entries (an empty ``event_file_name``): the run opens on both, only the
  reads of that step of that worker fail;
- custom rules: rule classes written for smdebug, run by smdebug's ``invoke_rule`` on its trial
  and by ours on ours, judge the same steps with the same values and end the same way.
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from conftest import RUN_DATA, need
import smdebug_rs
from smdebug_rs import exceptions as rs_exceptions
from smdebug_rs import rules as rs_rules
from smdebug_rs.analysis.utils import no_refresh as rs_no_refresh
from smdebug_rs.trials import create_trial as rs_create_trial

MULTI = RUN_DATA / "golden" / "pysmdebug_multi"

# smdebug 1.0.34's exception classes (smdebug.exceptions), every one.
EXCEPTION_NAMES = [
    "SMDebugError",
    "SMDebugCustomerError",
    "SMDebugTypeError",
    "SMDebugRuntimeError",
    "SMDebugNotImplementedError",
    "SMDebugValueError",
    "InvalidCollectionConfiguration",
    "StepNotYetAvailable",
    "MissingCollectionFiles",
    "IndexReaderException",
    "StepUnavailable",
    "TensorUnavailableForStep",
    "ShapeUnavailableForStep",
    "TensorUnavailable",
    "InvalidWorker",
    "NoMoreProfilerData",
    "NoMoreData",
    "RuleEvaluationConditionMet",
    "InsufficientInformationForRuleInvocation",
]

# The import paths notebooks and rule files use, and the names they take from each.
IMPORT_PATHS = {
    "core.modes": ["ModeKeys", "ALLOWED_MODES", "ALLOWED_MODE_NAMES", "str_to_mode_keys"],
    "core.tensor": ["StepState", "Tensor"],
    "core.collection": ["CollectionKeys", "Collection"],
    "exceptions": EXCEPTION_NAMES,
    "rules": ["Rule", "invoke_rule", "RequiredTensors", "RequiredTensorsForTrial"],
    "rules.rule": ["Rule"],
    "rules.rule_invoker": ["invoke_rule"],
    "rules.req_tensors": ["RequiredTensors", "RequiredTensorsForTrial"],
    "analysis.utils": ["no_refresh", "refresh", "parse_list_from_str", "parse_bool"],
    "trials": ["create_trial"],
}


def _smdebug():
    """smdebug's modules, or a skip (a failure where SMDEBUG_RS_REQUIRE names smdebug)."""
    need("smdebug.trials")
    import smdebug.core.tensor
    import smdebug.exceptions
    import smdebug.trials

    return smdebug


def _smdebug_importable() -> bool:
    try:
        importlib.import_module("smdebug.trials")
        return True
    except Exception:  # noqa: BLE001 - smdebug fails to import with numpy 2 in odd ways
        return False


def _class_raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the point is which exception
        return e
    return None


# ---- 1. identity with smdebug, and smdebug's import paths ----


def test_smdebugs_import_paths_exist_under_smdebug_rs():
    with_smdebug = _smdebug_importable()
    for path, names in IMPORT_PATHS.items():
        ours = importlib.import_module(f"smdebug_rs.{path}")
        theirs = importlib.import_module(f"smdebug.{path}") if with_smdebug else None
        for name in names:
            assert hasattr(ours, name), f"smdebug_rs.{path}.{name}"
            if theirs is not None:
                assert hasattr(theirs, name), f"smdebug.{path}.{name} (the name is smdebug's)"
    assert smdebug_rs.modes.TRAIN is smdebug_rs.core.modes.ModeKeys.TRAIN
    if with_smdebug:
        from smdebug.core.collection import CollectionKeys as Theirs

        from smdebug_rs.core.collection import CollectionKeys as Ours

        keys = {k: v for k, v in vars(Theirs).items() if k.isupper()}
        assert {k: v for k, v in vars(Ours).items() if k.isupper()} == keys and len(keys) > 15


def test_either_except_catches_what_smdebug_rs_raises():
    smdebug = _smdebug()
    sm_exc = smdebug.exceptions
    for name in EXCEPTION_NAMES:
        assert issubclass(getattr(rs_exceptions, name), getattr(sm_exc, name)), name
    # The lookups a notebook makes on a run, each asked of both readers: smdebug's class is
    # the one ours is caught by, under smdebug's import and under ours.
    sm = smdebug.trials.create_trial(str(MULTI))
    rs = rs_create_trial(str(MULTI))
    last = sm.steps()[-1]
    lookups = {
        "an unknown tensor": lambda t: t.tensor("no/such/tensor"),
        "past the end": lambda t: t.tensor("loss").value(last + 5),
        "past the end of a mode": lambda t: t.tensor("loss").value(
            last + 5, mode=smdebug.core.modes.ModeKeys.TRAIN
        ),
        "an unknown worker": lambda t: t.tensor("loss").value(0, worker="worker_99"),
        "a shape past the end": lambda t: t.tensor("loss").shape(last + 5),
        "waiting past the end": lambda t: t.wait_for_steps([last + 5]),
    }
    for what, lookup in lookups.items():
        theirs = _class_raised(lambda: lookup(sm))
        ours = _class_raised(lambda: lookup(rs))
        assert theirs is not None and ours is not None, what
        cls = getattr(sm_exc, type(theirs).__name__)
        assert isinstance(ours, cls), (what, type(ours).__mro__, cls)
        assert isinstance(ours, getattr(rs_exceptions, type(theirs).__name__)), what
        assert str(ours) == str(theirs), what
        try:
            lookup(rs)
        except sm_exc.SMDebugError as caught:  # smdebug's base class catches ours too
            assert type(caught).__name__ == type(theirs).__name__
    # Raised by hand, as a rule does, ours is smdebug's too.
    with pytest.raises(sm_exc.TensorUnavailableForStep):
        raise rs_exceptions.TensorUnavailableForStep("loss", 3)


def test_enums_are_smdebugs_and_answers_compare_equal():
    smdebug = _smdebug()
    SmModeKeys = smdebug.core.modes.ModeKeys
    SmStepState = smdebug.core.tensor.StepState
    from smdebug_rs.core.modes import ModeKeys
    from smdebug_rs.core.tensor import StepState

    assert ModeKeys is SmModeKeys and StepState is SmStepState
    assert smdebug_rs.modes is SmModeKeys and smdebug_rs.StepState is SmStepState
    sm = smdebug.trials.create_trial(str(MULTI))
    rs = rs_create_trial(str(MULTI))
    compared = 0
    for mode in [SmModeKeys.GLOBAL, SmModeKeys.TRAIN, SmModeKeys.EVAL, SmModeKeys.PREDICT]:
        for step in range(0, sm.steps()[-1] + 4):
            theirs = sm.has_passed_step(step, mode=mode)
            ours = rs.has_passed_step(step, mode=mode)
            assert ours == theirs, (mode, step, ours, theirs)
            assert (ours == SmStepState.AVAILABLE) == (theirs == StepState.AVAILABLE)
            compared += 1
    assert compared > 40
    assert set(rs.modes()) == set(sm.modes())
    for g in sm.steps():
        assert rs.mode(g) == sm.mode(g) and rs.mode(g) in sm.modes(), g
        assert rs.global_step(sm.mode(g), sm.mode_step(g)) == g
    # A dict keyed by smdebug's modes takes ours (they are the same members).
    by_mode = {SmModeKeys.TRAIN: "train"}
    assert by_mode[rs.mode(sm.steps(mode=SmModeKeys.TRAIN and SmModeKeys.GLOBAL)[0])] == "train"


# The same checks, in a fresh interpreter that cannot import smdebug (a finder refuses it):
# smdebug_rs then has classes of its own and needs nothing of smdebug's.
ALONE = """
import sys

class NoSmdebug:
    def find_spec(self, name, path=None, target=None):
        if name == "smdebug" or name.startswith("smdebug."):
            raise ModuleNotFoundError(f"No module named {name!r}")

sys.meta_path.insert(0, NoSmdebug())

import importlib
from smdebug_rs.trials import create_trial
from smdebug_rs.core.modes import ModeKeys
from smdebug_rs.core.tensor import StepState
from smdebug_rs.exceptions import TensorUnavailable, RuleEvaluationConditionMet
from smdebug_rs.analysis.utils import no_refresh
from smdebug_rs.rules import Rule, invoke_rule

assert ModeKeys.__module__ == "smdebug_rs._modes" and StepState.__module__ == "smdebug_rs._modes"
assert [c.__module__ for c in TensorUnavailable.__mro__[:2]] == ["smdebug_rs.exceptions"] * 2
for path, names in PATHS.items():
    module = importlib.import_module("smdebug_rs." + path)
    assert all(hasattr(module, n) for n in names), path
t = create_trial(RUN)
try:
    t.tensor("no/such/tensor")
    raise AssertionError("no exception")
except TensorUnavailable:
    pass
assert t.has_passed_step(0, mode=ModeKeys.TRAIN) == StepState.AVAILABLE
with no_refresh(t):
    assert t.dynamic_refresh is False and t.steps() == list(range(12))
assert t.dynamic_refresh is True

class LossAbove(Rule):
    def __init__(self, base_trial, limit="1.0"):
        super().__init__(base_trial)
        self.limit = float(limit)

    def invoke_at_step(self, step):
        return float(self.base_trial.tensor("loss").value(step)) > self.limit

rule = LossAbove(t, limit="0.5")
try:
    invoke_rule(rule, start_step=0, end_step=12, raise_eval_cond=True)
except RuleEvaluationConditionMet as met:
    print("fired at", met.step)
assert not [m for m in sys.modules if m == "smdebug" or m.startswith("smdebug.")]
print("alone ok")
"""


def test_everything_works_alone_without_smdebug():
    code = f"PATHS = {IMPORT_PATHS!r}\nRUN = {str(MULTI)!r}\n" + ALONE
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "alone ok" in done.stdout
    loss = rs_create_trial(str(MULTI)).tensor("loss")
    first = next(s for s in range(12) if float(loss.value(s)) > 0.5)
    assert f"fired at {first}" in done.stdout, done.stdout


# ---- 2. refresh ----


def _stage(src, dst, steps):
    """Copies into `dst` the collections files and the index and event files of `steps` of the
    run at `src` (and nothing else: no end marker), as a live run would have written them."""
    for rel in ["collections"]:
        if not (dst / rel).exists():
            shutil.copytree(src / rel, dst / rel)
    for kind in ["index", "events"]:
        for path in (src / kind).rglob("*"):
            if path.is_file() and int(path.name.split("_")[0]) in steps:
                target = dst / path.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)


def _view(trial, modes):
    """What a notebook asks of a trial about its steps."""
    return {
        "steps": trial.steps(),
        "loss steps": trial.tensor("loss").steps(),
        "train steps": trial.steps(mode=modes.TRAIN),
        "names": trial.tensor_names(),
        "step 9": trial.has_passed_step(9).name,
        "loaded_all_steps": trial.loaded_all_steps,
    }


def test_no_refresh_hides_steps_written_after_as_smdebug_does(tmp_path):
    with_smdebug = _smdebug_importable()
    if with_smdebug:
        from smdebug import modes
        from smdebug.analysis.utils import no_refresh as sm_no_refresh
        from smdebug.trials import create_trial as sm_create_trial
    else:
        from smdebug_rs import modes

        sm_no_refresh = None
    ways = [("ours", rs_no_refresh)] + ([("smdebug's", sm_no_refresh)] if with_smdebug else [])
    for way, no_refresh in ways:
        run = tmp_path / way / "run"
        _stage(MULTI, run, range(0, 6))
        trials = {"smdebug_rs": rs_create_trial(str(run))}
        if with_smdebug:
            trials["smdebug"] = sm_create_trial(str(run))
        before = {k: _view(t, modes) for k, t in trials.items()}
        assert before["smdebug_rs"]["steps"] == list(range(6))
        with no_refresh(list(trials.values())):
            _stage(MULTI, run, range(6, 12))
            shutil.copy(MULTI / "training_job_end.ts", run / "training_job_end.ts")
            inside = {k: _view(t, modes) for k, t in trials.items()}
            assert all(t.dynamic_refresh is False for t in trials.values())
        after = {k: _view(t, modes) for k, t in trials.items()}
        assert inside["smdebug_rs"] == before["smdebug_rs"], way
        assert after["smdebug_rs"]["steps"] == list(range(12)), way
        assert after["smdebug_rs"]["step 9"] == "AVAILABLE" and after["smdebug_rs"]["loaded_all_steps"]
        if with_smdebug:
            assert inside["smdebug_rs"] == inside["smdebug"], way
            assert after["smdebug_rs"] == after["smdebug"], way


def test_dynamic_refresh_off_is_honoured_until_turned_on(tmp_path):
    run = tmp_path / "run"
    _stage(MULTI, run, range(0, 4))
    trial = rs_create_trial(str(run))
    assert trial.dynamic_refresh is True
    trial.dynamic_refresh = False
    _stage(MULTI, run, range(4, 8))
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.has_passed_step(5).name == "NOT_YET_AVAILABLE"
    with pytest.raises(rs_exceptions.StepNotYetAvailable):
        trial.tensor("loss").value(5)
    # An explicit refresh (or wait_for_steps) still looks, as smdebug's refresh_data does.
    trial.refresh()
    assert trial.steps() == list(range(8))
    _stage(MULTI, run, range(8, 12))
    assert trial.steps() == list(range(8))
    trial.dynamic_refresh = True
    assert trial.steps() == list(range(12))


def test_rules_trials_honour_no_refresh(tmp_path):
    """A rule's trial under no_refresh (smdebug's Rule.invoke turns refresh off while the rule
    runs): steps written meanwhile are not seen inside invoke_at_step."""
    run = tmp_path / "run"
    _stage(MULTI, run, range(0, 6))
    trial = rs_create_trial(str(run))

    class Writes(rs_rules.Rule):
        def __init__(self, base_trial):
            super().__init__(base_trial)
            self.seen = []

        def invoke_at_step(self, step):
            if step == 2:
                _stage(MULTI, run, range(6, 12))
            self.seen.append((step, self.base_trial.dynamic_refresh, self.base_trial.steps()[-1]))
            return False

    rule = Writes(trial)
    rs_rules.invoke_rule(rule, start_step=0, end_step=4)
    # Refresh is off inside each invocation; the steps written at step 2 are seen from the
    # next invocation on (its wait_for_steps looks).
    assert rule.seen == [(0, False, 5), (1, False, 5), (2, False, 5), (3, False, 11)]
    assert trial.dynamic_refresh is True


# ---- 3. placeholder index entries ----


def test_an_index_naming_no_event_file_fails_only_its_reads(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(MULTI, run)
    rel = "index/000000000/000000000001_worker_0.json"
    index = json.loads((run / rel).read_text())
    index["meta"]["event_file_name"] = ""
    (run / rel).write_text(json.dumps(index))
    rs = rs_create_trial(str(run))
    sm = None
    if _smdebug_importable():
        from smdebug.trials import create_trial as sm_create_trial

        sm = sm_create_trial(str(run))
        assert rs.tensor_names() == sm.tensor_names() and rs.steps() == sm.steps()
    placeholders = [e["tensorname"] for e in index["tensor_payload"]]
    assert "loss" in placeholders
    checked = 0
    for name in rs.tensor_names():
        tensor = rs.tensor(name)
        for step in tensor.steps():
            for worker in tensor.workers(step):
                if step == 1 and worker == "worker_0" and name in placeholders:
                    with pytest.raises(rs_exceptions.IndexReaderException) as e:
                        tensor.value(step, worker=worker)
                    assert rel in str(e.value) and "event_file_name" in str(e.value)
                    if sm is not None:
                        # smdebug reads the run's directory as the event file.
                        with pytest.raises(OSError):
                            sm.tensor(name).value(step, worker=worker)
                    continue
                try:
                    ours = tensor.value(step, worker=worker)
                except rs_exceptions.SMDebugError:
                    continue  # values smdebug cannot read either: test_equal_to_smdebug.py
                if sm is not None:
                    try:
                        theirs = sm.tensor(name).value(step, worker=worker)
                    except (KeyError, NameError, ValueError):
                        theirs = None  # dtypes smdebug 1.0.34 cannot read: test_equal_to_smdebug.py
                    if theirs is not None and ours.dtype == np.asarray(theirs).dtype:
                        assert ours.tobytes() == np.asarray(theirs).tobytes(), (name, step, worker)
                checked += 1
    assert checked > 100


# ---- 4. custom rules written for smdebug ----

# Rule files as written for smdebug: each runs as is on smdebug (its imports) and, with
# `smdebug` changed to `smdebug_rs` in its imports, on smdebug_rs.
RULE_FILE = '''
from smdebug.rules import Rule
from smdebug.rules.rule_invoker import invoke_rule
from smdebug.exceptions import RuleEvaluationConditionMet, TensorUnavailableForStep


class CustomGradientRule(Rule):
    """The SageMaker examples' BYOC rule (rules/my_custom_rule.py), with the action_str that
    smdebug 1.0.34's Rule requires."""

    def __init__(self, base_trial, threshold=10.0):
        super().__init__(base_trial, action_str="")
        self.threshold = float(threshold)
        self.seen = []

    def invoke_at_step(self, step):
        for tname in self.base_trial.tensor_names(collection="gradients"):
            t = self.base_trial.tensor(tname)
            abs_mean = t.reduction_value(step, "mean", abs=True)
            self.seen.append((step, tname, float(abs_mean)))
            if abs_mean > self.threshold:
                return True
        return False


class LossNotDecreasingRule(Rule):
    """smdebug's documented pattern: required tensors declared per step, fetched first."""

    def __init__(self, base_trial, num_steps="3"):
        super().__init__(base_trial, action_str="", other_trials=None)
        self.num_steps = int(num_steps)
        self.seen = []

    def set_required_tensors(self, step):
        if step >= self.num_steps:
            self.req_tensors.add("loss", steps=[step - self.num_steps, step])

    def invoke_at_step(self, step):
        if step < self.num_steps:
            return False
        loss = self.base_trial.tensor("loss")
        before, now = float(loss.value(step - self.num_steps)), float(loss.value(step))
        self.seen.append((step, before, now, list(self.req_tensors.get_names())))
        return now >= before


class SameLossAsOtherTrials(Rule):
    """Compares the base trial with other trials, the other_trials way."""

    def __init__(self, base_trial, other_trials=None):
        super().__init__(base_trial, action_str="", other_trials=other_trials)
        self.seen = []

    def set_required_tensors(self, step):
        for trial in self.trials:
            self.req_tensors.add("loss", steps=[step], trial=trial)

    def invoke_at_step(self, step):
        values = [float(t.tensor("loss").value(step)) for t in self.trials]
        self.seen.append((step, values))
        return len(set(values)) > 1


class WeightsGone(Rule):
    """Reads a tensor not saved at every step: TensorUnavailableForStep skips the step."""

    def __init__(self, base_trial):
        super().__init__(base_trial, action_str="")
        self.seen = []

    def invoke_at_step(self, step):
        value = self.base_trial.tensor("fc1.weight").value(step)
        self.seen.append((step, float(abs(value).sum())))
        return False
'''


def _rule_module(implementation: str) -> types.ModuleType:
    source = RULE_FILE if implementation == "smdebug" else RULE_FILE.replace("from smdebug.", "from smdebug_rs.")
    module = types.ModuleType(f"rules_for_{implementation}")
    exec(compile(source, f"<rules for {implementation}>", "exec"), module.__dict__)
    return module


def _invoke(module, rule, **kwargs):
    """invoke_rule's outcome: the exception it ended with (class name, message, step) or None."""
    try:
        module.invoke_rule(rule, **kwargs)
    except Exception as e:  # noqa: BLE001 - how it ends is compared
        return type(e).__name__, str(e), getattr(e, "step", None)
    return None


def _implementations(demo_run):
    """(name, rule module, create_trial) for each implementation here."""
    out = [("smdebug_rs", _rule_module("smdebug_rs"), rs_create_trial)]
    if _smdebug_importable():
        from smdebug.trials import create_trial as sm_create_trial

        out.append(("smdebug", _rule_module("smdebug"), sm_create_trial))
    return out


def test_rules_written_for_smdebug_run_alike(demo_run):
    run = str(demo_run)
    reader = rs_create_trial(run)
    gradients = reader.tensor("gradient/fc1.weight")
    # The largest gradient mean of each step; the rule fires at the steps above their median.
    largest = sorted(
        max(float(np.abs(reader.tensor(n).value(s)).mean()) for n in reader.tensor_names(collection="gradients"))
        for s in gradients.steps()
    )
    threshold = str(largest[len(largest) // 2])  # rule parameters are strings, as SageMaker passes them
    outcomes = {}
    for name, module, create_trial in _implementations(demo_run):
        trial = create_trial(run)
        other = create_trial(run)
        cases = {
            "gradient": (module.CustomGradientRule(trial, threshold=threshold), {}),
            "gradient, raise_eval_cond": (
                module.CustomGradientRule(trial, threshold=threshold),
                {"raise_eval_cond": True},
            ),
            "loss": (module.LossNotDecreasingRule(trial, num_steps="5"), {"start_step": 3, "end_step": 60}),
            "other trials": (module.SameLossAsOtherTrials(trial, other_trials=[other]), {"end_step": 20}),
            "not saved here": (module.WeightsGone(trial), {"end_step": 40}),
        }
        outcomes[name] = {
            case: (_invoke(module, rule, **kwargs), rule.seen) for case, (rule, kwargs) in cases.items()
        }
        ours = outcomes[name]
        if name == "smdebug_rs":
            ended, seen = ours["gradient"]
            # Past the last step of the ended run, the trial raises NoMoreData, as smdebug's.
            assert ended[0] == "NoMoreData", ended
            fired = {s for s, _, v in seen if v > float(threshold)}
            # Every step with the gradients saved is judged (the others skipped).
            assert {s for s, _, _ in seen} == set(gradients.steps())
            assert fired and len(gradients.steps()) > len(fired)
            ended, seen = ours["gradient, raise_eval_cond"]
            assert ended[0] == "RuleEvaluationConditionMet" and ended[2] == min(fired)
            rule = cases["gradient"][0]
            summary = rule.rule_job_summary()
            assert summary["RuleConfigurationName"] == "CustomGradientRule"
            assert summary["RuleEvaluationStatus"] == "IssuesFound"
            assert f"at step {min(fired)}" in summary["StatusDetails"]
            assert f"{len(fired)} of {len(gradients.steps())} steps" in summary["StatusDetails"]
            assert rule.report["Violations"] == len(fired)
            assert ours["loss"][0] is None and [s for s, *_ in ours["loss"][1]] == list(range(5, 60))
            assert all(names == ["loss"] for *_, names in ours["loss"][1])
            assert ours["other trials"][0] is None and len(ours["other trials"][1]) == 20
            assert cases["other trials"][0].rule_job_summary()["RuleEvaluationStatus"] == "NoIssuesFound"
            weights_steps = set(rs_create_trial(run).tensor("fc1.weight").steps())
            assert [s for s, _ in ours["not saved here"][1]] == sorted(weights_steps & set(range(40)))
    if "smdebug" in outcomes:
        for case in outcomes["smdebug_rs"]:
            assert outcomes["smdebug_rs"][case] == outcomes["smdebug"][case], case
    elif "smdebug.trials" in os.environ.get("SMDEBUG_RS_REQUIRE", ""):
        pytest.fail("smdebug is required here but the rules ran on smdebug_rs only")


# smdebug's documentation (docs/analysis.md, "Writing a custom rule") and the SageMaker
# examples' BYOC rule file (rules/my_custom_rule.py), as written there but for the imports.
DOCUMENTED_RULES = """
from smdebug_rs.rules import Rule


class VanishingGradientRule(Rule):
    def __init__(self, base_trial, threshold=0.0000001):
        super().__init__(base_trial, other_trials=None)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for tensorname in self.base_trial.tensors(collection='gradients'):
            tensor = self.base_trial.tensor(tensorname)
            abs_mean = tensor.reduction_value(step, 'mean', abs=True)
            if abs_mean < self.threshold:
                return True
            else:
                return False


class CustomGradientRule(Rule):
    def __init__(self, base_trial, threshold=10.0):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for tname in self.base_trial.tensor_names(collection="gradients"):
            t = self.base_trial.tensor(tname)
            abs_mean = t.reduction_value(step, "mean", abs=True)
            if abs_mean > self.threshold:
                return True
        return False
"""


def test_rules_as_documented_run_on_smdebug_rs(demo_run):
    """The documented rules call ``super().__init__(base_trial, other_trials=None)`` and
    ``super().__init__(base_trial)``, which smdebug 1.0.34's Rule refuses (``action_str`` is
    required there), and the docs' example lists names with ``trial.tensors(...)``, which its
    Trial lacks; smdebug_rs runs both as written. Each judges the steps the gradients were
    saved at, and fires where the gradients' means say it should."""
    from smdebug_rs.rules import invoke_rule

    module = types.ModuleType("documented_rules")
    exec(compile(DOCUMENTED_RULES, "<documented rules>", "exec"), module.__dict__)
    trial = rs_create_trial(str(demo_run))
    names = trial.tensor_names(collection="gradients")
    steps = trial.tensor(names[0]).steps()
    first_mean = {s: float(np.abs(trial.tensor(names[0]).value(s)).mean()) for s in steps}
    any_mean_max = {s: max(float(np.abs(trial.tensor(n).value(s)).mean()) for n in names) for s in steps}
    limit = sorted(first_mean.values())[len(steps) // 2]
    vanishing = module.VanishingGradientRule(trial, threshold=str(limit))
    invoke_rule(vanishing, start_step=0, end_step=len(trial.steps()))
    # The docs' loop returns after the first tensor: it fires where that tensor's mean is low.
    below = [s for s in steps if first_mean[s] < limit]
    assert vanishing.report["Violations"] == len(below) > 0
    assert vanishing.rule_job_summary()["RuleEvaluationStatus"] == "IssuesFound"
    byoc = module.CustomGradientRule(trial, threshold=str(limit))
    with pytest.raises(rs_exceptions.RuleEvaluationConditionMet) as met:
        invoke_rule(byoc, start_step=0, end_step=None, raise_eval_cond=True)
    assert met.value.step == min(s for s in steps if any_mean_max[s] > limit)
    if _smdebug_importable():
        from smdebug.rules import Rule as SmRule

        with pytest.raises(TypeError, match="action_str"):
            type("Documented", (SmRule,), {"invoke_at_step": lambda self, step: False})(trial)


def test_a_smdebug_style_rule_runs_beside_builtin_rules(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    module = _rule_module("smdebug_rs")
    trial = rs_create_trial(str(run))
    alone = module.LossNotDecreasingRule(trial, num_steps="5")
    _invoke(module, alone)
    fired = alone.rule_job_summary()
    beside = module.LossNotDecreasingRule(rs_create_trial(str(run)), num_steps="5")
    summary = rs_rules.run(str(run), [beside, "LossNotDecreasing:num_steps=5"], write_into_run=True)
    status = summary.rule("LossNotDecreasingRule")
    fired_steps = [s for s, before, now, _ in alone.seen if now >= before]
    assert status.fired_count == len(fired_steps)
    assert status.status == fired["RuleEvaluationStatus"]
    if fired_steps:
        assert status.first_fired_step == fired_steps[0]
        assert "resulted in the condition being met" in status.message
    assert status.steps_evaluated == len(trial.steps())
    # SageMaker's rule_job_summary(), from the summary and from the file written into the run.
    jobs = summary.rule_job_summary()
    assert [j["RuleConfigurationName"] for j in jobs] == ["LossNotDecreasingRule", "LossNotDecreasing"]
    assert [j["RuleEvaluationStatus"] for j in jobs] == [r.status for r in summary.rules]
    assert rs_rules.rule_job_summary(run) == jobs
    assert rs_rules.rule_job_summary([alone]) == [fired]
    if _smdebug_importable():
        # smdebug's own Rule class, on smdebug's trial, runs on the runner the same way.
        from smdebug.trials import create_trial as sm_create_trial

        theirs = _rule_module("smdebug").LossNotDecreasingRule(sm_create_trial(str(run)), num_steps="5")
        status = rs_rules.run(str(run), [theirs]).rule("LossNotDecreasingRule")
        assert (status.fired_count, status.first_fired_step) == (
            len(fired_steps),
            fired_steps[0] if fired_steps else None,
        )
