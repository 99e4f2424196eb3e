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
"""

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

from . import _native
from .trials import Trial


@dataclass
class Evidence:
    """One measurement behind a verdict."""

    tensor: str
    step: int
    measure: str
    value: float
    limit: Optional[float] = None


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


def _status(doc: dict) -> RuleStatus:
    doc = dict(doc)
    doc["evidence"] = [
        Evidence(e["tensor"], e["step"], e["measure"], float("nan") if e["value"] is None else float(e["value"]), e.get("limit"))
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
        if not callable(getattr(rule, "invoke_at_step", None)):
            raise TypeError(f"a rule is a spec string or an object with invoke_at_step(trial, step), not {rule!r}")
        if trial is None:
            trial = Trial(path, max_tensor_bytes=max_tensor_bytes)
        name = getattr(rule, "name", None) or type(rule).__name__
        custom.append((str(name), rule, trial))
    doc = _native.run_rules(path, specs, custom, follow, write_into_run, poll_interval, max_tensor_bytes)
    doc["rules"] = [_status(r) for r in doc["rules"]]
    known = Summary.__dataclass_fields__
    return Summary(**{k: v for k, v in doc.items() if k in known})


def builtin_rules() -> List[dict]:
    """The built-in rules: name, config name, kind, when each fires, parameters and defaults."""
    return _native.builtin_rules()
