"""Rules from Python on smdebug-rules' runner: the built-in debugging and profiler rules by name
(with parameters, as the ``smdebug rules`` command takes them) and custom rules written in
Python, evaluated together over a finished run or following a live one.

    from smdebug_rs import rules
    summary = rules.run("/tmp/run", ["VanishingGradient", "LossNotDecreasing:num_steps=20"])
    for status in summary.rules:
        print(status.rule, status.status, status.message, status.evidence)

Every rule ends in one status: ``NoIssuesFound`` (it checked something and found nothing),
``IssuesFound``, ``Error``, ``InProgress`` (a live run goes on), or ``NoData``: it checked
nothing in this run (no tensor matched its selection, no GPU metrics in the run, ...), which is
not a pass; its ``message`` says why.

A custom rule is any object with ``invoke_at_step(trial, step)`` (``trial`` is a
``smdebug_rs.trials.Trial`` on the run, ``step`` a global step every worker has written). It
returns false/None (nothing found), true (fired), a string (fired, with that message), or a dict
with ``fired``, ``message``, ``evidence`` (a list of dicts with ``tensor``, ``step``,
``measure``, ``value`` and optionally ``limit``) and ``datapoints``. Raising
TensorUnavailableForStep, TensorUnavailable or StepUnavailable skips the step for that rule;
any other exception puts the rule in the Error status with the exception as its message. A
custom rule whose every call raised one of those (or returned ``datapoints: 0``) ends in
``NoData``. ``KeyboardInterrupt`` (Ctrl-C) and ``SystemExit`` (``sys.exit``) are not a rule's
errors: raised inside a rule, they stop the evaluation and propagate out of ``run``.

Rules written for Python smdebug run unchanged but for their imports: subclass
``smdebug_rs.rules.Rule`` (smdebug's constructor, ``req_tensors``, ``invoke_at_step(self,
step)``) and evaluate with ``invoke_rule(rule, start_step=..., end_step=...,
raise_eval_cond=...)`` as in smdebug, or hand the rule object to ``run`` beside the built-in
rules (it is invoked as ``rule.invoke(step)``; ``RuleEvaluationConditionMet`` is a firing).
``rule_job_summary()`` gives SageMaker's form of the statuses: ``Summary.rule_job_summary()``,
``Rule.rule_job_summary()``, or ``rule_job_summary(run_path)`` for the summary a runner wrote
into a run.
"""

import datetime
import json
import os
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Union

from .. import _native
from .._smdebug import class_of
from ..trials import Trial
from .req_tensors import RequiredTensors, RequiredTensorsForTrial
from .rule import CONDITION_MET, Rule, RuleState
from .rule_invoker import invoke_rule

__all__ = [
    "Evidence",
    "RequiredTensors",
    "RequiredTensorsForTrial",
    "Rule",
    "RuleState",
    "RuleStatus",
    "Summary",
    "builtin_rules",
    "invoke_rule",
    "read_summary",
    "rule_job_summary",
    "run",
]


@dataclass
class Evidence:
    """One measurement behind a verdict."""

    tensor: str
    step: int
    measure: str
    value: float
    limit: Optional[float] = None
    # Profiler rules: the mode whose step ``step`` is ("TRAIN", "EVAL", ...); step spans number
    # each mode's steps from 0. None for a debugging rule's global step.
    mode: Optional[str] = None


@dataclass
class RuleStatus:
    """Where a rule stands: InProgress, NoIssuesFound, IssuesFound, NoData or Error. With
    NoData, ``message`` says why the rule had nothing to check."""

    rule: str
    kind: str
    status: str
    parameters: Any
    actions: List[str]
    first_fired_step: Optional[int]
    last_fired_step: Optional[int]
    fired_count: int
    steps_evaluated: int
    datapoints: int
    message: str
    evidence: List[Evidence]
    action_errors: List[str]
    details: Any = None
    first_fired_time_us: Optional[int] = None
    last_fired_time_us: Optional[int] = None
    # Profiler rules: the mode whose step first_fired_step / last_fired_step are ("TRAIN",
    # "EVAL", ...); step spans number each mode's steps from 0. None for debugging rules,
    # whose steps are global steps.
    first_fired_mode: Optional[str] = None
    last_fired_mode: Optional[str] = None
    warnings: List[str] = field(default_factory=list)
    unreadable_records: int = 0
    # Debugging rules: the steps at which the rule had what it reads, and the steps it judges
    # (its message says "judged N of M steps" when N < M).
    steps_judged: int = 0
    steps_in_scope: int = 0

    @property
    def issues_found(self) -> bool:
        return self.status == "IssuesFound"

    @property
    def no_data(self) -> bool:
        """The rule checked nothing in this run (``message`` says why): not a pass."""
        return self.status == "NoData"


@dataclass
class Summary:
    """Every rule's status and where the run stood."""

    run: str
    run_complete: bool
    end_reason: Optional[str]
    last_step: Optional[int]
    finished: bool
    updated_at: float
    rules: List[RuleStatus]

    def rule(self, name: str) -> RuleStatus:
        for status in self.rules:
            if status.rule == name:
                return status
        raise KeyError(name)

    def issues_found(self) -> bool:
        return any(r.status == "IssuesFound" for r in self.rules)

    def no_data(self) -> List[RuleStatus]:
        """The rules that checked nothing in this run (status NoData)."""
        return [r for r in self.rules if r.status == "NoData"]

    def rule_job_summary(self) -> List[dict]:
        """The statuses in the form of SageMaker's ``rule_job_summary()``, one dict per rule:
        ``RuleConfigurationName``, ``RuleEvaluationStatus`` (``InProgress``,
        ``NoIssuesFound``, ``IssuesFound``, ``Error``, or ``NoData``: the rule checked nothing,
        which SageMaker has no status for and which is not a pass), ``StatusDetails`` (the
        rule's message) and ``LastModifiedTime`` (when the summary was made)."""
        when = datetime.datetime.fromtimestamp(self.updated_at, datetime.timezone.utc)
        return [
            {
                "RuleConfigurationName": r.rule,
                "RuleEvaluationStatus": r.status,
                "StatusDetails": r.message,
                "LastModifiedTime": when,
            }
            for r in self.rules
        ]


def _summary(doc: dict) -> Summary:
    doc = dict(doc)
    doc["rules"] = [_status(r) for r in doc["rules"]]
    known = Summary.__dataclass_fields__
    return Summary(**{k: v for k, v in doc.items() if k in known})


def read_summary(path: Union[str, os.PathLike]) -> Summary:
    """The rules' statuses a runner or a report wrote, with each rule's evidence and typed
    findings (``details``): ``path`` is a run (its ``rules/rule_job_summary.json``, written by
    ``smdebug rules --write-into-run``, ``run(..., write_into_run=True)`` or a session) or a
    summary file itself (``profiler-report.rules.json``, which the profiling report writes
    beside its page and notebook). A local path or an object-store URL, read through the same storage as
    the run's other files."""
    return _summary(_native.read_summary(os.fspath(path)))


def rule_job_summary(source: Union[str, os.PathLike, Summary, Rule, Sequence[Rule]]) -> List[dict]:
    """SageMaker's ``rule_job_summary()`` for a run path (the summary a runner wrote into it,
    ``<run>/rules/rule_job_summary.json``: ``smdebug rules --write-into-run``, ``run(...,
    write_into_run=True)`` or a follower beside training), a ``Summary``, or ``Rule`` objects
    invoked with ``invoke_rule``."""
    if isinstance(source, Summary):
        return source.rule_job_summary()
    if isinstance(source, Rule):
        return [source.rule_job_summary()]
    if isinstance(source, (str, os.PathLike)):
        path = os.path.join(os.fspath(source), "rules", "rule_job_summary.json")
        with open(path) as f:
            return _summary(json.load(f)).rule_job_summary()
    return [rule.rule_job_summary() for rule in source]


class _Invoked:
    """A smdebug-style ``Rule`` on the runner: each step is ``rule.invoke(step)``, whose
    ``RuleEvaluationConditionMet`` is a firing (with its message); the step-skipping
    exceptions pass through to the runner, which skips the step for the rule."""

    def __init__(self, rule: Rule):
        self.rule = rule
        self.name = rule.rule_name

    def invoke_at_step(self, trial, step):
        try:
            self.rule.invoke(step)
        except CONDITION_MET as met:
            return {"fired": True, "message": str(met)}
        return False


def _status(doc: dict) -> RuleStatus:
    doc = dict(doc)
    doc["evidence"] = [
        Evidence(
            e["tensor"],
            e["step"],
            e["measure"],
            float("nan") if e["value"] is None else float(e["value"]),
            e.get("limit"),
            e.get("mode"),
        )
        for e in doc["evidence"]
    ]
    known = RuleStatus.__dataclass_fields__
    return RuleStatus(**{k: v for k, v in doc.items() if k in known})


def run(
    path: str,
    rules: Sequence[Any] = (),
    follow: bool = False,
    write_into_run: bool = False,
    poll_interval: float = 0.2,
    max_tensor_bytes: Optional[int] = None,
) -> Summary:
    """Evaluates ``rules`` over the run at ``path`` (a directory or object-store URL) and
    returns every rule's status with its evidence.

    Each rule is a built-in rule's spec (``"VanishingGradient"``,
    ``"LossNotDecreasing:num_steps=20"``) or a custom rule object (see the module docs).
    ``follow=False`` evaluates what the run holds now and finishes; ``follow=True`` follows a
    live run until it writes its end marker (Ctrl-C stops following). With ``write_into_run``
    the statuses also go to ``<run>/rules/rule_job_summary.json`` (as ``smdebug rules --write-into-run`` does); by default nothing is written into the run.
    ``max_tensor_bytes``: the most bytes one tensor read may allocate, for the built-in rules
    and the custom rules' trial alike (default 1 GiB; see ``create_trial``). A built-in rule
    leaves a record over it (or one whose checksum fails) out, lists it in its ``warnings``
    and counts it in ``unreadable_records``, and judges on; in a custom rule, the read raises.
    """
    specs = []
    custom = []
    trial = None
    for rule in rules:
        if isinstance(rule, str):
            specs.append(rule)
            continue
        if isinstance(rule, Rule) or _is_smdebug_rule(rule):
            # It reads through its own base_trial.
            custom.append((rule.rule_name, _Invoked(rule), rule.base_trial))
            continue
        if not callable(getattr(rule, "invoke_at_step", None)):
            raise TypeError(f"a rule is a spec string or an object with invoke_at_step(trial, step), not {rule!r}")
        if trial is None:
            trial = Trial(path, max_tensor_bytes=max_tensor_bytes)
        name = getattr(rule, "name", None) or type(rule).__name__
        custom.append((str(name), rule, trial))
    doc = _native.run_rules(path, specs, custom, follow, write_into_run, poll_interval, max_tensor_bytes)
    return _summary(doc)


def _is_smdebug_rule(rule) -> bool:
    theirs = class_of("rules.rule", "Rule")
    return theirs is not None and isinstance(rule, theirs)


def builtin_rules() -> List[dict]:
    """The built-in rules: name, config name, kind, when each fires, parameters and defaults."""
    return _native.builtin_rules()
