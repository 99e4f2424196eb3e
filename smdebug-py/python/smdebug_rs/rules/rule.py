"""``smdebug.rules.rule``: the ``Rule`` base class custom rules written for smdebug subclass,
running on ``smdebug_rs``'s trials.

    from smdebug_rs.rules import Rule, invoke_rule
    from smdebug_rs.trials import create_trial

    class VanishingGradientRule(Rule):
        def __init__(self, base_trial, threshold=0.0000001):
            super().__init__(base_trial, other_trials=None)
            self.threshold = float(threshold)

        def invoke_at_step(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                if self.base_trial.tensor(name).reduction_value(step, "mean", abs=True) < self.threshold:
                    return True
            return False

    invoke_rule(VanishingGradientRule(create_trial(path), threshold="0.0001"))

As smdebug's: ``invoke(step)`` waits for the step, turns refresh off for the rule's trials
while ``set_required_tensors(step)`` declares what it needs (``self.req_tensors.add``), those
values are fetched, and ``invoke_at_step(step)`` runs; a true result runs the rule's actions and
raises ``RuleEvaluationConditionMet``. Differences: ``action_str`` may be left out (smdebug
1.0.34 requires it, though its own documentation's examples leave it out), and each rule keeps
what its invocations found, which ``rule_job_summary()`` gives in SageMaker's form.
"""

import datetime
import json
import logging
from abc import ABC, abstractmethod
from typing import Optional

from .._smdebug import class_of
from ..analysis.utils import no_refresh
from ..exceptions import (
    RuleEvaluationConditionMet,
    SMDebugNotImplementedError,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from .req_tensors import RequiredTensors

_logger = logging.getLogger("smdebug_rs")

#: What a rule raises when the data it needs is not at a step: the step is skipped (smdebug's
#: invoke_rule catches these), smdebug's own classes included when a rule raises those.
NOT_SAVED_HERE = tuple(
    c
    for name, ours in [
        ("TensorUnavailableForStep", TensorUnavailableForStep),
        ("StepUnavailable", StepUnavailable),
        ("TensorUnavailable", TensorUnavailable),
    ]
    for c in (ours, class_of("exceptions", name))
    if c is not None
)

#: RuleEvaluationConditionMet, ours and (when installed) smdebug's.
CONDITION_MET = tuple(
    c for c in (RuleEvaluationConditionMet, class_of("exceptions", "RuleEvaluationConditionMet")) if c is not None
)


class RuleState:
    """What a rule's invocations found: the steps it judged, where it fired, the first error."""

    def __init__(self):
        self.steps_invoked = 0
        self.datapoints = 0
        self.skipped = 0
        self.fired_steps = []
        self.first_condition = None
        self.error: Optional[str] = None
        self.updated = datetime.datetime.now(datetime.timezone.utc)

    def touch(self):
        self.updated = datetime.datetime.now(datetime.timezone.utc)

    @property
    def status(self) -> str:
        """SageMaker's RuleEvaluationStatus (``Error``, ``IssuesFound``, ``NoIssuesFound``),
        or ``NoData`` when no invocation judged anything (every step skipped, or none invoked):
        not a pass."""
        if self.error is not None:
            return "Error"
        if self.fired_steps:
            return "IssuesFound"
        return "NoIssuesFound" if self.datapoints else "NoData"

    def details(self, rule_name: str) -> str:
        if self.error is not None:
            return self.error
        if self.fired_steps:
            return (
                f"RuleEvaluationConditionMet: {self.first_condition}; the condition was met at "
                f"{len(self.fired_steps)} of {self.datapoints} steps evaluated"
            )
        if not self.datapoints:
            return (
                f"{rule_name} evaluated no step: {self.steps_invoked} invoked, each without the "
                "data it needs"
            )
        return f"{rule_name} evaluated {self.datapoints} steps; the condition was never met"


class _Actions:
    """A rule's ``action_str``: smdebug's own Actions (SageMaker training-job stop, SNS
    messages) when smdebug is installed; without smdebug, an action string is refused at
    construction (nothing here can stop a SageMaker job or send a message)."""

    def __init__(self, action_str: Optional[str], rule_name: str):
        action_str = (action_str or "").strip()
        self._theirs = None
        if not action_str:
            return
        actions = class_of("rules.action", "Actions")
        if actions is None:
            raise SMDebugNotImplementedError(
                f"rule {rule_name}: actions ({action_str}) need Python smdebug's Actions "
                "(pip install smdebug): smdebug_rs runs rules without them"
            )
        self._theirs = actions(action_str, rule_name=rule_name)

    def invoke(self, message=""):
        if self._theirs is not None:
            self._theirs.invoke(message)


class Rule(ABC):
    """smdebug's Rule interface: subclass it and implement ``invoke_at_step(self, step)``."""

    def __init__(self, base_trial, action_str: str = "", other_trials=None):
        self.base_trial = base_trial
        self.other_trials = other_trials
        self.trials = [base_trial]
        if self.other_trials is not None:
            self.trials += [x for x in self.other_trials]
        self.req_tensors = RequiredTensors(self.base_trial, self.other_trials)
        self.logger = _logger
        self.rule_name = self.__class__.__name__
        self._actions = _Actions(action_str, self.rule_name)
        self.report = {
            "RuleTriggered": 0,
            "Violations": 0,
            "Details": {},
            "Datapoints": 0,
            "RuleParameters": "",
        }
        self._state = RuleState()

    def set_required_tensors(self, step):
        """Declares what the rule needs at ``step`` (``self.req_tensors.add(name, steps=[...])``);
        fetched before ``invoke_at_step``."""

    @abstractmethod
    def invoke_at_step(self, step):
        """The rule's check at a global step: true when the condition is met."""

    def invoke(self, step):
        """Evaluates the rule at a global step, as smdebug's ``Rule.invoke``: raises
        ``RuleEvaluationConditionMet`` when the condition is met, and what the trial raises
        when the step or a required value is not there."""
        self.logger.debug("Invoking rule %s for step %s", self.rule_name, step)
        self.base_trial.wait_for_steps([step])
        state = self._state
        state.steps_invoked += 1
        state.touch()
        try:
            # No refresh while the rule runs, as smdebug: the steps the required tensors saw
            # are the steps invoke_at_step sees.
            with no_refresh(self.trials):
                self.req_tensors.clear()
                self.set_required_tensors(step)
                self.req_tensors.fetch()
                val = self.invoke_at_step(step)
        except NOT_SAVED_HERE:
            state.skipped += 1
            raise
        except CONDITION_MET as met:
            # The rule raised it itself (smdebug's built-in rules do, with end_of_rule).
            state.datapoints += 1
            self._fired(step, met)
            raise
        except Exception as e:
            if state.error is None:
                state.error = f"{type(e).__name__}: {e} (at step {step})"
            raise
        state.datapoints += 1
        if val:
            met = RuleEvaluationConditionMet(self.rule_name, step)
            self._fired(step, met)
            self._actions.invoke()
            raise met

    def _fired(self, step, met):
        state = self._state
        state.fired_steps.append(step)
        if state.first_condition is None:
            state.first_condition = str(met)
        self.report["RuleTriggered"] += 1
        self.report["Violations"] += 1

    def rule_job_summary(self) -> dict:
        """What this rule's invocations found, as one entry of SageMaker's
        ``rule_job_summary()``: ``RuleConfigurationName``, ``RuleEvaluationStatus``
        (``IssuesFound``, ``NoIssuesFound``, ``Error``, or ``NoData`` when it judged no step),
        ``StatusDetails`` and ``LastModifiedTime``."""
        state = self._state
        return {
            "RuleConfigurationName": self.rule_name,
            "RuleEvaluationStatus": state.status,
            "StatusDetails": state.details(self.rule_name),
            "LastModifiedTime": state.updated,
        }

    def __repr__(self):
        return f"<{self.rule_name} rule: {json.dumps(self.rule_job_summary(), default=str)}>"
