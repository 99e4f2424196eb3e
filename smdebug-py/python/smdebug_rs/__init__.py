"""smdebug_rs: read smdebug runs, run rules and load profiler data from Python, on the Rust
reader of smdebug for Rust.

Ports from Python smdebug 1.0.34 by changing the import::

    from smdebug_rs.trials import create_trial
    from smdebug_rs import modes
    trial = create_trial("target/smdebug-demo/run")
    trial.tensor("loss").values(mode=modes.TRAIN)
"""

from . import exceptions, profiler, rules, trials
from ._modes import ModeKeys, StepState
from ._modes import ModeKeys as modes

__all__ = ["ModeKeys", "StepState", "exceptions", "modes", "profiler", "rules", "trials"]
