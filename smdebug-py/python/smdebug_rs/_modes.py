"""smdebug's enums: the modes a step is recorded in, and where a step stands for a reader.

With Python smdebug installed these are smdebug's own classes (``smdebug.core.modes.ModeKeys``,
``smdebug.core.tensor.StepState``), so values compare equal whichever import a notebook uses;
without it, classes of the same names, members and values."""

from enum import Enum
from typing import Optional, Union

from ._smdebug import class_of

ModeKeys = class_of("core.modes", "ModeKeys")
StepState = class_of("core.tensor", "StepState")

if ModeKeys is None:

    class ModeKeys(Enum):  # type: ignore[no-redef]
        """The mode of a step (``smdebug.modes``); GLOBAL means global step numbers."""

        TRAIN = 1  # training/fitting mode
        EVAL = 2  # testing/evaluation mode
        PREDICT = 3  # prediction/inference mode
        GLOBAL = 4


if StepState is None:

    class StepState(Enum):  # type: ignore[no-redef]
        """Where a step stands (``smdebug.core.tensor.StepState``)."""

        UNAVAILABLE = 0
        AVAILABLE = 1
        NOT_YET_AVAILABLE = 2


ALLOWED_MODES = [ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL]
ALLOWED_MODE_NAMES = [x.name for x in ALLOWED_MODES]

ModeLike = Union[ModeKeys, str, None]


def str_to_mode_keys(mode_str: str) -> ModeKeys:
    """The mode of a lower-case name (``smdebug.core.modes.str_to_mode_keys``)."""
    modes = {"train": ModeKeys.TRAIN, "eval": ModeKeys.EVAL, "predict": ModeKeys.PREDICT, "global": ModeKeys.GLOBAL}
    if mode_str not in modes:
        raise Exception("Invalid mode")
    return modes[mode_str]


def mode_name(mode: ModeLike) -> Optional[str]:
    """The name the native reader takes for a mode.

    Accepts ``ModeKeys`` (this package's, which are smdebug's when it is installed, or
    smdebug's own), a name (``"train"``, ``"TRAIN"``) or None (GLOBAL).
    """
    if mode is None:
        return None
    name = getattr(mode, "name", mode)
    if not isinstance(name, str):
        raise TypeError(f"mode must be a ModeKeys member or its name, not {mode!r}")
    return name.upper()


def mode_key(mode: ModeLike) -> ModeKeys:
    """The ModeKeys member of a mode given any way ``mode_name`` accepts."""
    name = mode_name(mode)
    return ModeKeys.GLOBAL if name is None else ModeKeys[name]
