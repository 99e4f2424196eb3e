"""``smdebug.core.tensor``: ``StepState`` (smdebug's own class when smdebug is installed) and
the ``Tensor`` that ``trial.tensor(name)`` returns."""

from .._modes import StepState
from ..trials import Tensor

__all__ = ["StepState", "Tensor"]
