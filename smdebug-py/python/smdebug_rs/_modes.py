"""smdebug's enums: the modes a step is recorded in, and where a step stands for a reader."""

from enum import Enum
from typing import Optional, Union


class ModeKeys(Enum):
    """The mode of a step (``smdebug.modes``); GLOBAL means global step numbers."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4


class StepState(Enum):
    """Where a step stands (``smdebug.core.tensor.StepState``)."""

    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2


ModeLike = Union[ModeKeys, str, None]


def mode_name(mode: ModeLike) -> Optional[str]:
    """The name the native reader takes for a mode.

    Accepts this package's ``ModeKeys``, Python smdebug's (anything with a ``name``), a name
    (``"train"``, ``"TRAIN"``) or None (GLOBAL).
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
