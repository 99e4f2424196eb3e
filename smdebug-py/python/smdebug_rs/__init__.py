"""smdebug_rs: read smdebug runs, run rules and load profiler data from Python, on the Rust
reader of smdebug for Rust.

Ports from Python smdebug 1.0.34 by changing the import::

    from smdebug_rs.trials import create_trial
    from smdebug_rs import modes
    trial = create_trial("target/smdebug-demo/run")
    trial.tensor("loss").values(mode=modes.TRAIN)

smdebug's other import paths are mirrored: ``smdebug_rs.core.modes``, ``smdebug_rs.core.tensor``,
``smdebug_rs.core.collection`` (``CollectionKeys``),
``smdebug_rs.exceptions``, ``smdebug_rs.rules`` (``Rule``, ``invoke_rule``),
``smdebug_rs.rules.rule_invoker`` and ``smdebug_rs.analysis.utils`` (``no_refresh``). When
Python smdebug is installed, the exceptions subclass smdebug's and ``ModeKeys``/``StepState`` are
smdebug's own classes, so code that keeps smdebug's imports for those works on these trials.
"""

from . import analysis, core, exceptions, profiler, rules, trials
from ._modes import ModeKeys, StepState
from ._modes import ModeKeys as modes
from .analysis import utils as _utils  # noqa: F401 - smdebug_rs.analysis.utils
from .core import collection as _core_collection, modes as _core_modes, tensor as _core_tensor  # noqa: F401

__all__ = ["ModeKeys", "StepState", "analysis", "core", "exceptions", "modes", "profiler", "rules", "trials"]
