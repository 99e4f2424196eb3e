"""The exceptions of Python smdebug 1.0.34 (``smdebug.exceptions``): same names, constructor
arguments and messages, so ``except`` clauses port with the import.

When Python smdebug is installed, each class here is also a subclass of smdebug's class of the
same name: ``except smdebug.exceptions.TensorUnavailable`` catches what ``smdebug_rs`` raises,
as ``except smdebug_rs.exceptions.TensorUnavailable`` does."""

from ._modes import ModeKeys
from ._smdebug import class_of


def _also(name: str) -> tuple:
    """smdebug's exception class ``name`` as a base, when smdebug is installed."""
    theirs = class_of("exceptions", name)
    return () if theirs is None else (theirs,)


class SMDebugError(*_also("SMDebugError"), Exception):
    pass


class SMDebugCustomerError(*_also("SMDebugCustomerError"), SMDebugError):
    pass


class SMDebugTypeError(*_also("SMDebugTypeError"), SMDebugError, TypeError):
    pass


class SMDebugRuntimeError(*_also("SMDebugRuntimeError"), SMDebugError, RuntimeError):
    pass


class SMDebugNotImplementedError(*_also("SMDebugNotImplementedError"), SMDebugError, NotImplementedError):
    pass


class SMDebugValueError(*_also("SMDebugValueError"), SMDebugError, ValueError):
    pass


class TensorTooLarge(SMDebugError, MemoryError):
    """(smdebug_rs only) Reading a value would allocate more than the reader's budget
    (``create_trial(path, max_tensor_bytes=...)``, 1 GiB by default): its decoded bytes and the
    numpy array it becomes. Nothing of that size was allocated. The message names the event
    file, the record's offset, the tensor and the size."""

    def __init__(self, message):
        self.message = message

    def __str__(self):
        return self.message


class InvalidCollectionConfiguration(*_also("InvalidCollectionConfiguration"), SMDebugError):
    def __init__(self, c_name):
        self.c_name = c_name

    def __str__(self):
        return (
            f"Collection {self.c_name} has not been configured. "
            "Please fill in tensor_name or include_regex"
        )


class StepNotYetAvailable(*_also("StepNotYetAvailable"), SMDebugError):
    def __init__(self, step, mode):
        self.step = step
        self.mode = mode

    def __str__(self):
        return f"Step {self.step} of mode {self.mode.name} not yet available"


class MissingCollectionFiles(*_also("MissingCollectionFiles"), SMDebugError):
    def __str__(self):
        return "Training job has ended. All the collection files could not be loaded"


class IndexReaderException(*_also("IndexReaderException"), SMDebugError):
    def __init__(self, message):
        self.message = message

    def __str__(self):
        return self.message


class StepUnavailable(*_also("StepUnavailable"), SMDebugError):
    def __init__(self, step, mode):
        self.step = step
        self.mode = mode

    def __str__(self):
        return f"Step {self.step} of mode {self.mode.name} is not available as it was not saved"


class TensorUnavailableForStep(*_also("TensorUnavailableForStep"), SMDebugError):
    def __init__(self, tname, step, mode=ModeKeys.GLOBAL, has_reductions=False):
        self.step = step
        self.mode = mode
        self.tname = tname
        self.has_reductions = has_reductions

    def __str__(self):
        msg = (
            f"Value for tensor {self.tname} is not available for step {self.step} "
            f"with mode {self.mode.name} as it was not saved."
        )
        if self.has_reductions:
            msg += (
                "This tensor has reductions saved for this step. "
                "You might want to query for the reductions."
            )
        return msg


class ShapeUnavailableForStep(*_also("ShapeUnavailableForStep"), SMDebugError):
    def __init__(self, tname, step, mode=ModeKeys.GLOBAL):
        self.step = step
        self.mode = mode
        self.tname = tname

    def __str__(self):
        return (
            f"Shape for tensor {self.tname} is not available for step {self.step} "
            f"with mode {self.mode.name} as it was not saved."
        )


class TensorUnavailable(*_also("TensorUnavailable"), SMDebugError):
    def __init__(self, tname):
        self.tname = tname

    def __str__(self):
        return f"Tensor {self.tname} was not saved."


class InvalidWorker(*_also("InvalidWorker"), SMDebugError):
    def __init__(self, worker):
        self.worker = worker

    def __str__(self):
        return f"Invalid Worker: {self.worker}"


class NoMoreProfilerData(*_also("NoMoreProfilerData"), SMDebugError):
    def __init__(self, timestamp):
        self.timestamp = timestamp
        self.msg = f"Looking for timestamp {timestamp} and reached end of training."

    def __str__(self):
        return self.msg


class NoMoreData(*_also("NoMoreData"), SMDebugError):
    def __init__(self, step, mode, last_step):
        self.step = step
        self.mode = mode
        self.last_step = last_step
        self.msg = (
            f"Looking for step {step} of mode {mode.name} and reached "
            f"end of training. Max step available is {last_step}"
        )

    def __str__(self):
        return self.msg


class RuleEvaluationConditionMet(*_also("RuleEvaluationConditionMet"), SMDebugError):
    def __init__(self, rule_name, step, end_of_rule=False):
        self.rule_name = rule_name
        self.step = step
        self.end_of_rule = end_of_rule

    def __str__(self):
        return (
            f"Evaluation of the rule {self.rule_name} at step {self.step} "
            "resulted in the condition being met"
        )


class InsufficientInformationForRuleInvocation(*_also("InsufficientInformationForRuleInvocation"), SMDebugError):
    def __init__(self, rule_name, message):
        self.rule_name = rule_name
        self.message = message

    def __str__(self):
        return f"Insufficient information to invoke rule {self.rule_name}: {self.message}"
