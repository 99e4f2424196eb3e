"""``smdebug.rules.rule_invoker``: ``invoke_rule``, a rule evaluated step after step."""

import logging

from .._smdebug import class_of
from ..exceptions import NoMoreProfilerData
from .rule import CONDITION_MET, NOT_SAVED_HERE

_logger = logging.getLogger("smdebug_rs")

_NO_MORE_PROFILER_DATA = tuple(c for c in (NoMoreProfilerData, class_of("exceptions", "NoMoreProfilerData")) if c is not None)


def invoke_rule(rule_obj, start_step=0, end_step=None, raise_eval_cond=False):
    """Invokes ``rule_obj`` (a ``Rule``) at each global step from ``start_step`` up to, not
    including, ``end_step``, as smdebug's ``invoke_rule``: a step whose data is not there
    (TensorUnavailableForStep, StepUnavailable, TensorUnavailable) is skipped; a step where the
    condition is met is logged and the rule goes on (``raise_eval_cond=True`` raises
    ``RuleEvaluationConditionMet`` instead; a condition marked ``end_of_rule`` ends the loop).
    With ``end_step=None`` it goes on until the run ends: past the last step of an ended run
    the trial raises ``NoMoreData``, which is raised from here, as smdebug raises it. The
    rule's ``rule_job_summary()`` then says what it found."""
    step = start_step if start_step is not None else 0
    _logger.info("Started execution of rule %s at step %s", type(rule_obj).__name__, step)
    while (end_step is None) or (step < end_step):
        try:
            rule_obj.invoke(step)
        except NOT_SAVED_HERE as e:
            _logger.debug(str(e))
        except CONDITION_MET as e:
            if raise_eval_cond:
                raise e
            _logger.debug(str(e))
            if e.end_of_rule:
                break
        except _NO_MORE_PROFILER_DATA as e:
            _logger.info("No more profiler data for rule %s at timestamp %s", type(rule_obj).__name__, e.timestamp)
            break
        step += 1
    _logger.info("Ended execution of rule %s at end_step %s", type(rule_obj).__name__, step - 1)
